"""A client-only node, and relocate / drain asked of another node (command 61).

Nodes of one process share a named ``memory://`` store and talk over real loopback
links on the real clock; every test is bounded by ``trio.fail_after``. ``ops`` is a
``client_only`` node: it hosts nothing, so placement never chooses it, yet it asks the
owner of a Spot to move it, and a node to drain.
"""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

import attrs
import pytest
import trio

import zlink_trio as zl
from zlink_trio.core.placement import Role
from zlink_trio.store import open_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@attrs.frozen
class Put:
    n: int


@attrs.frozen
class Where:
    total: int
    node: str


class _Base:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.total = 0

    @zl.handler
    async def put(self, msg: Put) -> Where:
        self.total += msg.n
        return Where(self.total, str(self.ctx.ref.node_rid))


class Adapter:
    def capture(self, spot: _Base) -> bytes:
        return str(spot.total).encode()

    def restore(self, spot: _Base, data: bytes) -> None:
        spot.total = int(data)


@zl.instance_spot("op-kept", relocation=zl.PreserveStateWith(Adapter()))
class Kept(_Base):
    pass


@zl.instance_spot("op-pinned", relocation=zl.DisableRelocation())
class Pinned(_Base):
    pass


@zl.user_spot("op-room", relocation=zl.RecreateOnRelocation())
class Room(_Base):
    def __init__(self, ctx: zl.SpotContext, request: object) -> None:
        super().__init__(ctx)


SPOTS = [Kept, Pinned, Room]


@asynccontextmanager
async def mesh() -> AsyncIterator[tuple[zl.Node, zl.Node, zl.Node]]:
    """``a`` (takes every new Spot), ``b`` (weight 0: only named or drained to) and ``ops``."""
    url = f"memory://ops-{uuid.uuid4().hex}"
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(open_store(url))
        a = await stack.enter_async_context(zl.open_node("a", store=url, spots=SPOTS))
        b = await stack.enter_async_context(zl.open_node("b", store=url, spots=SPOTS,
                                                         placement_weight=0.0))
        ops = await stack.enter_async_context(zl.open_node("ops", store=url, client_only=True))
        yield a, b, ops


async def test_a_client_only_node_hosts_nothing_and_reaches_every_spot():
    with trio.fail_after(20):
        async with mesh() as (a, _b, ops):
            created = await ops.spots.get_or_create("r-1", "op-room").timeout(5)
            assert created.state is zl.CreateState.CREATED
            assert created.ref.node_rid == a.node_rid  # never on ops
            total = await ops.client.request("k-1", Put(2), reply=Where).instance_spot(
                "op-kept").timeout(5)
            assert total.total == 2
            assert (await ops.spots.find("k-1")).node_rid == a.node_rid  # type: ignore[union-attr]
            assert ops.statistics().active_spots == 0
            fresh = await ops.spots.create("op-room")
            assert fresh.ref.node_rid == a.node_rid


async def test_the_client_only_claim_has_only_the_client_role_and_no_capacity():
    url = f"memory://ops-{uuid.uuid4().hex}"
    with trio.fail_after(20):
        async with open_store(url) as store, zl.open_node("ops", store=url,
                                                          client_only=True) as ops:
            (claim,) = await store.location.descriptors(now=trio.current_time())
            descriptor = claim.descriptor
            assert descriptor.node_rid == ops.node_rid
            assert descriptor.roles == frozenset({Role.OBJECT_CLIENT})
            assert (dict(descriptor.served_types), descriptor.capacity,
                    descriptor.placement_weight) == ({}, 0, 0.0)
            with pytest.raises(zl.NotFound, match="no serving object server"):
                await ops.client.request("k-1", Put(1), reply=Where).instance_spot(
                    "op-kept").timeout(5)


@pytest.mark.parametrize("value", [1, "yes"])
async def test_client_only_with_spots_or_not_a_bool_is_a_configuration_error(value):
    with pytest.raises(zl.InvalidConfiguration, match="client_only"):
        async with zl.open_node("ops", client_only=value):
            pass
    with pytest.raises(zl.InvalidConfiguration, match="hosts no Spots"):
        async with zl.open_node("ops", spots=SPOTS, client_only=True):
            pass


async def test_ask_relocate_moves_a_spot_another_node_owns():
    with trio.fail_after(20):
        async with mesh() as (a, b, ops):
            await ops.client.request("k-1", Put(5), reply=Where).instance_spot("op-kept")
            before = await ops.spots.find("k-1")
            result = await ops.ask_relocate("k-1", to="b")
            assert result.outcome is zl.RelocationOutcome.COMMITTED
            assert result.ref.node_rid == b.node_rid
            assert before is not None
            assert result.ref.generation == before.generation
            assert (await ops.client.request("k-1", Put(1), reply=Where)).total == 6
            assert (a.statistics().active_spots, b.statistics().active_spots) == (0, 1)
            # Without ``to`` placement picks among the other hosts -- never ops.
            back = await ops.ask_relocate("k-1")
            assert back.outcome is zl.RelocationOutcome.COMMITTED
            assert back.ref.node_rid == a.node_rid
            # On its own owner it is plain relocate.
            here = await a.ask_relocate("k-1", to="b")
            assert here.ref.node_rid == b.node_rid


async def test_ask_relocate_reports_refusals_and_errors_of_the_owner():
    with trio.fail_after(20):
        async with mesh() as (_a, _b, ops):
            await ops.client.request("p-1", Put(1), reply=Where).instance_spot("op-pinned")
            refused = await ops.ask_relocate("p-1", to="b")
            assert refused.outcome is zl.RelocationOutcome.REFUSED
            assert "DisableRelocation" in (refused.reason or "")
            await ops.client.request("k-2", Put(1), reply=Where).instance_spot("op-kept")
            to_ops = await ops.ask_relocate("k-2", to="ops")
            assert to_ops.outcome is zl.RelocationOutcome.REFUSED
            assert "'ops' is not a live node" in (to_ops.reason or "")
            with pytest.raises(zl.NotFound):
                await ops.ask_relocate("nobody")
            with pytest.raises(zl.InvalidOperation):
                await ops.ask_relocate("x" * 256)


async def test_ask_drain_empties_another_node_and_closes_it_to_placement():
    url = f"memory://ops-{uuid.uuid4().hex}"
    with trio.fail_after(30):
        async with open_store(url), zl.open_node("a", store=url, spots=SPOTS) as a, \
                zl.open_node("ops", store=url, client_only=True) as ops:
            for i in range(5):
                await ops.client.request(f"k-{i}", Put(i), reply=Where).instance_spot("op-kept")
            await ops.client.request("p-1", Put(1), reply=Where).instance_spot("op-pinned")
            async with zl.open_node("b", store=url, spots=SPOTS) as b:  # placement may pick b
                result = await ops.ask_drain("a")
                assert sorted(r.ref.spot_id for r in result.moved) == [f"k-{i}" for i in range(5)]
                assert {r.ref.node_rid for r in result.moved} == {b.node_rid}
                assert [(r.ref.spot_id, r.outcome) for r in result.not_moved] == [
                    ("p-1", zl.RelocationOutcome.REFUSED)]
                assert result.unlisted == 0
                assert a.statistics().active_spots == 1  # the pinned one stayed
                # a takes no new Spots any more: the next ones land on b.
                for i in range(3):
                    await ops.client.request(f"n-{i}", Put(1), reply=Where).instance_spot(
                        "op-kept")
                    assert (await ops.spots.find(f"n-{i}")).node_rid == b.node_rid  # type: ignore[union-attr]
                with pytest.raises(zl.NotFound, match="no live node 'zzz'"):
                    await ops.ask_drain("zzz")


async def test_ask_undrain_reopens_a_drained_node_to_new_spots():
    url = f"memory://ops-{uuid.uuid4().hex}"
    with trio.fail_after(30):
        async with open_store(url) as store, zl.open_node("a", store=url, spots=SPOTS) as a, \
                zl.open_node("ops", store=url, client_only=True) as ops:
            await a.undrain()  # never drained: nothing to undo
            await ops.ask_drain("a")
            # The only node serving the types is draining: retryable, and it says so.
            with pytest.raises(zl.Unavailable,
                               match=r"every node of Mesh 'world' serving INSTANCE type "
                                     r"'op-kept' \(node 'a'\) is draining or stopping"):
                await ops.client.request("k-1", Put(1), reply=Where).instance_spot(
                    "op-kept").timeout(5)
            with pytest.raises(zl.Unavailable, match=r"USER type 'op-room'.*undrain"):
                await ops.spots.create("op-room").timeout(5)
            await ops.ask_undrain("a")
            claims = await store.location.descriptors(now=trio.current_time())
            assert {c.descriptor.node_id: c.accepts_placements for c in claims} == {
                "a": True, "ops": True}
            await ops.client.request("k-1", Put(1), reply=Where).instance_spot("op-kept")
            assert (await ops.spots.find("k-1")).node_rid == a.node_rid  # type: ignore[union-attr]
            assert (await ops.spots.create("op-room")).ref.node_rid == a.node_rid
            await ops.ask_undrain("a")  # idempotent, across nodes too
            with pytest.raises(zl.NotFound, match="no live node 'zzz'"):
                await ops.ask_undrain("zzz")

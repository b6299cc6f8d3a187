"""A draining node takes no new Spots from any node: its claim says so in the store.

``Node.drain`` marks the node's claim with ``close_placement``; every other node reads
the claim with ``accepts_placements`` false and places neither Instance nor User Spots
there, and ``Node.undrain`` clears the mark (``open_placement``) so that it takes new
Spots again. Two nodes share one store -- ``memory://``, a SQLite file and Redis (a fresh key
prefix) -- and talk over real loopback links, so these tests run on the real clock,
each bounded by ``trio.fail_after``; nothing sleeps.

Placement is a weighted random choice (``core.placement.choose_node``). Node ``a`` gets a
:class:`Steered` generator whose ``random()`` the test sets before each call: ``0.0``
picks the first candidate in the store's key order, ``LAST`` the last. Alternating the
two puts exactly every other new Spot on each of two equal nodes, whichever NodeRid
sorts first -- so "some land on b before the drain" and "none after" are both exact.
"""

from __future__ import annotations

import logging
import random
import types
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

import zlink_trio as zl
from zlink_trio.core.placement import _rendezvous_score
from zlink_trio.runtime.coordinators import relocation
from zlink_trio.store import open_store
from zlink_trio.store.memory import MemoryLocationStore
from zlink_trio.testing import MemoryStoreWith

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from zlink_trio.core.identity import NodeRid

#: The largest draw below 1.0 used here: ``choose_node`` takes the last candidate.
LAST = 0.999
#: New Spots per phase and kind (even: half of them draw each end).
CALLS = 8


@attrs.frozen
class Hello:
    n: int


@attrs.frozen
class Here:
    node: str


@attrs.frozen
class Spec:
    name: str = "r"


@zl.instance_spot("drain-counter", relocation=zl.RecreateOnRelocation())
class Counter:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx

    @zl.handler
    async def hello(self, msg: Hello) -> Here:
        return Here(str(self.ctx.ref.node_rid))


@zl.user_spot("drain-room", relocation=zl.RecreateOnRelocation())
class Room:
    def __init__(self, ctx: zl.SpotContext, request: Spec | None) -> None:
        self.ctx = ctx


SPOTS = [Counter, Room]


class Steered(random.Random):
    """Seeded for IDs; ``random()`` (placement's only draw) returns :attr:`draw`."""

    def __init__(self) -> None:
        super().__init__(0)
        self.draw = 0.0

    def random(self) -> float:
        return self.draw


@asynccontextmanager
async def two_nodes(url: str, rng: Steered) -> AsyncIterator[tuple[zl.Node, zl.Node]]:
    """Nodes ``a`` (placement steered by ``rng``) and ``b``, equal weight, both serving."""
    async with AsyncExitStack() as stack:
        if url.startswith("memory://"):  # the named in-process store lives while held
            await stack.enter_async_context(open_store(url))
        a = await stack.enter_async_context(zl.open_node(
            "node-a", store=url, spots=SPOTS, injected=zl.InjectedOptions(random=rng)))
        b = await stack.enter_async_context(zl.open_node("node-b", store=url, spots=SPOTS))
        yield a, b


def rendezvous_ids(tag: str, first: NodeRid, second: NodeRid) -> list[str]:
    """``CALLS`` new IDs that weighted rendezvous hashing (equal weights) places on
    ``first`` and ``second`` in turn -- a first call with Instance intent places by ID."""
    def score(spot_id: str, rid: NodeRid) -> float:
        node = types.SimpleNamespace(weight=1.0, node_rid=rid)
        return _rendezvous_score(spot_id.encode(), node)  # type: ignore[arg-type]

    ids: list[str] = []
    for k in range(10_000):
        spot_id, want = f"{tag}-{k}", (first, second)[len(ids) % 2]
        other = second if want == first else first
        if score(spot_id, want) > score(spot_id, other):
            ids.append(spot_id)
            if len(ids) == CALLS:
                return ids
    raise AssertionError("no IDs found")


async def place_new_spots(a: zl.Node, b: zl.Node, rng: Steered, tag: str) -> list[NodeRid]:
    """``CALLS`` first calls with Instance intent (to IDs that hash to ``b`` and ``a`` in
    turn) and ``CALLS`` User creates (drawing each end of placement's range in turn), from
    ``a``; the owner of each."""
    owners: list[NodeRid] = []
    for i, spot_id in enumerate(rendezvous_ids(tag, b.node_rid, a.node_rid)):
        here = await a.client.request(spot_id, Hello(i), reply=Here).instance_spot(
            "drain-counter").timeout(10)
        ref = await a.spots.find(spot_id)
        assert ref is not None
        assert here.node == str(ref.node_rid)
        owners.append(ref.node_rid)
    for i in range(CALLS):
        rng.draw = 0.0 if i % 2 else LAST
        created = await a.spots.create("drain-room").request(Spec()).timeout(10)
        assert created.state is zl.CreateState.CREATED
        owners.append(created.ref.node_rid)
    return owners


async def test_after_drain_other_nodes_place_no_new_spot_on_the_drained_node(url: str):
    rng = Steered()
    with trio.fail_after(60):
        async with two_nodes(url, rng) as (a, b):
            before = await place_new_spots(a, b, rng, "before")
            # Both nodes take new Spots: each end of the draw is one of them.
            assert before.count(b.node_rid) == CALLS
            assert before.count(a.node_rid) == CALLS

            drained = await b.drain(timeout=30)
            assert drained.not_moved == []
            assert len(drained.moved) == CALLS
            assert {r.ref.node_rid for r in drained.moved} == {a.node_rid}

            after = await place_new_spots(a, b, rng, "after")
            # The same draws now all land on a: b's claim says it takes no new Spots.
            assert after == [a.node_rid] * (2 * CALLS)
            # b itself places nothing on itself either (its own flag).
            here = await b.client.request("from-b", Hello(0), reply=Here).instance_spot(
                "drain-counter").timeout(10)
            assert here.node == str(a.node_rid)


async def test_a_move_that_fails_unexpectedly_is_listed_and_the_drain_goes_on(
        url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    rng = Steered()
    relocate_spot = relocation.relocate_spot
    with trio.fail_after(60):
        async with two_nodes(url, rng) as (a, b):
            ids = rendezvous_ids("fault", b.node_rid, a.node_rid)[::2]
            for i, spot_id in enumerate(ids):  # each placed on b by its ID
                await a.client.request(spot_id, Hello(i), reply=Here).instance_spot(
                    "drain-counter").timeout(10)
            faulty = ids[1]

            async def one_fails(rt: Any, spot_id: str, *args: Any, **kwargs: Any) -> Any:
                if spot_id == faulty:
                    raise RuntimeError("a fault in this move (test)")
                return await relocate_spot(rt, spot_id, *args, **kwargs)

            monkeypatch.setattr(relocation, "relocate_spot", one_fails)
            drained = await b.drain(timeout=30)
            assert sorted(r.ref.spot_id for r in drained.moved) == sorted(
                i for i in ids if i != faulty)
            assert [(r.ref.spot_id, r.outcome) for r in drained.not_moved] == [
                (faulty, zl.RelocationOutcome.ABORTED)]
            assert "RuntimeError" in (drained.not_moved[0].reason or "")
    assert any("failed unexpectedly" in r.getMessage() and r.exc_info
               for r in caplog.records)


class FailingClose(MemoryLocationStore):
    """A Location Store whose ClosePlacement fails (``hang``: never answers)."""

    def __init__(self, *, hang: bool) -> None:
        super().__init__()
        self.hang = hang
        self.calls = 0

    async def close_placement(self, mesh: str, node_rid: Any,
                              lifecycle_generation: int) -> bool:
        self.calls += 1
        if self.hang:
            await trio.sleep_forever()
        raise zl.Unavailable("the store is down (test)")


@pytest.mark.parametrize("hang", [False, True], ids=["error", "hang"])
async def test_a_drain_whose_claim_cannot_be_marked_warns_and_goes_on(
        autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture, hang: bool):
    location = FailingClose(hang=hang)
    caplog.set_level(logging.WARNING, logger="zlink_trio")
    with trio.fail_after(30):
        async with zl.open_node("node-a", store=MemoryStoreWith(location), spots=SPOTS,
                                listen=None) as a:
            drained = await a.drain(timeout=5)  # a hang is cut by the drain's deadline
            assert (drained.moved, drained.not_moved) == ([], [])
            assert location.calls == 1
            # The local flag still holds: a places no new Spot on itself, and says so.
            with pytest.raises(zl.Unavailable, match="draining or stopping"):
                await a.client.request("x-1", Hello(1), reply=Here).instance_spot(
                    "drain-counter").timeout(5)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("draining" in m and "node-a" in m for m in warned), warned


async def test_undrain_takes_new_spots_again_from_every_node(url: str):
    rng = Steered()
    with trio.fail_after(60):
        async with two_nodes(url, rng) as (a, b):
            await a.undrain()  # a node that never drained: nothing to undo
            drained = await b.drain(timeout=30)
            assert drained.moved == []
            assert await place_new_spots(a, b, rng, "drained") == [a.node_rid] * (2 * CALLS)
            await b.undrain()
            await b.undrain()  # idempotent
            # a reads b's claim as accepting again at its next read of the claims (a
            # create reads them; a first call reuses a read that places it on a itself
            # for up to placement_max_age): the same draws land on both nodes.
            await a.spots.create("drain-room").request(Spec()).timeout(10)
            after = await place_new_spots(a, b, rng, "undrained")
            assert after.count(b.node_rid) == CALLS
            assert after.count(a.node_rid) == CALLS
            # b chooses itself again for an ID that hashes to it.
            (mine, *_) = rendezvous_ids("from-b", b.node_rid, a.node_rid)
            here = await b.client.request(mine, Hello(0), reply=Here).instance_spot(
                "drain-counter").timeout(10)
            assert here.node == str(b.node_rid)


class FailingOpen(MemoryLocationStore):
    """A Location Store whose OpenPlacement fails (``hang``: never answers)."""

    def __init__(self, *, hang: bool) -> None:
        super().__init__()
        self.hang = hang

    async def open_placement(self, mesh: str, node_rid: Any,
                             lifecycle_generation: int) -> bool:
        if self.hang:
            await trio.sleep_forever()
        raise zl.Unavailable("the store is down (test)")


@pytest.mark.parametrize("hang", [False, True], ids=["error", "hang"])
async def test_an_undrain_the_store_cannot_record_raises_and_changes_nothing(
        autojump_clock: trio.abc.Clock, hang: bool):
    location = FailingOpen(hang=hang)
    with trio.fail_after(30):
        async with zl.open_node("node-a", store=MemoryStoreWith(location), spots=SPOTS,
                                listen=None) as a:
            await a.drain(timeout=5)
            expected = zl.DeadlineExceeded if hang else zl.Unavailable
            with pytest.raises(expected, match="undrain again" if hang else "store is down"):
                await a.undrain(timeout=5)
            # Still drained, here and in the store: the mark is the one it had.
            (claim,) = await location.descriptors(now=trio.current_time())
            assert claim.accepts_placements is False
            with pytest.raises(zl.Unavailable, match="draining or stopping"):
                await a.client.request("x-1", Hello(1), reply=Here).instance_spot(
                    "drain-counter").timeout(5)


async def test_undrain_of_a_closed_node_is_refused(autojump_clock: trio.abc.Clock):
    with trio.fail_after(30):
        async with zl.open_node("node-a", spots=SPOTS, listen=None) as a:
            pass
        with pytest.raises(zl.InvalidOperation, match="is closed"):
            await a.undrain()

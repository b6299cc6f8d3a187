"""Contract tests for spec 06 (Spot Address Messaging) §10, one test per item, on one node.

Each test is named after its item and quotes the item's sentence in its docstring. Only the
public surface is used: ``import zlink_trio as zl`` (``open_node``, ``node.spots``,
``node.client``, ``SpotRef``, results and typed errors). Where an item says "nothing is
written", the test reads the store (the ``store`` fixture: ``location.find`` /
``statistics``), never writes it. The items that touch the store (creation convergence,
cold activation, close) run on every backend -- ``memory://``, SQLite and Redis -- through
the ``store_url`` fixture (``conftest.py``); the rest use their own ``MemoryStore``.
These nodes run on ``MockClock`` and so without mesh links (``listen=None``), so no test
here sends a message across nodes: several nodes of one process share a store only where
an item is about the store's one namespace (a Spot ID in two Meshes).

The items about more than one node run on two or three *listening* nodes (real loopback
links) on every backend in ``test_spec_0*_cross_node.py``, under the same names (a suffix for
a second branch):

- "Remote User Spot create fixes provider reservation and target lifecycle in command 47,
  reads Pending creation content directly from the store, and returns the terminal result
  exactly once via command 20." -- ``test_remote_user_spot_create_fixes_reservation_in_
  command_47`` and ``..._withdrawn_at_deadline`` (a redelivered operation ID:
  ``test_remote_calls.py``).
- "Remote User Spot Close fixes the SpotRef, owner generation, StoreVersion, and target
  lifecycle in command 48, and doesn't use a Location row lookup or application control
  packet as completion." -- ``test_remote_user_spot_close_fixes_ref_and_fences_in_command_
  48`` (stale generation) and ``..._moving_conflict``.
- "The cold-activation source doesn't create an owner claim ..." -- source and target on
  two nodes there; source and target on one node here.
- "A message isn't delivered to a local instance that doesn't match the Store's current
  authority. A target that didn't obtain creation authority doesn't create a separate
  instance." -- there (the loser is the other node); here, the first sentence for this
  node's own incarnation of an earlier generation (``..._local_generation``).
- "Missing, Creating, and Store failure aren't negative-cached." -- Missing and Creating
  seen from another node there; Store failure here.

Covered elsewhere or by later issues (no stubs here):

- "Entry Spot join and placement use the descriptor's lifecycle mapping and don't parse the
  Spot ID string." -- needs Actor join into an Entry Spot (membership, spec 05) and remote
  placement through published descriptors of other processes.
- "Message Follow only uses a committed route. Its relay queue has no relocation-specific
  item-count or byte bound, and it preserves operation identity." -- needs two node
  processes with listening links, so it is ``tests/mesh/test_mesh_relocation.py::
  test_message_follow_only_uses_a_committed_route_has_no_relocation_bound_and_preserves_operation_identity``
  (the checks one rule each: ``test_message_follow.py``).
- "User Spot Close doesn't secretly clean up active membership." -- needs Actor membership,
  which this version does not have.
- "C++, .NET, JVM, and Node.js provide the same terminal results for create competition,
  logical messaging, cold activation, close, and Message Follow." -- needs the other
  language implementations.

The Spots, their messages, the probe they record into and the node opener are shared with
``test_spec_09.py`` in ``spec_helpers.py``.

Timing runs on ``MockClock`` (the ``autojump_clock`` fixture): ``trio.sleep`` in a test
advances mock time only, and every test is bounded by ``trio.fail_after(10)`` (mock
seconds, so a hang fails at once instead of waiting).
"""

from __future__ import annotations

import contextlib
import inspect
import random
import re
import uuid
from functools import partial

import pytest
import trio
import trio.testing
from spec_helpers import (
    PROBE,
    Counter,
    Gauge,
    Note,
    Ping,
    Pong,
    Recorder,
    Room,
    RoomSpec,
    Welcome,
    missing_calls_end_not_found,
    open_test_node,
    store_unchanged,
    wait_until,
)

import zlink_trio as zl
from zlink_trio.store import MemoryStore
from zlink_trio.store.memory import MemoryLocationStore
from zlink_trio.testing import MemoryStoreWith

UUID4 = re.compile(r"\A[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\Z")


@pytest.fixture(autouse=True)
def _fresh_probe():
    PROBE.reset()


# --- Spot ID and the reserved format -------------------------------------------------------


async def test_spot_id_is_global_key_not_duplicated_per_mesh(autojump_clock, store_url, store):
    """Spot ID is a global key across the whole Store namespace and doesn't allow
    duplication per MeshName."""
    mem = store
    with trio.fail_after(10):
        async with (
            open_test_node("node-a", store=store_url, mesh="mesh-a") as a,
            open_test_node("node-b", store=store_url, mesh="mesh-b") as b,
        ):
            created = await a.spots.get_or_create("r-1", "room").in_mesh("mesh-a").timeout(5)
            assert created.state is zl.CreateState.CREATED
            assert created.ref.mesh == "mesh-a"
            assert created.ref.node_rid == a.node_rid
            # The same ID asked for in another Mesh is the existing incarnation, not a second one.
            again = await b.spots.get_or_create("r-1", "room").in_mesh("mesh-b").timeout(5)
            assert again.state is zl.CreateState.EXISTING
            assert again.ref == created.ref
            assert await b.spots.find("r-1") == created.ref
            # An Instance Spot activated in mesh-b holds its ID in every Mesh, and so does r-1.
            pong = await (
                b.client.request("c-1", Ping(), reply=Pong)
                .instance_spot("counter").in_mesh("mesh-b").timeout(5)
            )
            assert pong.node_rid == str(b.node_rid)
            with pytest.raises(zl.TypeMismatch):
                await a.spots.get_or_create("c-1", "room").in_mesh("mesh-a").timeout(5)
            with pytest.raises(zl.TypeMismatch):
                await (
                    a.client.request("r-1", Ping(), reply=Pong)
                    .instance_spot("counter").in_mesh("mesh-a").timeout(5)
                )
            assert sorted(PROBE.factory_ids()) == ["c-1", "r-1"]
            location = await mem.location.statistics()
            assert (location.ready, location.creating) == (4, 0)  # 2 Entry Spots + r-1 + c-1
            assert (await b.spots.find("c-1")).generation == pong.generation


async def test_reserved_entry_format_is_rejected_before_reservation_and_factory(autojump_clock):
    """If a caller specifies a User/Instance Spot ID in the reserved
    <prefix>-entry-<lowercase-canonical-uuid-v4> format, it's rejected with InvalidOperation
    before Store reservation and factory execution."""
    mem = MemoryStore()
    with trio.fail_after(10):
        async with open_test_node(store=mem) as node:
            location_before = await mem.location.statistics()
            entry_before = await mem.location.find(node.entry_spot_id)
            assert entry_before is not None
            reserved = [f"game-entry-{uuid.uuid4()}", node.entry_spot_id]
            for spot_id in reserved:
                with pytest.raises(zl.InvalidOperation):
                    await node.spots.get_or_create(spot_id, "room").timeout(5)
                with pytest.raises(zl.InvalidOperation):
                    await (
                        node.client.request(spot_id, Ping(), reply=Pong)
                        .instance_spot("counter").timeout(5)
                    )
                with pytest.raises(zl.InvalidOperation):
                    await node.client.send(spot_id, Ping()).instance_spot().timeout(5)
            assert PROBE.factory_runs == []
            assert await mem.location.statistics() == location_before
            assert (await mem.relocation.statistics()).roots == 0
            assert await mem.location.find(reserved[0]) is None
            assert await mem.location.find(node.entry_spot_id) == entry_before
            # Only the exact reserved form is refused: upper-case UUID text is an ordinary ID.
            upper = f"game-entry-{str(uuid.uuid4()).upper()}"
            result = await node.spots.get_or_create(upper, "room").timeout(5)
            assert result.state is zl.CreateState.CREATED


class RiggedRandom(random.Random):
    """A seeded generator whose 16-byte draws (uuid4s) can be pinned to force a collision."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.pinned: bytes | None = None
        self.uuid_draws = 0

    def randbytes(self, n: int) -> bytes:
        if n == 16:
            self.uuid_draws += 1
            if self.pinned is not None:
                return self.pinned
        return super().randbytes(n)


async def test_create_issues_lowercase_uuid4_and_no_second_uuid_on_conflict(autojump_clock):
    """User Spot Create issues a lowercase canonical UUID v4 string and does not generate a
    second UUID on an active conflict."""
    mem = MemoryStore()
    rng = RiggedRandom(6)
    with trio.fail_after(10):
        async with open_test_node(store=mem, random=rng) as node:
            draws = rng.uuid_draws
            first = await node.spots.create("room").timeout(5)
            draws_per_create = rng.uuid_draws - draws
            second = await node.spots.create("room").timeout(5)
            for result in (first, second):
                spot_id = result.ref.spot_id
                assert result.state is zl.CreateState.CREATED
                assert UUID4.match(spot_id), spot_id
                assert str(uuid.UUID(spot_id)) == spot_id
                assert uuid.UUID(spot_id).version == 4
                assert await node.spots.find(spot_id) == result.ref
            assert first.ref.spot_id != second.ref.spot_id
            # Force a collision: every uuid4 the node draws now is an ID with active authority.
            taken = str(uuid.UUID(bytes=bytes(range(16)), version=4))
            assert (await node.spots.get_or_create(taken, "room").timeout(5)).state is (
                zl.CreateState.CREATED
            )
            location_before = await mem.location.statistics()
            runs_before = list(PROBE.factory_runs)
            rng.pinned = uuid.UUID(taken).bytes
            draws = rng.uuid_draws
            with pytest.raises(zl.AlreadyExists):
                await node.spots.create("room").timeout(5)
            conflict_draws = rng.uuid_draws - draws
            rng.pinned = None
            # No second UUID drawn, no second reservation, no factory run.
            assert conflict_draws == draws_per_create
            assert await mem.location.statistics() == location_before
            assert PROBE.factory_runs == runs_before
            assert (await node.spots.find(taken)).generation is not None


# --- Convergence of Create and GetOrCreate -------------------------------------------------


def _required_positional(method: object) -> list[str]:
    return [
        p.name for p in inspect.signature(method).parameters.values()
        if p.default is p.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


ROUTE_WORDS = ("rid", "node", "endpoint", "target", "owner", "route")


async def test_create_and_get_or_create_need_no_target_rid_or_endpoint(autojump_clock):
    """User Spot Create/GetOrCreate don't require target RID and endpoint from the
    application."""
    with trio.fail_after(10):
        async with open_test_node() as node:
            assert len(_required_positional(node.spots.get_or_create)) == 2  # id, stable type
            assert len(_required_positional(node.spots.create)) == 1  # stable type
            for method in (node.spots.get_or_create, node.spots.create):
                names = [p.lower() for p in inspect.signature(method).parameters]
                assert not [n for n in names for w in ROUTE_WORDS if w in n], names
            got = await node.spots.get_or_create("r-1", "room")
            made = await node.spots.create("room")
            for result in (got, made):
                assert result.state is zl.CreateState.CREATED
                assert result.ref.node_rid == node.node_rid  # chosen by the framework
                assert result.ref.mesh == node.mesh


async def test_spot_manager_provides_no_instance_spot_create(autojump_clock):
    """The Spot manager doesn't provide Instance Spot create/get-or-create."""
    mem = MemoryStore()
    with trio.fail_after(10):
        async with open_test_node(store=mem) as node:
            location_before = await mem.location.statistics()
            with pytest.raises(zl.TypeMismatch):
                await node.spots.get_or_create("c-1", "counter").timeout(5)
            with pytest.raises(zl.TypeMismatch):
                await node.spots.create("counter").timeout(5)
            assert await mem.location.statistics() == location_before
            assert PROBE.factory_runs == []
            # An existing Instance Spot is not returned as Existing by the manager either.
            await node.client.request("c-2", Ping(), reply=Pong).instance_spot("counter").timeout(5)
            with pytest.raises(zl.TypeMismatch):
                await node.spots.get_or_create("c-2", "counter").timeout(5)
            assert PROBE.factory_ids() == ["c-2"]
            assert await node.spots.find("c-1") is None
            public = [name for name in dir(node.spots) if not name.startswith("_")]
            assert [name for name in public if "instance" in name.lower()] == []


async def test_concurrent_create_converges_to_one_authority_and_factory_run(
    autojump_clock, store_url, store,
):
    """Concurrent create converges to one authority attempt and factory execution."""
    mem = store
    gate = PROBE.activate_gates["r-1"] = trio.Event()
    results: list[object] = []
    with trio.fail_after(10):
        async with open_test_node(store=store_url) as node:

            async def caller(i: int) -> None:
                call = node.spots.get_or_create("r-1", "room").request(RoomSpec(f"caller-{i}"))
                results.append(await call.timeout(9))

            async with trio.open_nursery() as nursery:
                for i in range(100):
                    nursery.start_soon(caller, i)
                await PROBE.started("r-1").wait()
                await trio.testing.wait_all_tasks_blocked()
                gate.set()
            created = [r for r in results if r.state is zl.CreateState.CREATED]
            existing = [r for r in results if r.state is zl.CreateState.EXISTING]
            assert (len(created), len(existing)) == (1, 99)
            assert {r.ref for r in results} == {created[0].ref}
            assert created[0].reply == Welcome("welcome to r-1")
            assert {r.reply for r in existing} == {None}
            assert PROBE.factory_ids() == ["r-1"]
            assert await node.spots.find("r-1") == created[0].ref
            location = await mem.location.statistics()
            assert (location.ready, location.creating) == (2, 0)  # Entry Spot + r-1

            # An attempt that is declined is not shared: the waiters compete again, and one
            # of them creates the Spot with its own request.
            gate = PROBE.activate_gates["r-2"] = trio.Event()
            first: list[object] = []
            others: list[object] = []

            async def get_or_create(spec: RoomSpec, into: list[object]) -> None:
                call = node.spots.get_or_create("r-2", "room").request(spec)
                into.append(await call.timeout(9))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(get_or_create, RoomSpec("reject"), first)
                await PROBE.started("r-2").wait()
                for i in range(20):
                    nursery.start_soon(get_or_create, RoomSpec(f"other-{i}"), others)
                await trio.testing.wait_all_tasks_blocked()
                PROBE.activate_gates.pop("r-2")
                gate.set()
            assert first[0].state is zl.CreateState.REJECTED
            assert first[0].reply == Welcome("declined")
            created = [r for r in others if r.state is zl.CreateState.CREATED]
            assert len(created) == 1, [(r.state, r.ref.generation) for r in others]
            assert [r.state for r in others].count(zl.CreateState.EXISTING) == 19
            assert {r.ref for r in others} == {created[0].ref}
            assert created[0].ref.generation > first[0].ref.generation
            requests = [req for sid, req in PROBE.create_requests if sid == "r-2"]
            assert len(requests) == 2  # the declined attempt and the winner, nobody else
            assert requests[0] == RoomSpec("reject")
            assert requests[1].name.startswith("other-")
            assert await node.spots.find("r-2") == created[0].ref


async def test_spot_ref_keeps_generation_but_is_not_a_messaging_target(autojump_clock):
    """SpotRef preserves the public generation but isn't used as a messaging target."""
    with trio.fail_after(10):
        async with open_test_node() as node:
            first = await node.spots.get_or_create("r-1", "room").timeout(5)
            old = first.ref
            assert type(old.generation) is int
            assert 0 < old.generation < 2**63
            assert await node.spots.find("r-1") == old
            pong = await node.client.request("r-1", Ping(), reply=Pong).timeout(5)
            assert pong.generation == old.generation
            with pytest.raises(zl.InvalidOperation):
                await node.client.request(old, Ping(), reply=Pong).timeout(5)
            with pytest.raises(zl.InvalidOperation):
                await node.client.send(old, Ping())
            assert await node.spots.close(old) is True
            second = await node.spots.get_or_create("r-1", "room").timeout(5)
            assert second.state is zl.CreateState.CREATED
            assert second.ref.generation > old.generation
            assert old.generation == first.ref.generation  # the snapshot did not change
            # Messages go to the Spot ID's current incarnation, whatever ref the caller holds.
            pong = await node.client.request(old.spot_id, Ping(), reply=Pong).timeout(5)
            assert pong.generation == second.ref.generation


# --- Direct call and cold activation -------------------------------------------------------


async def test_direct_starter_takes_only_spot_id_and_no_owner_route(autojump_clock):
    """The Spot direct starter method only takes a Spot ID and doesn't require an owner
    route."""
    with trio.fail_after(10):
        async with open_test_node() as node:
            assert len(_required_positional(node.client.send)) == 2  # spot id, message
            assert len(_required_positional(node.client.request)) == 2  # spot id, message
            for method in (node.client.send, node.client.request):
                names = [p.lower() for p in inspect.signature(method).parameters]
                assert not [n for n in names for w in ROUTE_WORDS if w in n], names
            await node.spots.get_or_create("r-1", "room").timeout(5)
            pong = await node.client.request("r-1", Note("request"), reply=Pong)
            assert pong.node_rid == str(node.node_rid)
            await node.client.send("r-1", Note("send"))

            async def sent_arrived() -> bool:
                return Note("send") in PROBE.messages_of("r-1")

            await wait_until(sent_arrived)
            assert PROBE.messages_of("r-1") == [Note("request"), Note("send")]


async def test_missing_spot_message_without_instance_intent_creates_no_creation_intent(
    autojump_clock, store_url, store,
):
    """A Missing Spot message with no Instance intent doesn't create a creation intent."""
    mem = store
    with trio.fail_after(10):
        async with open_test_node(store=store_url) as node:
            async with store_unchanged(mem):  # and no factory ran
                await missing_calls_end_not_found(node, "c-1")
                with pytest.raises(zl.InvalidOperation):  # in_mesh needs Instance intent first
                    await node.client.send("c-1", Ping()).in_mesh("world")
                assert await mem.location.find("c-1") is None
            assert PROBE.handled == []


async def test_instance_intent_cold_activates_only_missing_spot_with_optional_mesh_and_type(
    autojump_clock, store_url,
):
    """Instance intent only starts cold activation on a Missing Spot, using optional initial
    Mesh and stable type."""
    with trio.fail_after(10):
        async with open_test_node(store=store_url, spots=(Counter, Gauge, Room)) as node:
            pong = await (
                node.client.request("g-1", Ping(), reply=Pong)
                .instance_spot("gauge").in_mesh("world").timeout(5)
            )
            assert pong.kind == "Gauge"
            ref = await node.spots.find("g-1")
            assert ref is not None
            assert (ref.mesh, ref.generation) == ("world", pong.generation)
            # Ready already: intent activates nothing, and in_mesh moves nothing.
            again = await (
                node.client.request("g-1", Ping(), reply=Pong)
                .instance_spot("gauge").in_mesh("elsewhere").timeout(5)
            )
            untyped = await node.client.request("g-1", Ping(), reply=Pong).instance_spot()
            assert again.generation == untyped.generation == pong.generation
            assert await node.spots.find("g-1") == ref
            with pytest.raises(zl.TypeMismatch):  # another stable type than the stored one
                await node.client.request("g-1", Ping(), reply=Pong).instance_spot("counter")
            assert PROBE.factory_ids() == ["g-1"]
            # Missing with another stable type: that type is built.
            pong = await node.client.request("c-1", Ping(), reply=Pong).instance_spot("counter")
            assert pong.kind == "Counter"
            assert PROBE.factory_ids() == ["g-1", "c-1"]


async def test_instance_type_auto_selected_only_when_mesh_has_exactly_one(autojump_clock):
    """If the selected Mesh has exactly one distinct Instance type, it's auto-selected; with
    multiple, type specification is required."""

    # Declared inside the test on purpose: a local Spot class works like a module-level one.
    @zl.instance_spot("meter", relocation=zl.RecreateOnRelocation())
    class Meter(Recorder):
        def __init__(self, ctx: zl.SpotContext) -> None:
            self._constructed(ctx)

    with trio.fail_after(10):
        async with open_test_node(spots=(Counter, Room)) as node:  # one Instance type
            pong = await node.client.request("c-1", Ping(), reply=Pong).instance_spot().timeout(5)
            assert pong.kind == "Counter"
        mem = MemoryStore()
        async with open_test_node(store=mem, spots=(Counter, Meter, Room)) as node:
            location_before = await mem.location.statistics()
            with pytest.raises(zl.InvalidOperation):
                await node.client.request("m-1", Ping(), reply=Pong).instance_spot().timeout(5)
            with pytest.raises(zl.InvalidOperation):
                await node.client.send("m-1", Ping()).instance_spot().timeout(5)
            assert await mem.location.find("m-1") is None
            assert await mem.location.statistics() == location_before
            pong = await node.client.request("m-1", Ping(), reply=Pong).instance_spot("meter")
            assert pong.kind == "Meter"
            # An existing Instance Spot needs no type: the stored one is used.
            untyped = await node.client.request("m-1", Ping(), reply=Pong).instance_spot()
            assert untyped.generation == pong.generation
            assert PROBE.factory_ids() == ["c-1", "m-1"]


async def test_cold_activation_source_creates_no_owner_claim_and_submits_envelope(
    autojump_clock, store_url, store,
):
    """The cold-activation source doesn't create an owner claim — it submits the activation
    envelope, including the first message, to the target. (Source and target on one node;
    on two: ``test_spec_0*_cross_node.py``.)"""
    mem = store
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url) as a:
            # The target stores the envelope, then reserves: Creating with its owner claim.
            gate = PROBE.activate_gates["c-2"] = trio.Event()
            replies: list[Pong] = []

            async def first_call() -> None:
                call = a.client.request("c-2", Note("first"), reply=Pong).instance_spot("counter")
                replies.append(await call.timeout(5))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(first_call)
                await PROBE.started("c-2").wait()
                creating = await mem.location.find("c-2")
                assert creating is not None
                assert creating.state.name == "CREATING"
                assert creating.owner.node_rid == a.node_rid
                assert creating.recovery_pointer is not None
                assert (await mem.relocation.statistics()).roots == 1  # the envelope
                gate.set()
            assert replies[0].generation == creating.object_generation
            assert PROBE.messages_of("c-2") == [Note("first")]

            async def root_deleted() -> bool:
                return (await mem.relocation.statistics()).roots == 0

            await wait_until(root_deleted)
            ready = await mem.location.find("c-2")
            assert ready.state.name == "READY"
            assert ready.recovery_pointer is None


async def test_first_message_of_cold_activation_is_processed_first(
    autojump_clock, store_url, store,
):
    """Only the target that obtained creation authority records itself as owner and runs the
    factory, and the first message of cold activation is always processed first among the
    messages that Spot handles."""
    mem = store
    gate = PROBE.activate_gates["c-1"] = trio.Event()
    replies: list[Pong] = []
    with trio.fail_after(10):
        async with open_test_node(store=store_url) as node:

            async def call(tag: str, *, intent: bool) -> None:
                builder = node.client.request("c-1", Note(tag), reply=Pong)
                if intent:
                    builder = builder.instance_spot("counter")
                replies.append(await builder.timeout(9))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(partial(call, "first", intent=True))
                await PROBE.started("c-1").wait()
                # Later callers arrive while c-1 is Creating, with and without intent.
                tags = ["first"]
                for i in range(10):
                    tags += [f"intent-{i}", f"plain-{i}"]
                    nursery.start_soon(partial(call, f"intent-{i}", intent=True))
                    nursery.start_soon(partial(call, f"plain-{i}", intent=False))
                await trio.testing.wait_all_tasks_blocked()
                gate.set()
            handled = [msg.tag for msg in PROBE.messages_of("c-1")]
            assert handled[0] == "first"
            assert sorted(handled) == sorted(tags)  # every message exactly once
            assert len(PROBE.factory_runs) == 1
            assert {r.generation for r in replies} == {PROBE.factory_runs[0][2]}
            record = await mem.location.find("c-1")
            assert record.owner.node_rid == node.node_rid
            assert {r.node_rid for r in replies} == {str(node.node_rid)}


async def test_message_not_delivered_to_instance_without_authority_local_generation(
    autojump_clock,
):
    """A message isn't delivered to a local instance that doesn't match the Store's current
    authority. (This node's own incarnation, once the store names a newer generation of the
    Spot for the same lifecycle; the loser of a creation race: the cross-node test.)"""
    mem = MemoryStore()
    with trio.fail_after(60):
        async with open_test_node(store=mem) as node:
            old = await node.spots.get_or_create("r-1", "room").timeout(5)
            assert await node.client.request("r-1", Ping(), reply=Pong).timeout(5) == Pong(
                "r-1", old.ref.generation, "Room", str(node.node_rid))
            # Behind this node's back the store's authority moves on: the generation it
            # hosts is closed and released, and a newer one is made Ready for the same
            # lifecycle. The node still hosts the old incarnation.
            record = await mem.location.find("r-1")
            now = trio.current_time()
            closing = await mem.location.begin_close(
                "r-1", object_generation=record.object_generation, owner=record.owner, now=now)
            assert await mem.location.release(closing.fence())
            fence = await mem.location.reserve(
                "r-1", kind=record.kind, stable_type=record.stable_type, mesh=record.mesh,
                owner=record.owner, now=now)
            newer = await mem.location.commit_ready(fence, now=now)
            assert newer.owner == record.owner
            assert newer.object_generation > old.ref.generation
            assert node.statistics().active_spots == 1  # the old incarnation is still here
            await trio.sleep(16)  # past the local route's 15 s: the next call reads the store
            with pytest.raises(zl.StaleRoute, match="no running incarnation"):
                await node.client.request("r-1", Ping(), reply=Pong).timeout(5)
            with pytest.raises(zl.StaleRoute, match="no running incarnation"):
                await node.client.send("r-1", Note("late"))
            await trio.sleep(1)
            assert PROBE.messages_of("r-1") == [Ping()]  # neither ran on the old instance


# --- Route cache ---------------------------------------------------------------------------


class FlakyLocation(MemoryLocationStore):
    """A memory Location Store whose ``find`` fails while ``fail_finds`` > 0."""

    fail_finds = 0

    async def find(self, spot_id: str):
        if self.fail_finds > 0:
            self.fail_finds -= 1
            raise zl.Unavailable("test: the Location Store cannot be reached")
        return await super().find(spot_id)


async def test_missing_creating_and_store_failure_are_not_negative_cached(autojump_clock):
    """Missing, Creating, and Store failure aren't negative-cached. (Store failure; Missing
    and Creating seen from another node: ``test_spec_0*_cross_node.py``.)"""
    with trio.fail_after(10):
        # Store failure: the next call reads the store again.
        flaky = MemoryStoreWith(FlakyLocation())
        async with open_test_node(store=flaky) as node:
            flaky.location.fail_finds = 1
            with contextlib.suppress(zl.ZLinkError):  # may fail: the store could not be read
                await node.client.request("c-1", Ping(), reply=Pong).instance_spot().timeout(5)
            assert flaky.location.fail_finds == 0, "the runtime never read the Location Store"
            start = trio.current_time()
            pong = await node.client.request("c-1", Ping(), reply=Pong).instance_spot().timeout(5)
            assert pong.spot_id == "c-1"
            assert trio.current_time() - start < 1


# --- Close ---------------------------------------------------------------------------------


async def test_close_checks_generation_and_does_not_retarget_new_incarnation(
    autojump_clock, store_url,
):
    """Close checks that the generation matches and doesn't retarget to a new incarnation."""
    with trio.fail_after(10):
        async with open_test_node(store=store_url) as node:
            first = await node.spots.get_or_create("r-1", "room").timeout(5)
            assert await node.spots.close(first.ref) is True
            assert PROBE.closes == [("r-1", first.ref.generation, zl.CloseReason.CLOSED)]
            assert await node.spots.close(first.ref) is False  # that incarnation is gone
            second = await node.spots.get_or_create("r-1", "room").timeout(5)
            assert second.state is zl.CreateState.CREATED
            assert second.ref.generation > first.ref.generation
            with pytest.raises(zl.InvalidOperation):
                await node.spots.close(first.ref)  # another generation exists now
            assert await node.spots.find("r-1") == second.ref
            assert len(PROBE.closes) == 1  # the new incarnation was not closed
            pong = await node.client.request("r-1", Ping(), reply=Pong).timeout(5)
            assert pong.generation == second.ref.generation
            assert await node.spots.close(second.ref) is True
            assert await node.spots.find("r-1") is None

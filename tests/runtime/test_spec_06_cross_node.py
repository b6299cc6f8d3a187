"""Contract tests for the spec 06 §10 items about more than one node, on real links.

The 09 §8 half is ``test_spec_09_cross_node.py``; the nodes and fixtures are in
``cross_node_helpers.py``, whose docstring says how
these tests run (listening nodes, the three backends, names, timing).

The items, and where each is tested:

- 06 "Remote User Spot create fixes provider reservation and target lifecycle in command
  47, reads Pending creation content directly from the store, and returns the terminal
  result exactly once via command 20." -- here, with its failure branch (the source's
  deadline passes while the target builds: the reservation is withdrawn with its fence
  and the target's CommitReady is refused). The redelivery of one operation ID (a second
  47 with the same ID gets the retained reply) is ``test_remote_calls.py``'s test of the
  same name (it writes a frame by hand, so it stays memory-only).
- 06 "Remote User Spot Close fixes the SpotRef, owner generation, StoreVersion, and
  target lifecycle in command 48 ..." -- here, with the stale-generation branch
  (InvalidOperation, no retarget) and the moving conflict (a close reaching the owner
  while the Spot is sealed for relocation is Unavailable, docs/relocation.md; a
  get-or-create meanwhile is Existing and builds nothing).
- 06 "The cold-activation source doesn't create an owner claim ..." -- here (source and
  target on different nodes); the one-node half stays in ``test_spec_06.py``.
- 06 "A message isn't delivered to a local instance that doesn't match the Store's
  current authority. A target that didn't obtain creation authority doesn't create a
  separate instance." -- here (the loser's caller is on the other node).
- 06 "Missing, Creating, and Store failure aren't negative-cached." -- Missing and
  Creating seen from another node here, and Creating seen from a third node (a client
  with no attempt of its own to wait on, so it polls the store) with a timing bound
  derived from the documented poll (``..._creating_third_node``); the store-failure part
  (a store double) stays in ``test_spec_06.py``.
- 06 "If the selected Mesh has exactly one distinct Instance type, it's auto-selected;
  with multiple, type specification is required." and "Instance intent only starts cold
  activation on a Missing Spot, using optional initial Mesh and stable type." -- here
  too, Mesh-wide: the nodes' registries differ (one serves two types, one a single type,
  one is a client of none) and, for the second, two Meshes have object-role nodes, so a
  node that decided from its own registry or its own Mesh would answer otherwise. The
  nodes of these tests are given their registries one by one (``open_node(spots=)``).

Not here: "User Spot Close doesn't secretly clean up active membership" (06) and the
"active membership" branch of command 48 -- Actor membership (spec 05) does not exist in
this version, so there is no membership to keep or to clean up. "Message Follow only
uses a committed route ..." (06) and "Entry Spot isn't in the relocation candidate list
..." (09) run on node processes in ``tests/mesh/test_mesh_relocation.py``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing
from cross_node_helpers import (
    CLIENT,
    LIMIT,
    SPOTS,
    Hall,
    Shared,
    open_node,
    open_nodes,
    ran_on,
    record_state,
    settled,
    shared_store,
)
from spec_helpers import (
    PROBE,
    Counter,
    Gauge,
    Hold,
    Note,
    Ping,
    Pong,
    Room,
    RoomSpec,
    Welcome,
    store_unchanged,
    wait_until,
)

import zlink_trio as zl

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator


@pytest.fixture
async def shared(url: str) -> AsyncIterator[Shared]:
    """The nodes' store on each backend (``cross_node_helpers.shared_store``)."""
    async with shared_store(url) as opened:
        yield opened


class Resolves(logging.Handler):
    """Counts the resolve records (``zlink_trio.runtime.calls``, DEBUG; docs/observability.md)
    one node writes for one Spot with one ``resolve`` value: each is one read of the store."""

    def __init__(self, node_id: str, spot_id: str, result: str) -> None:
        super().__init__(logging.DEBUG)
        self.key = (node_id, spot_id, result)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if (getattr(record, "node_id", None), getattr(record, "spot_id", None),
                getattr(record, "resolve", None)) == self.key:
            self.count += 1


@contextlib.contextmanager
def counting_resolves(node_id: str, spot_id: str, result: str) -> Iterator[Resolves]:
    """:class:`Resolves` attached to the calls logger, at DEBUG, for the block."""
    logger = logging.getLogger("zlink_trio.runtime.calls")
    handler = Resolves(node_id, spot_id, result)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


# --- 06: remote create (47/20) -------------------------------------------------------------


async def test_remote_user_spot_create_fixes_reservation_in_command_47(shared: Shared) -> None:
    """Remote User Spot create fixes provider reservation and target lifecycle in command
    47, reads Pending creation content directly from the store, and returns the terminal
    result exactly once via command 20."""
    view = shared.view
    gate = PROBE.activate_gates["r-1"] = trio.Event()
    results: list[zl.CreateResult] = []
    with trio.fail_after(LIMIT):
        async with open_nodes(shared, 1, 0, spots=(SPOTS, CLIENT)) as (a, b):

            async def get_or_create(node: Any, spec: RoomSpec) -> None:
                call = node.spots.get_or_create("r-1", "room").request(spec)
                results.append(await call.timeout(20))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(get_or_create, b, RoomSpec("from-b"))
                await PROBE.started("r-1").wait()
                # The source reserved for the target: Creating, owned by node-a's
                # lifecycle, its request in the store (the frame does not carry it).
                creating = await view.location.find("r-1")
                assert creating is not None
                assert creating.state.name == "CREATING"
                assert creating.owner.node_rid == a.node_rid
                assert creating.creation_intent is not None
                assert (await view.relocation.statistics()).roots == 1
                for i in range(5):  # rivals on both nodes meet the reservation and wait
                    nursery.start_soon(get_or_create, a, RoomSpec(f"rival-a-{i}"))
                    nursery.start_soon(get_or_create, b, RoomSpec(f"rival-b-{i}"))
                gate.set()
            created = [r for r in results if r.state is zl.CreateState.CREATED]
            assert len(created) == 1
            assert [r.state for r in results].count(zl.CreateState.EXISTING) == 10
            assert {r.ref for r in results} == {created[0].ref}
            ref = created[0].ref
            assert ref.node_rid == a.node_rid
            assert ref.generation == creating.object_generation
            assert created[0].reply == Welcome("welcome to r-1")
            # The target read the source's request from the store and built once.
            assert PROBE.create_requests == [("r-1", RoomSpec("from-b"))]
            assert [run[1:] for run in PROBE.factory_runs] == [
                ("r-1", ref.generation, str(a.node_rid))]
            assert await b.spots.find("r-1") == ref
            await settled(view)  # the request root is deleted after the commit

            # Rejected at the target: its reply comes back, nothing stays in the store.
            rejected = await b.spots.get_or_create("r-2", "room").request(
                RoomSpec("reject")).timeout(20)
            assert rejected.state is zl.CreateState.REJECTED
            assert rejected.reply == Welcome("declined")
            assert rejected.ref.node_rid == a.node_rid
            assert await view.location.find("r-2") is None
            await settled(view)


async def test_remote_user_spot_create_fixes_reservation_in_command_47_withdrawn_at_deadline(
    shared: Shared,
) -> None:
    """Remote User Spot create ... (the failure branch of 06 §3.3): the source's deadline
    passes while the target runs on_create, so the source withdraws the reservation with
    its fence; the target's CommitReady then meets a stale fence and nothing is created.
    The next call competes afresh and gets a new generation."""
    view = shared.view
    gate = PROBE.activate_gates["r-1"] = trio.Event()
    with trio.fail_after(LIMIT):
        async with open_nodes(shared, 1, 0, spots=(SPOTS, CLIENT)) as (a, b):
            with pytest.raises(zl.DeadlineExceeded):
                await b.spots.get_or_create("r-1", "room").timeout(0.5)
            assert PROBE.started("r-1").is_set()  # the target was building it
            withdrawn = await view.location.find("r-1")
            assert withdrawn is None  # AbortCreating by the source, with the 47's fence
            gate.set()
            await settled(view)
            assert await a.spots.find("r-1") is None  # the target did not commit
            PROBE.activate_gates.pop("r-1")
            again = await b.spots.get_or_create("r-1", "room").timeout(20)
            assert again.state is zl.CreateState.CREATED
            assert again.ref.node_rid == a.node_rid
            first_generation = PROBE.factory_runs[0][2]
            assert again.ref.generation > first_generation
            assert await a.spots.find("r-1") == again.ref


# --- 06: remote close (48/20) --------------------------------------------------------------


async def test_remote_user_spot_close_fixes_ref_and_fences_in_command_48(
    shared: Shared,
) -> None:
    """Remote User Spot Close fixes the SpotRef, owner generation, StoreVersion, and target
    lifecycle in command 48, and doesn't use a Location row lookup or application control
    packet as completion."""
    with trio.fail_after(LIMIT):
        async with open_nodes(shared, 1, 0, spots=(SPOTS, CLIENT)) as (a, b):
            first = (await b.spots.get_or_create("r-1", "room").timeout(20)).ref
            assert first.node_rid == a.node_rid
            await b.client.request("r-1", Ping(), reply=Pong).timeout(20)  # b caches it
            assert await b.spots.close(first) is True
            # The owner closed it before the reply: on_close ran there, the row is gone.
            assert PROBE.closes == [("r-1", first.generation, zl.CloseReason.CLOSED)]
            assert await a.spots.find("r-1") is None
            assert await b.spots.close(first) is False  # that incarnation is gone
            with pytest.raises(zl.NotFound):  # the closer dropped its route too
                await b.client.request("r-1", Ping(), reply=Pong).timeout(20)
            # A stale generation is a typed failure; the new incarnation is not closed.
            second = (await a.spots.get_or_create("r-1", "room").timeout(20)).ref
            assert second.generation > first.generation
            with pytest.raises(zl.InvalidOperation, match="never retargets"):
                await b.spots.close(first)
            assert await b.spots.find("r-1") == second
            assert len(PROBE.closes) == 1
            pong = await b.client.request("r-1", Ping(), reply=Pong).timeout(20)
            assert (pong.generation, pong.node_rid) == (second.generation, str(a.node_rid))
            assert await b.spots.close(second) is True
            assert PROBE.closes[-1] == ("r-1", second.generation, zl.CloseReason.CLOSED)
            assert await a.spots.find("r-1") is None


async def test_remote_user_spot_close_fixes_ref_and_fences_in_command_48_moving_conflict(
    shared: Shared,
) -> None:
    """Remote User Spot Close ... (06 §7.1: "Stale generation and a moving conflict are
    typed failures"): a command 48 reaching the owner while the Spot is sealed for a move
    is Unavailable and closes nothing (06 §7), a get-or-create meanwhile is Existing and
    builds nothing; once the move committed, the same ref closes at the new owner."""
    view = shared.view
    moved: list[zl.RelocationResult] = []
    with trio.fail_after(LIMIT):
        async with open_nodes(shared, 1, 0, 0, spots=(SPOTS, CLIENT, (Hall,))) as (
                a, b, c):
            ref = (await b.spots.get_or_create("h-1", "hall").timeout(20)).ref
            assert ref.node_rid == a.node_rid
            await b.client.send("h-1", Hold("running"))
            await PROBE.holding.wait()

            async def relocate() -> None:
                moved.append(await a.relocate("h-1", to="node-c", timeout=20))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(relocate)

                async def sealed() -> bool:  # the move waits at the seal for the turn
                    return await record_state(view, "h-1") == "SEALED"

                await wait_until(sealed)
                with pytest.raises(zl.Unavailable, match="sealed for relocation"):
                    await b.spots.close(ref)
                existing = await b.spots.get_or_create("h-1", "hall").timeout(20)
                assert (existing.state, existing.ref.generation) == (
                    zl.CreateState.EXISTING, ref.generation)
                assert PROBE.closes == []
                PROBE.hold_gate.set()
            assert moved[0].outcome is zl.RelocationOutcome.COMMITTED
            assert moved[0].ref.node_rid == c.node_rid
            assert await b.spots.close(ref) is True  # same generation, new owner: 48 to c
            assert PROBE.closes == [("h-1", ref.generation, zl.CloseReason.RELOCATED),
                                    ("h-1", ref.generation, zl.CloseReason.CLOSED)]
            assert await view.location.find("h-1") is None
            assert len([run for run in PROBE.factory_runs if run[1] == "h-1"]) == 2  # a, c


# --- 06: cold activation across nodes ------------------------------------------------------


async def test_cold_activation_source_creates_no_owner_claim_and_submits_envelope(
    shared: Shared,
) -> None:
    """The cold-activation source doesn't create an owner claim — it submits the activation
    envelope, including the first message, to the target."""
    view = shared.view
    gate = PROBE.activate_gates["c-1"] = trio.Event()
    replies: list[Pong] = []
    with trio.fail_after(LIMIT):
        async with open_nodes(shared, 1, 0, spots=(SPOTS, (Room,))) as (a, b):  # source b, target a

            async def first_call() -> None:
                call = b.client.request("c-1", Note("first"), reply=Pong)
                replies.append(await call.instance_spot("counter").timeout(20))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(first_call)
                await PROBE.started("c-1").wait()
                creating = await view.location.find("c-1")
                assert creating is not None
                assert creating.state.name == "CREATING"
                assert creating.owner.node_rid == a.node_rid  # the target's claim only
                assert creating.recovery_pointer is not None  # the envelope the target kept
                assert (await view.relocation.statistics()).roots == 1
                assert b.statistics().activating == 0
                gate.set()
            assert replies == [Pong("c-1", creating.object_generation, "Counter",
                                    str(a.node_rid))]
            assert ran_on(a) == [Note("first")]  # the first message came in the envelope
            assert ran_on(b) == []
            assert [run[3] for run in PROBE.factory_runs] == [str(a.node_rid)]
            await settled(view)  # root deleted once the first message's record settled
            ready = await view.location.find("c-1")
            assert ready.state.name == "READY"
            assert ready.recovery_pointer is None
            assert b.statistics().active_spots == 0


async def test_message_not_delivered_to_instance_without_authority_and_loser_builds_none(
    shared: Shared,
) -> None:
    """A message isn't delivered to a local instance that doesn't match the Store's current
    authority. A target that didn't obtain creation authority doesn't create a separate
    instance."""
    gate = PROBE.activate_gates["c-1"] = trio.Event()
    outcomes: dict[str, Pong] = {}
    with trio.fail_after(LIMIT):
        async with open_nodes(shared, 1, 0, spots=(SPOTS, (Room,))) as (a, b):

            async def call(node: Any, tag: str) -> None:
                builder = node.client.request("c-1", Note(tag), reply=Pong)
                outcomes[tag] = await builder.instance_spot("counter").timeout(20)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, a, "from-a")  # node-a wins the reservation
                await PROBE.started("c-1").wait()
                nursery.start_soon(call, b, "from-b")  # node-b's caller finds it Creating
                await trio.testing.wait_all_tasks_blocked(0.05)
                assert outcomes == {}
                assert len(PROBE.factory_runs) == 1
                gate.set()
            generation = PROBE.factory_runs[0][2]
            # Both callers were served by the one instance, on node-a, exactly once each.
            assert outcomes == {tag: Pong("c-1", generation, "Counter", str(a.node_rid))
                                for tag in ("from-a", "from-b")}
            assert ran_on(a) == [Note("from-a"), Note("from-b")]
            assert ran_on(b) == []
            assert [run[3] for run in PROBE.factory_runs] == [str(a.node_rid)]
            assert b.statistics().active_spots == 0
            await settled(shared.view)


async def test_concurrent_creation_runs_factory_once_and_others_target_created_object(
    shared: Shared,
) -> None:
    """Even if several callers request creation of the same object at the same time, the
    factory runs only once, and the remaining callers target the object it created. (The
    callers are on both nodes, 06 §4.2; one node: ``test_spec_09.py``.)"""
    gate = PROBE.activate_gates["c-1"] = trio.Event()
    replies: list[Pong] = []
    with trio.fail_after(LIMIT):
        async with open_nodes(shared, 1, 0, spots=(SPOTS, CLIENT)) as (a, b):

            async def request(node: Any, tag: str) -> None:
                call = node.client.request("c-1", Note(tag), reply=Pong)
                replies.append(await call.instance_spot("counter").timeout(20))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(request, b, "b-0")
                await PROBE.started("c-1").wait()
                for i in range(1, 20):
                    nursery.start_soon(request, b, f"b-{i}")
                    nursery.start_soon(request, a, f"a-{i}")
                await trio.testing.wait_all_tasks_blocked(0.05)
                gate.set()
            assert len(PROBE.factory_runs) == 1
            generation = PROBE.factory_runs[0][2]
            assert {(r.generation, r.node_rid) for r in replies} == {
                (generation, str(a.node_rid))}
            tags = sorted(msg.tag for msg in ran_on(a))
            assert tags == sorted([f"b-{i}" for i in range(20)] +
                                  [f"a-{i}" for i in range(1, 20)])
            assert ran_on(a)[0] == Note("b-0")  # the first message ran first
            assert ran_on(b) == []
            await settled(shared.view)


# --- 06: no negative caching, seen from another node ---------------------------------------


async def test_missing_creating_and_store_failure_are_not_negative_cached(
    shared: Shared,
) -> None:
    """Missing, Creating, and Store failure aren't negative-cached. (Missing and Creating
    seen from another node; Store failure: ``test_spec_06.py``.)"""
    with trio.fail_after(LIMIT):
        async with open_nodes(shared, 0, 1, spots=(CLIENT, SPOTS)) as (a, b):  # caller a, owner b
            # Missing: node-a sees NotFound, node-b creates r-1, node-a reaches it at once.
            with pytest.raises(zl.NotFound):
                await a.client.request("r-1", Ping(), reply=Pong).timeout(20)
            created = await b.spots.get_or_create("r-1", "room").timeout(20)
            assert created.ref.node_rid == b.node_rid
            start = time.monotonic()
            assert await a.spots.find("r-1") == created.ref
            pong = await a.client.request("r-1", Ping(), reply=Pong).timeout(20)
            assert (pong.generation, pong.node_rid) == (created.ref.generation,
                                                         str(b.node_rid))
            assert time.monotonic() - start < 5  # not one route-cache age (15 s)

            # Creating: node-a waits for Ready and is then served at once.
            gate = PROBE.activate_gates["r-2"] = trio.Event()
            done: list[Pong] = []

            async def create_r2() -> None:
                await a.spots.get_or_create("r-2", "room").timeout(20)  # placed on node-b

            async def call_r2() -> None:
                done.append(await a.client.request("r-2", Ping(), reply=Pong).timeout(20))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(create_r2)
                await PROBE.started("r-2").wait()
                nursery.start_soon(call_r2)
                await trio.testing.wait_all_tasks_blocked(0.05)
                assert done == []  # waiting on Creating, not NotFound
                assert await a.spots.find("r-2") is None  # not Ready yet
                released = time.monotonic()
                gate.set()
            assert time.monotonic() - released < 5  # not held for a cached Creating
            ref = await a.spots.find("r-2")
            assert done == [Pong("r-2", ref.generation, "Room", str(b.node_rid))]




#: The store poll of a caller waiting for another node's Creating Spot (docs/decisions.md:
#: "remote Creating is polled with 5 ms -> 250 ms backoff"): the cap of its delay.
POLL_CAP = 0.25
#: Reads of the Creating record the third node makes before the test lets it become
#: Ready. The backoff reaches its cap at the 7th (5 ms doubled six times is 320 ms), so
#: 11 take about 1.3 s; a backoff without that cap would then be sleeping 5 s.
POLLS = 11
#: How long those reads may take (three times what the documented backoff needs).
POLLING_WITHIN = 3 * (0.315 + (POLLS - 7) * POLL_CAP)
#: How soon after Ready the third node must be served: ten poll intervals, a bound that
#: a loaded machine meets and a 15 s poll (or a backoff without its cap) cannot.
SERVED_WITHIN = 10 * POLL_CAP


async def test_missing_creating_and_store_failure_are_not_negative_cached_creating_third_node(
    shared: Shared,
) -> None:
    """Missing, Creating, and Store failure aren't negative-cached. (Creating seen from a
    third node: node-a creates r-2, placed on node-b, while node-c -- a client-only node,
    no Spot type of its own and no attempt of its own to wait on -- calls it, and asks to
    get-or-create it. node-c reads the store again and again with the documented backoff;
    within a few poll intervals of Ready, however long r-2 stayed Creating, its call is
    served by node-b and its get-or-create is Existing.)"""
    view = shared.view
    with trio.fail_after(LIMIT):
        async with (
            open_node(shared, "node-a", 0, spots=(Room,)) as a,
            open_node(shared, "node-b", 1, spots=(Room,)) as b,
            open_node(shared, "node-c", 0, spots=CLIENT) as c,
        ):
            # node-c's link to node-b is open before the timing below starts.
            first = await a.spots.get_or_create("r-1", "room").timeout(20)
            assert first.ref.node_rid == b.node_rid
            await c.client.request("r-1", Ping(), reply=Pong).timeout(20)

            gate = PROBE.activate_gates["r-2"] = trio.Event()
            created: list[zl.CreateResult] = []
            served: list[tuple[Pong, float]] = []
            rival: list[tuple[zl.CreateResult, float]] = []

            async def create_r2() -> None:
                created.append(await a.spots.get_or_create("r-2", "room").timeout(20))

            async def call_r2() -> None:
                pong = await c.client.request("r-2", Ping(), reply=Pong).timeout(20)
                served.append((pong, trio.current_time()))

            async def get_or_create_r2() -> None:
                existing = await c.spots.get_or_create("r-2", "room").timeout(20)
                rival.append((existing, trio.current_time()))

            with counting_resolves("node-c", "r-2", "creating") as polls:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(create_r2)
                    await PROBE.started("r-2").wait()
                    assert await record_state(view, "r-2") == "CREATING"
                    nursery.start_soon(call_r2)
                    nursery.start_soon(get_or_create_r2)

                    async def polled() -> bool:
                        return polls.count >= POLLS

                    started = trio.current_time()
                    with trio.move_on_after(POLLING_WITHIN):
                        await wait_until(polled)
                    assert polls.count >= POLLS, (
                        f"node-c read the Creating record {polls.count} time(s) in "
                        f"{trio.current_time() - started:.1f} s; the documented poll backs "
                        f"off from 5 ms to {POLL_CAP} s")
                    assert (served, rival) == ([], [])  # waiting: not NotFound, not cached
                    assert await c.spots.find("r-2") is None
                    released = trio.current_time()
                    gate.set()
            pong, at = served[0]
            assert at - released < SERVED_WITHIN, (
                f"node-c was served {at - released:.2f} s after r-2 could become Ready; "
                f"its poll of a Creating Spot is documented to back off to {POLL_CAP} s")
            existing, existing_at = rival[0]
            assert existing_at - released < SERVED_WITHIN, (
                f"node-c's get-or-create ended {existing_at - released:.2f} s after r-2 "
                f"could become Ready")
            ref = created[0].ref
            assert (created[0].state, ref.node_rid) == (zl.CreateState.CREATED, b.node_rid)
            assert (existing.state, existing.ref) == (zl.CreateState.EXISTING, ref)
            assert pong == Pong("r-2", ref.generation, "Room", str(b.node_rid))
            assert [spot for spot, _ in PROBE.create_requests] == ["r-1", "r-2"]
            assert ran_on(b) == [Ping(), Ping()]
            assert (ran_on(a), ran_on(c)) == ([], [])


# --- 06: Mesh-wide placement, nodes whose registries differ -------------------------------


async def test_instance_type_auto_selected_only_when_mesh_has_exactly_one(shared: Shared) -> None:
    """If the selected Mesh has exactly one distinct Instance type, it's auto-selected; with
    multiple, type specification is required. (Across the Mesh: node-a serves counter and
    gauge, node-b only counter, node-c none -- each decides from every node's descriptor,
    not from its own registry. One node: ``test_spec_06.py``.)"""
    view = shared.view
    with trio.fail_after(LIMIT):
        async with (
            open_node(shared, "node-b", 1, spots=(Counter,)) as b,
            open_node(shared, "node-c", 0, spots=CLIENT) as c,
        ):
            async with open_node(shared, "node-a", 1, spots=(Counter, Gauge)) as a:
                # Two Instance types in the Mesh: the type is required, whoever asks --
                # node-b too, although it registers only one.
                async with store_unchanged(view):
                    for node in (b, c, a):
                        with pytest.raises(zl.InvalidOperation, match="several Instance"):
                            await node.client.request("m-1", Ping(), reply=Pong).instance_spot(
                                ).timeout(20)
                        with pytest.raises(zl.InvalidOperation, match="several Instance"):
                            await node.client.send("m-1", Ping()).instance_spot().timeout(20)
                # A type only node-a serves, asked for by node-b and node-c: built there.
                gauge = await b.client.request("g-1", Ping(), reply=Pong).instance_spot(
                    "gauge").timeout(20)
                assert (gauge.kind, gauge.node_rid) == ("Gauge", str(a.node_rid))
                counter = await c.client.request("c-1", Ping(), reply=Pong).instance_spot(
                    "counter").timeout(20)
                assert counter.kind == "Counter"
                assert counter.node_rid in {str(a.node_rid), str(b.node_rid)}
                # An existing Instance Spot needs no type: the stored one is used.
                again = await c.client.request("g-1", Ping(), reply=Pong).instance_spot(
                    ).timeout(20)
                assert (again.generation, again.node_rid) == (gauge.generation,
                                                              gauge.node_rid)
                assert ran_on(c) == []
            # node-a left: counter is the one Instance type of the Mesh, auto-selected for
            # node-c, which registers none, and built on node-b.
            pong = await c.client.request("c-2", Ping(), reply=Pong).instance_spot(
                ).timeout(20)
            assert (pong.kind, pong.node_rid) == ("Counter", str(b.node_rid))
            assert PROBE.factory_ids()[-1] == "c-2"
            assert ran_on(c) == []


async def test_instance_intent_cold_activates_only_missing_spot_with_optional_mesh_and_type(
    shared: Shared,
) -> None:
    """Instance intent only starts cold activation on a Missing Spot, using optional initial
    Mesh and stable type. (Across Meshes: node-a serves counter, gauge and room in
    ``world``, node-b only gauge in ``shop``, node-c is a client of ``world``. Two object
    Meshes: without in_mesh the Mesh cannot be chosen, whoever asks (06 §3.1, §4.1 step 4:
    InvalidOperation); a named Mesh is used with its own types, and a Mesh nobody is in is
    NotFound. The zero-Mesh branch (NotConfigured) cannot be reached with a node: every
    node, a client-only one too, has the object-client role in its own Mesh;
    ``tests/core/test_placement.py`` checks it. One node: ``test_spec_06.py``.)"""
    view = shared.view
    with trio.fail_after(LIMIT):
        async with (
            open_node(shared, "node-a", 1, spots=(Counter, Gauge, Room)) as a,
            open_node(shared, "node-b", 1, spots=(Gauge,), mesh="shop") as b,
            open_node(shared, "node-c", 0, spots=CLIENT) as c,
        ):
            async with store_unchanged(view):
                for node in (a, b, c):
                    with pytest.raises(zl.InvalidOperation, match="several Meshes"):
                        await node.client.request("g-1", Ping(), reply=Pong).instance_spot(
                            "gauge").timeout(20)
                    with pytest.raises(zl.InvalidOperation, match="several Meshes"):
                        await node.spots.get_or_create("r-1", "room").timeout(20)
                # world serves two Instance types, although node-c registers none.
                with pytest.raises(zl.InvalidOperation, match="several Instance"):
                    await c.client.request("g-1", Ping(), reply=Pong).instance_spot(
                        ).in_mesh("world").timeout(20)
                with pytest.raises(zl.NotFound, match="counter"):  # shop has no counter
                    await c.client.request("c-1", Ping(), reply=Pong).instance_spot(
                        "counter").in_mesh("shop").timeout(20)
                with pytest.raises(zl.NotFound, match="nowhere"):
                    await c.client.request("c-1", Ping(), reply=Pong).instance_spot(
                        ).in_mesh("nowhere").timeout(20)
                with pytest.raises(zl.NotFound, match="room"):  # nobody in shop serves room
                    await c.spots.get_or_create("r-1", "room").in_mesh("shop").timeout(20)
            # The named Mesh and its one type: gauge in shop, built on node-b.
            shop = await b.client.request("g-1", Ping(), reply=Pong).instance_spot(
                ).in_mesh("shop").timeout(20)
            assert (shop.kind, shop.node_rid) == ("Gauge", str(b.node_rid))
            assert (await c.spots.find("g-1")).mesh == "shop"
            # A type node-c does not register, in its Mesh: built on node-a.
            pong = await c.client.request("c-1", Ping(), reply=Pong).instance_spot(
                "counter").in_mesh("world").timeout(20)
            assert (pong.kind, pong.node_rid) == ("Counter", str(a.node_rid))
            created = await c.spots.get_or_create("r-1", "room").in_mesh("world").timeout(20)
            assert (created.state, created.ref.node_rid, created.ref.mesh) == (
                zl.CreateState.CREATED, a.node_rid, "world")
            # Ready already: intent activates nothing, and in_mesh moves nothing.
            again = await c.client.request("c-1", Ping(), reply=Pong).instance_spot(
                ).in_mesh("shop").timeout(20)
            assert (again.generation, again.node_rid) == (pong.generation, pong.node_rid)
            assert sorted(PROBE.factory_ids()) == ["c-1", "g-1", "r-1"]
            assert ran_on(c) == []

"""Calls between two or three nodes of one process over real loopback links (issue #5).

The nodes share one in-process ``MemoryStore`` and talk through their trio-websocket
links exactly as separate processes do (tests/mesh/ runs them as processes). These tests
run on the real clock -- an autojump ``MockClock`` would jump while a socket waits -- and
every one is bounded by ``trio.fail_after``; nothing sleeps to wait for something.

The two spec 06 §10 items about commands 47 and 48 are contract-tested on every store
backend, with their failure branches, in ``test_spec_0*_cross_node.py``; the tests of the
same names here stay on memory and also check what needs a hand-written frame (a
redelivered operation ID gets the retained command 20).
"""

from __future__ import annotations

import random
from collections import Counter as Tally
from contextlib import AsyncExitStack
from typing import Any

import pytest
import trio
import trio.testing
from runtime_spots import (
    KNOBS,
    Add,
    Block,
    Boom,
    Counter,
    Note,
    Room,
    RoomSpec,
    Total,
    Welcome,
    journal,
)

import zlink_trio as zl
from zlink_trio.core.route_cache import CachedRoute
from zlink_trio.store import MemoryStore
from zlink_trio.wire.frames import Command, CreateOutcome, Reply, UserSpotCreate

SPOTS = [Counter, Room]


def open_nodes(store: MemoryStore, *weights: float, **options: Any) -> Any:
    """``len(weights)`` nodes a, b, c... on ``store``; a weight of 0 takes no new Spots."""
    stack = AsyncExitStack()

    class Nodes:
        async def __aenter__(self) -> list[Any]:
            await stack.__aenter__()
            return [await stack.enter_async_context(zl.open_node(
                f"node-{chr(97 + i)}", store=store, spots=SPOTS, placement_weight=w,
                on_stop="close", **options)) for i, w in enumerate(weights)]

        async def __aexit__(self, *exc: object) -> bool | None:
            return await stack.__aexit__(*exc)

    return Nodes()


async def test_direct_call_reaches_the_owner_on_another_node_and_then_uses_the_cache():
    events = journal()
    store = MemoryStore()
    with trio.fail_after(20):
        async with open_nodes(store, 1, 0) as (a, b):
            first = await b.client.request("c-1", Add(2), reply=Total).instance_spot("counter")
            assert first == Total(2)
            ref = await a.spots.find("c-1")
            assert ref is not None
            assert ref.node_rid == a.node_rid  # placed on a (b has weight 0)
            for n in range(3):
                assert await b.client.request("c-1", Add(1), reply=Total) == Total(3 + n)
            await b.client.send("c-1", Note("one-way"))
            assert await a.client.request("c-1", Add(0), reply=Total) == Total(5)
            assert b.statistics().route_cache.hits >= 3  # later calls skip the store
            assert b.statistics().active_spots == 0
    assert [e for e in events if e[0] == "factory"] == [("factory", "c-1", ref.generation)]
    assert ("note", "c-1", "one-way") in events


async def test_remote_handler_errors_and_reply_types_are_typed():
    journal()
    store = MemoryStore()
    with trio.fail_after(20):
        async with open_nodes(store, 1, 0) as (a, b):
            await a.client.request("c-1", Add(1), reply=Total).instance_spot()
            with pytest.raises(zl.HandlerError, match="handler") as raised:
                await b.client.request("c-1", Boom("bad"), reply=Total)
            assert raised.value.error_type == "ValueError"  # named across the link too
            with pytest.raises(zl.TypeMismatch):
                await b.client.request("c-1", Add(1), reply=Welcome)
            with pytest.raises(zl.NotFound):
                await b.client.request("nobody", Add(1), reply=Total)


async def test_message_to_a_node_that_no_longer_owns_the_spot_is_stale_and_not_retried():
    events = journal()
    store = MemoryStore()
    with trio.fail_after(20):
        async with open_nodes(store, 1, 0) as (a, b):
            await b.client.request("c-1", Add(1), reply=Total).instance_spot()
            await b.client.request("c-1", Add(1), reply=Total)  # b now caches the route
            host = a._rt.catalog.hosts["c-1"]
            await a.client.send("c-1", Note("close-me"))
            await host.finished.wait()  # released and gone from node-a
            assert await a.spots.find("c-1") is None
            # 06 §6: a failed operation is not resubmitted to an owner found in the store
            with pytest.raises(zl.StaleRoute, match="no longer owns"):
                await b.client.request("c-1", Add(1), reply=Total)
            # Not retried anywhere: the next call resolves afresh and finds nothing.
            with pytest.raises(zl.NotFound):
                await b.client.request("c-1", Add(1), reply=Total)
            # With Instance intent the next call activates a new generation.
            assert await b.client.request("c-1", Add(5), reply=Total).instance_spot() == \
                Total(5)
    factories = [e for e in events if e[0] == "factory"]
    assert len(factories) == 2  # the first generation, then the one the intent call made
    assert factories[0] == ("factory", "c-1", events[0][2])


async def test_a_request_whose_deadline_passed_in_the_owners_queue_is_not_run():
    """One deadline end to end (06 §5): a request queued on another node behind a long turn
    is not run there once its deadline has passed -- its caller already ended with
    DeadlineExceeded, and the owner does not run it afterwards."""
    events = journal()
    KNOBS["gate"] = gate = trio.Event()
    store = MemoryStore()
    with trio.fail_after(20):
        async with open_nodes(store, 1, 0) as (a, b):
            assert await b.client.request("c-1", Add(1), reply=Total).instance_spot() == \
                Total(1)
            assert (await b.spots.find("c-1")).node_rid == a.node_rid  # placed on node-a
            await b.client.send("c-1", Block("long"))  # node-a runs it until the gate opens
            with pytest.raises(zl.DeadlineExceeded):
                await b.client.request("c-1", Add(5), reply=Total).timeout(0.5)
            gate.set()
            # Behind the same link: node-a ran the long turn, then skipped Add(5).
            assert await b.client.request("c-1", Add(0), reply=Total) == Total(1)
    assert [e[3] for e in events if e[0] == "handle"] == [1, 0]
    assert ("block-end", "c-1", "long") in events


async def test_a_direct_call_that_overtakes_the_owners_registration_waits_for_it():
    """A direct call (39, route kind 1) can reach the owner before its activation task
    resumed after CommitReady to register the Spot: another node read Ready in the store
    first. The owner admits it once its attempt ended -- behind the first message --
    instead of answering StaleRoute (seen in the 300-first-messages mesh test)."""
    events = journal()
    KNOBS["activating"] = trio.Event()
    KNOBS["activate_gate"] = gate = trio.Event()
    store = MemoryStore()
    with trio.fail_after(20):
        async with open_nodes(store, 1, 0) as (a, b):
            replies: list[Total] = []

            async def first() -> None:
                replies.append(await b.client.request("c-9", Add(2), reply=Total)
                               .instance_spot("counter"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(first)
                await KNOBS["activating"].wait()  # a runs the attempt; nothing registered
                record = await store.location.find("c-9")
                assert record is not None
                # What b would cache after reading the record Ready: a route to a.
                b._rt.route_cache.put(CachedRoute(
                    spot_id="c-9", object_generation=record.object_generation,
                    mesh=record.mesh, node_rid=a.node_rid, kind=record.kind,
                    stable_type="counter", owner_lease_deadline=b._rt.now() + 60,
                    owner=record.owner, owner_generation=record.owner_generation,
                ), b._rt.now())

                async def overtaking() -> None:
                    replies.append(await b.client.request("c-9", Add(5), reply=Total))

                nursery.start_soon(overtaking)
                # Until every task waits: b wrote the frame, a read it and holds it (a
                # StaleRoute answer would have failed ``overtaking`` by now).
                await trio.testing.wait_all_tasks_blocked()
                assert replies == []
                gate.set()
            # Each caller got its reply (in whichever order b's two tasks resumed) ...
            assert sorted(replies, key=lambda total: total.value) == [Total(2), Total(7)]
            # ... and the first message ran first, then the one that had overtaken it.
            assert [e[3] for e in events if e[0] == "handle"] == [2, 5]


async def test_concurrent_first_messages_from_three_nodes_run_one_factory_per_id():
    events = journal()
    store = MemoryStore()
    ids = [f"c-{i}" for i in range(5)]
    replies: list[Total] = []
    with trio.fail_after(30):
        async with open_nodes(store, 1, 1, 1) as nodes:
            async def call(node: Any, spot_id: str) -> None:
                replies.append(await node.client.request(spot_id, Add(1), reply=Total)
                               .instance_spot("counter").timeout(15))

            async with trio.open_nursery() as nursery:
                for _round in range(6):
                    for node in nodes:
                        for spot_id in ids:
                            nursery.start_soon(call, node, spot_id)
            totals = {s: (await nodes[0].client.request(s, Add(0), reply=Total)).value
                      for s in ids}
    factories = [e for e in events if e[0] == "factory"]
    assert sorted(e[1] for e in factories) == ids  # one factory per ID, whoever won
    assert totals == dict.fromkeys(ids, 18)  # every first message delivered exactly once
    assert sorted(r.value for r in replies) == sorted(list(range(1, 19)) * len(ids))


async def test_remote_user_spot_create_fixes_reservation_in_command_47():
    """Remote User Spot create fixes provider reservation and target lifecycle in command
    47, reads Pending creation content directly from the store, and returns the terminal
    result exactly once via command 20."""
    events = journal()
    store = MemoryStore()
    with trio.fail_after(20):
        async with open_nodes(store, 1, 0) as (a, b):
            result = await b.spots.get_or_create("r-1", "room").request(RoomSpec("hall"))
            assert result.state is zl.CreateState.CREATED
            assert result.ref.node_rid == a.node_rid
            assert result.reply == Welcome("welcome to hall")
            # The request object reached the factory through the store, not the frame.
            assert ("factory", "r-1", result.ref.generation, RoomSpec("hall")) in events
            assert "request" not in {f.name for f in UserSpotCreate.__attrs_attrs__}
            again = await b.spots.get_or_create("r-1", "room")
            assert again.state is zl.CreateState.EXISTING
            assert again.ref == result.ref
            rejected = await b.spots.get_or_create("r-2", "room").request(RoomSpec("reject"))
            assert rejected.state is zl.CreateState.REJECTED
            assert rejected.reply == Welcome("declined")
            assert await a.spots.find("r-2") is None

            # A redelivery of the same operation gets the retained result, no second run.
            rt = b._rt
            claim = rt.peers.claim_by_rid(a.node_rid) or (await rt.peers.claim_of(
                a._rt.owner, "node-a"))
            link = await rt.peers.link_to(claim)
            old = next(iter(a._rt.peers.retained._results))
            outcome = a._rt.peers.retained._results[old]
            assert isinstance(outcome, CreateOutcome)
            replies: list[Reply] = []
            got = trio.Event()
            correlation = rt.peers.expect_reply(link, trio.current_time() + 5,
                                                lambda r: (replies.append(r), got.set()),
                                                lambda e: got.set())
            record = await store.location.find("r-1")
            link.send_nowait(UserSpotCreate(
                correlation=correlation, operation_id=old[1], source=rt.owner, spot_id="r-1",
                stable_type="room", expected_store_version=1,
                object_generation=record.object_generation, owner_generation=1,
                target=a._rt.owner, owner_lease_expires_ms=1, pending_capacity=1,
                deadline_ms=int((trio.current_time() + 5) * 1000)))
            await got.wait()
            assert replies[0].answers is Command.USER_SPOT_CREATE
            assert replies[0].outcome == outcome
    assert [e[1] for e in events if e[0] == "factory"] == ["r-1", "r-2"]


async def test_remote_user_spot_close_fixes_ref_and_fences_in_command_48():
    """Remote User Spot Close fixes the SpotRef, owner generation, StoreVersion, and target
    lifecycle in command 48, and doesn't use a Location row lookup as completion."""
    events = journal()
    store = MemoryStore()
    with trio.fail_after(20):
        async with open_nodes(store, 1, 0) as (a, b):
            created = await b.spots.create("room")
            assert created.ref.node_rid == a.node_rid
            assert await b.spots.close(created.ref) is True
            assert ("close", created.ref.spot_id, created.ref.generation,
                    zl.CloseReason.CLOSED) in events
            assert await a.spots.find(created.ref.spot_id) is None
            assert await b.spots.close(created.ref) is False  # gone: idempotent false
            newer = await b.spots.get_or_create(created.ref.spot_id, "room")
            with pytest.raises(zl.InvalidOperation, match="never retargets"):
                await b.spots.close(created.ref)  # the old generation's ref
            assert await a.spots.find(created.ref.spot_id) == newer.ref


async def test_a_node_with_another_secret_is_refused():
    journal()
    store = MemoryStore()
    with trio.fail_after(20):
        async with zl.open_node("node-a", store=store, spots=SPOTS, secret=b"a" * 32) as a, \
                zl.open_node("node-b", store=store, spots=SPOTS, secret=b"b" * 32,
                             placement_weight=0) as b:
            await a.client.request("c-1", Add(1), reply=Total).instance_spot()
            with pytest.raises(zl.Unavailable):
                await b.client.request("c-1", Add(1), reply=Total).timeout(10)
            assert a._rt.peers.transport.links() == []


async def test_open_node_refuses_a_public_address_without_a_secret():
    with trio.fail_after(5), pytest.raises(zl.InvalidOperation, match="without a secret"):
        async with zl.open_node("node-a", listen="0.0.0.0:0"):
            pass  # pragma: no cover


class _HeldCommit:
    """The memory store's combined transactions, but CommitReady's caller resumes only
    once ``release`` is set (the record is Ready in the store meanwhile)."""

    def __init__(self, real: Any, committed: trio.Event, release: trio.Event) -> None:
        self._real, self._committed, self._release = real, committed, release

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    async def commit_ready_with_first_record(self, *args: Any, **kwargs: Any) -> Any:
        result = await self._real.commit_ready_with_first_record(*args, **kwargs)
        self._committed.set()
        await self._release.wait()
        return result


class _HeldStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.committed, self.release = trio.Event(), trio.Event()
        self._held = _HeldCommit(super().combined, self.committed, self.release)

    @property
    def combined(self) -> Any:
        return self._held


async def test_a_local_call_that_reads_ready_before_the_registration_waits_for_it():
    """On the owner itself: a call reads the store Ready after CommitReady landed but
    before the activation resumed to register the Spot. It is admitted behind the first
    message (issue #13 item 2), never StaleRoute."""
    events = journal()
    store = _HeldStore()
    with trio.fail_after(20):
        async with open_nodes(store, 1) as (a,):
            replies: list[Total] = []

            async def call(n: int, intent: bool) -> None:
                request = a.client.request("c-7", Add(n), reply=Total)
                replies.append(await (request.instance_spot("counter") if intent
                                      else request))

            async with trio.open_nursery() as nursery:
                try:
                    nursery.start_soon(call, 2, True)
                    await store.committed.wait()  # Ready in the store, not registered
                    nursery.start_soon(call, 5, False)
                    await trio.testing.wait_all_tasks_blocked()
                    assert replies == []  # waiting behind the first message, not failed
                finally:
                    store.release.set()  # (the held commit is shielded: always let it go)
            assert sorted(replies, key=lambda total: total.value) == [Total(2), Total(7)]
            assert [e[3] for e in events if e[0] == "handle"] == [2, 5]


async def test_a_cached_owner_that_stopped_cleanly_is_resolved_again_not_unavailable():
    """Issue #13 item 3: the owner's node left cleanly (its Spots released); a caller whose
    route cache still names it cannot link to it, drops the route and resolves through
    the store -- with Instance intent the Spot activates on a live node at once."""
    events = journal()
    store = MemoryStore()
    with trio.fail_after(20):
        async with open_nodes(store, 0, 1) as (caller, other):
            async with zl.open_node("node-owner", store=store, spots=SPOTS,
                                    placement_weight=1000.0) as owner:
                await owner.client.request("c-5", Add(1), reply=Total).instance_spot()
                assert await caller.client.request("c-5", Add(1), reply=Total) == Total(2)
                assert caller._rt.route_cache.get("c-5", caller._rt.now()) is not None
            # owner has left: its claim and the Spot are gone, the caller's route is not
            assert await caller.client.request("c-5", Add(3), reply=Total).instance_spot() \
                == Total(3)
            assert (await caller.spots.find("c-5")).node_rid == other.node_rid
    factory_nodes = [e[2] for e in events if e[0] == "factory"]
    assert len(factory_nodes) == 2  # the first generation, then one on the live node


async def test_after_closing_a_remote_spot_the_closers_next_calls_are_not_found():
    """Issue #13 item 3: the node that closed a User Spot another node owned drops its own
    route to it, so its next request is NotFound (not one StaleRoute first) and a send is
    refused at once instead of being dropped at the old owner."""
    journal()
    store = MemoryStore()
    with trio.fail_after(20):
        async with open_nodes(store, 0, 1) as (a, b):
            created = await a.spots.get_or_create("r-7", "room").request(RoomSpec())
            assert created.ref.node_rid == b.node_rid
            await a.client.request("r-7", Add(1), reply=Total)  # a caches the route to b
            assert await a.spots.close(created.ref)
            with pytest.raises(zl.NotFound):
                await a.client.send("r-7", Add(1))
            with pytest.raises(zl.NotFound):
                await a.client.request("r-7", Add(1), reply=Total)


async def test_concurrent_first_calls_agree_on_one_placement_and_weights_hold():
    """Issue #13 item 4: 20 concurrent first calls to each new ID, all from one node of
    three with equal weight, place each ID once and spread the IDs over all three (before:
    the caller won nearly every race). NodeRids are seeded, so the spread is fixed."""
    events = journal()
    store = MemoryStore()
    ids = [f"w-{i}" for i in range(30)]
    with trio.fail_after(30):
        async with AsyncExitStack() as stack:
            nodes = [await stack.enter_async_context(zl.open_node(
                f"node-{i}", store=store, spots=SPOTS, on_stop="close",
                injected=zl.InjectedOptions(random=random.Random(i))))
                for i in range(3)]
            caller = nodes[0]

            async def first(spot_id: str) -> None:
                await caller.client.request(spot_id, Add(1), reply=Total).instance_spot(
                    "counter")

            async with trio.open_nursery() as nursery:
                for spot_id in ids:
                    for _ in range(20):
                        nursery.start_soon(first, spot_id)
            owners: Tally[Any] = Tally()
            for spot_id in ids:
                ref = await caller.spots.find(spot_id)
                assert ref is not None
                owners[ref.node_rid] += 1
    factories = Tally(e[1] for e in events if e[0] == "factory")
    assert all(factories[spot_id] == 1 for spot_id in ids), factories
    assert set(owners) == {n.node_rid for n in nodes}
    assert all(owners[n.node_rid] >= 4 for n in nodes), owners  # 10 each expected

"""Contract tests for spec 09 (Object Kind and Activation) §8, one test per item, on one node.

Each test is named after its item and quotes the item's sentence in its docstring. Only the
public surface is used (``import zlink_trio as zl``): the explicit creation call, ordinary
message send results, the idle-cleanup closing callback and execution-queue admission
results (spec 09 §8's list). Where an item says "nothing is built", the test reads the
store (the ``store`` fixture), never writes it. The items that touch the store (creation,
ownership, close, the ceiling, idle cleanup) run on every backend -- ``memory://``, SQLite
and Redis -- through the ``store_url`` fixture (``conftest.py``).

The five "Execution Queue Bound" items are also tested on the sans-IO lanes in
``tests/core/test_lanes.py``; here they are checked at the runtime level: a Spot whose
handler blocks on a ``trio.Event`` piles work up, and ``node.client.send`` (which completes
at admission) is refused with ``zl.CapacityExceeded`` whose ``lane`` is ``"application"``.

These nodes run on ``MockClock`` without mesh links (``listen=None``), so no test here
sends a message across nodes. The items about more than one node run on two or three
*listening* nodes (real loopback links) on every backend in ``test_spec_0*_cross_node.py``,
under the same names:

- "Even if several callers request creation of the same object at the same time, the
  factory runs only once, and the remaining callers target the object it created." --
  there with callers on both nodes; here on one node.
- "When only the fact that the owner can't be used is confirmed (Unavailable) ..." --
  there only: the unusable owner is another node whose lease ran out on the caller's
  store clock, after the same call reached it across the link.
- "Even right after an object is recreated, an ordinary message isn't rejected for a
  generation mismatch." -- there with another node's cached route to the old
  generation; here on one node.
- "A call sent to a stale owner ends in an error without automatic retry." -- there with
  a cached route to a node that no longer owns the Spot (it closed, or was re-created on
  a third node); here the two stale owners one node can produce through the public API:
  an incarnation whose close has begun (admission sealed, authority Closing), and a node
  whose lease deadline passed on the store clock before its renewal noticed (so the owner
  validity check fails).
- "Once the active-object count reaches the ceiling, new activation is rejected at that
  node." -- there for a request already sent to a full node (refused by its local
  activation, also while an activation is pending there) and a Spot moving in; here on
  one node.

Covered elsewhere (no stubs here):

- "Entry Spot isn't in the relocation candidate list, and an Actor that was on an Entry Spot
  is included in the relocation candidates." -- the first half needs two node processes
  with listening links: ``tests/mesh/test_mesh_relocation.py::
  test_entry_spot_is_not_in_the_relocation_candidate_list``; the second needs Actors,
  which this version does not have.

The Spots, their messages, the probe they record into and the node opener are shared with
``test_spec_06.py`` in ``spec_helpers.py``.

Timing runs on ``MockClock`` (the ``autojump_clock`` fixture) and every test is bounded by
``trio.fail_after(10)`` in mock seconds.
"""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from spec_helpers import (
    PROBE,
    Blob,
    CloseMe,
    Hold,
    Note,
    Ping,
    Pong,
    missing_calls_end_not_found,
    open_test_node,
    store_unchanged,
    wait_until,
)

import zlink_trio as zl

if TYPE_CHECKING:
    from collections.abc import Callable

MiB = 1024 * 1024
#: The fixed per-work-item cost of spec 09 §6.
PER_ITEM_BYTES = 256


@pytest.fixture(autouse=True)
def _fresh_probe():
    PROBE.reset()


async def wait_gone(node: object, spot_id: str) -> None:
    """Wait (in mock time) until ``spot_id`` has no incarnation any more."""

    async def gone() -> bool:
        return await node.spots.find(spot_id) is None

    await wait_until(gone)


async def activate(node: object, spot_id: str) -> Pong:
    """Cold-activate the Counter ``spot_id`` and let its first-message cleanup settle."""
    pong = await node.client.request(spot_id, Ping(), reply=Pong).instance_spot("counter")
    await trio.sleep(1)
    return pong


# --- Kind and creation target --------------------------------------------------------------


async def test_ordinary_message_to_missing_id_builds_nothing_only_creation_intent_does(
    autojump_clock, store_url, store,
):
    """Sending an ordinary message with a missing ID doesn't build the object; only a call
    that explicitly declares intent to create builds a missing object."""
    mem = store
    with trio.fail_after(10):
        async with open_test_node(store=store_url) as node:
            async with store_unchanged(mem):  # and no factory ran
                await missing_calls_end_not_found(node, "c-1")
                with pytest.raises(zl.NotFound):
                    await node.client.send("r-1", Note("typo"))
                assert await node.spots.find("c-1") is None
            # Explicit intent to create builds it: Instance intent, or the explicit create call.
            pong = await node.client.request("c-1", Ping(), reply=Pong).instance_spot("counter")
            created = await node.spots.get_or_create("r-1", "room").timeout(5)
            assert created.state is zl.CreateState.CREATED
            assert PROBE.factory_ids() == ["c-1", "r-1"]
            assert (await node.spots.find("c-1")).generation == pong.generation


# --- Concurrent creation -------------------------------------------------------------------


async def test_concurrent_creation_runs_factory_once_and_others_target_created_object(
    autojump_clock, store_url,
):
    """Even if several callers request creation of the same object at the same time, the
    factory runs only once, and the remaining callers target the object it created."""
    gate = PROBE.activate_gates["c-1"] = trio.Event()
    replies: list[Pong] = []
    with trio.fail_after(10):
        async with open_test_node(store=store_url) as node:

            async def request(i: int) -> None:
                call = node.client.request("c-1", Note(f"request-{i}"), reply=Pong)
                replies.append(await call.instance_spot("counter").timeout(9))

            async def send(i: int) -> None:
                await node.client.send("c-1", Note(f"send-{i}")).instance_spot().timeout(9)

            async with trio.open_nursery() as nursery:
                for i in range(40):
                    nursery.start_soon(request, i)
                    nursery.start_soon(send, i)
                await PROBE.started("c-1").wait()
                await trio.testing.wait_all_tasks_blocked()
                gate.set()
            tags = [f"request-{i}" for i in range(40)] + [f"send-{i}" for i in range(40)]

            async def all_handled() -> bool:
                return len(PROBE.messages_of("c-1")) >= len(tags)

            await wait_until(all_handled)
            assert len(PROBE.factory_runs) == 1
            generation = PROBE.factory_runs[0][2]
            assert {r.generation for r in replies} == {generation}
            assert len(replies) == 40
            assert sorted(m.tag for m in PROBE.messages_of("c-1")) == sorted(tags)
            assert {g for sid, g, _, _ in PROBE.handled} == {generation}


async def test_message_right_after_creation_is_processed_without_cache_delay(autojump_clock):
    """A message sent right after creation finishes is processed immediately, not delayed by
    the cache lifetime."""
    with trio.fail_after(10):  # a wait of one route-cache lifetime (15 s) would trip this
        async with open_test_node() as node:
            pong = await node.client.request("c-1", Ping(), reply=Pong).instance_spot("counter")
            start = trio.current_time()
            again = await node.client.request("c-1", Ping(), reply=Pong).timeout(5)
            assert again.generation == pong.generation
            created = await node.spots.get_or_create("r-1", "room").timeout(5)
            room = await node.client.request("r-1", Ping(), reply=Pong).timeout(5)
            assert room.generation == created.ref.generation
            assert trio.current_time() - start < 1

            # A caller that arrived while c-2 was Creating is served as soon as it is Ready.
            gate = PROBE.activate_gates["c-2"] = trio.Event()
            done: list[float] = []

            async def first() -> None:
                await node.client.request("c-2", Ping(), reply=Pong).instance_spot().timeout(9)

            async def waiter() -> None:
                await node.client.request("c-2", Note("waiting"), reply=Pong).timeout(9)
                done.append(trio.current_time())

            async with trio.open_nursery() as nursery:
                nursery.start_soon(first)
                await PROBE.started("c-2").wait()
                nursery.start_soon(waiter)
                await trio.sleep(2)
                assert done == []
                released = trio.current_time()
                gate.set()
            assert done[0] - released < 1


# --- Stale owner filtering -----------------------------------------------------------------


async def test_ordinary_message_not_rejected_for_generation_mismatch_after_recreate(
    autojump_clock,
):
    """Even right after an object is recreated, an ordinary message isn't rejected for a
    generation mismatch."""
    with trio.fail_after(10):
        async with open_test_node() as node:
            # Instance Spot: closes itself, then a new generation is cold-activated.
            first = await node.client.request("c-1", Ping(), reply=Pong).instance_spot("counter")
            assert (await node.client.request("c-1", Ping(), reply=Pong)).generation == (
                first.generation
            )
            await node.client.send("c-1", CloseMe())
            await wait_gone(node, "c-1")
            second = await node.client.request("c-1", Ping(), reply=Pong).instance_spot()
            assert second.generation > first.generation
            plain = await node.client.request("c-1", Note("right after"), reply=Pong)
            assert plain.generation == second.generation

            # User Spot: closed and created again.
            old = await node.spots.get_or_create("r-1", "room").timeout(5)
            await node.client.request("r-1", Ping(), reply=Pong)
            assert await node.spots.close(old.ref) is True
            new = await node.spots.get_or_create("r-1", "room").timeout(5)
            assert new.ref.generation > old.ref.generation
            plain = await node.client.request("r-1", Note("right after"), reply=Pong)
            assert plain.generation == new.ref.generation
            await node.client.send("r-1", Note("sent right after"))

            async def sent_arrived() -> bool:
                return Note("sent right after") in PROBE.messages_of("r-1")

            await wait_until(sent_arrived)


async def test_call_to_stale_owner_ends_in_error_without_retry(autojump_clock, store_url, store):
    """A call sent to a stale owner ends in an error without automatic retry."""
    mem = store
    closed: list[bool] = []
    with trio.fail_after(10):
        async with open_test_node(store=store_url) as node:
            old = await node.spots.get_or_create("r-1", "room").timeout(5)
            await node.client.send("r-1", Hold("running"))
            await PROBE.holding.wait()

            async def close() -> None:
                closed.append(await node.spots.close(old.ref))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(close)

                async def closing() -> bool:
                    record = await mem.location.find("r-1")
                    return record is not None and record.state.name == "CLOSING"

                await wait_until(closing)
                # The incarnation no longer owns r-1 for new work.
                with pytest.raises(zl.StaleRoute):
                    await node.client.request("r-1", Note("late request"), reply=Pong).timeout(5)
                with pytest.raises(zl.StaleRoute):
                    await node.client.send("r-1", Note("late send"))
                PROBE.hold_gate.set()  # the turn accepted before the seal finishes
            assert closed == [True]
            new = await node.spots.get_or_create("r-1", "room").timeout(5)
            assert new.ref.generation > old.ref.generation
            await node.client.request("r-1", Ping(), reply=Pong).timeout(5)
            await trio.sleep(2)
            # Not run by the old incarnation, and not resent to the new one.
            assert PROBE.messages_of("r-1") == [Hold("running"), Ping()]

        # Stale by owner validity: the owner's lease deadline passed on the store clock
        # before the node noticed (its renewal has not run yet), so this node is no longer
        # a valid owner of r-2. (Once the renewal notices, the node stops its Spots and
        # every call raises Unavailable: tests/runtime/test_ownership_lost.py.)
        store_now = [0.0]
        async with open_test_node(store=store_url, lease=3,
                                  clock=lambda: store_now[0]) as node:
            await node.spots.get_or_create("r-2", "room").timeout(5)
            await node.client.request("r-2", Note("before"), reply=Pong).timeout(5)
            store_now[0] = 4.0
            with pytest.raises(zl.StaleRoute):
                await node.client.request("r-2", Note("expired owner"), reply=Pong).timeout(5)
            with pytest.raises(zl.StaleRoute):
                await node.client.send("r-2", Note("expired owner"))
            await trio.sleep(2)
            assert PROBE.messages_of("r-2") == [Note("before")]


# --- Active-object ceiling and idle cleanup ------------------------------------------------


async def test_new_activation_rejected_at_ceiling(autojump_clock, store_url, store):
    """Once the active-object count reaches the ceiling, new activation is rejected at that
    node."""
    mem = store
    with trio.fail_after(10):
        async with open_test_node(store=store_url, active_object_ceiling=2) as node:
            first = await activate(node, "c-1")
            await activate(node, "c-2")
            location_before = await mem.location.statistics()
            with pytest.raises(zl.CapacityExceeded) as refused:
                await node.client.request("c-3", Ping(), reply=Pong).instance_spot("counter")
            assert refused.value.lane is None
            with pytest.raises(zl.CapacityExceeded):
                await node.client.send("c-3", Ping()).instance_spot("counter")
            with pytest.raises(zl.CapacityExceeded):
                await node.spots.get_or_create("r-1", "room").timeout(5)
            with pytest.raises(zl.CapacityExceeded):
                await node.spots.create("room").timeout(5)
            assert await mem.location.statistics() == location_before
            assert await node.spots.find("c-3") is None
            assert PROBE.factory_ids() == ["c-1", "c-2"]
            # Existing objects still work; once one closes, a new activation fits again.
            assert (await node.client.request("c-1", Ping(), reply=Pong)).generation == (
                first.generation
            )
            await node.client.send("c-1", CloseMe())
            await wait_gone(node, "c-1")
            await node.client.request("c-3", Ping(), reply=Pong).instance_spot("counter")
            assert PROBE.factory_ids() == ["c-1", "c-2", "c-3"]


async def test_idle_cleanup_targets_only_instance_spots(autojump_clock, store_url, store):
    """Cleanup targets are limited to Instance Spot — Entry Spot and User Spot aren't cleaned
    up."""
    mem = store
    with trio.fail_after(10):
        async with open_test_node(store=store_url, instance_idle_timeout=1) as node:
            entry_before = await mem.location.find(node.entry_spot_id)
            room = await node.spots.get_or_create("r-1", "room").timeout(5)
            pong = await node.client.request("c-1", Ping(), reply=Pong).instance_spot("counter")
            await trio.sleep(6)  # many idle timeouts and sweeps
            assert await node.spots.find("c-1") is None
            assert PROBE.closes == [("c-1", pong.generation, zl.CloseReason.IDLE_EVICTED)]
            assert await node.spots.find("r-1") == room.ref
            entry = await mem.location.find(node.entry_spot_id)
            assert entry is not None
            assert entry.state.name == "READY"
            assert entry.object_generation == entry_before.object_generation
            assert (await node.client.request("r-1", Ping(), reply=Pong)).generation == (
                room.ref.generation
            )


async def test_instance_spot_with_work_in_progress_is_not_idle_evicted(autojump_clock, store_url):
    """An Instance Spot with work in progress isn't cleaned up even after idle time has
    passed."""
    with trio.fail_after(10):
        async with open_test_node(store=store_url, instance_idle_timeout=1) as node:
            pong = await node.client.request("c-1", Ping(), reply=Pong).instance_spot("counter")
            await node.client.send("c-1", Hold("long"))
            await node.client.send("c-1", Note("queued"))  # pending behind the running turn
            await PROBE.holding.wait()
            await trio.sleep(4)  # four idle timeouts with work running and pending
            ref = await node.spots.find("c-1")
            assert ref is not None
            assert ref.generation == pong.generation
            assert PROBE.closes == []
            PROBE.hold_gate.set()

            async def drained() -> bool:
                return Note("queued") in PROBE.messages_of("c-1")

            await wait_until(drained)
            await trio.sleep(0.5)  # idle for less than the timeout since the last work
            assert await node.spots.find("c-1") == ref
            await trio.sleep(3)
            assert await node.spots.find("c-1") is None
            assert PROBE.closes == [("c-1", pong.generation, zl.CloseReason.IDLE_EVICTED)]


async def test_idle_cleanup_calls_closing_callback_with_idle_evicted(
    autojump_clock, store_url, store,
):
    """When cleaned up, the closing callback is called with shutdown reason IdleEvicted."""
    mem = store
    PROBE.store = mem
    with trio.fail_after(10):
        async with open_test_node(store=store_url, instance_idle_timeout=1) as node:
            first = await node.client.request("c-1", Ping(), reply=Pong).instance_spot("counter")
            await wait_gone(node, "c-1")
            assert PROBE.closes == [("c-1", first.generation, zl.CloseReason.IDLE_EVICTED)]
            # The location was still held while the callback ran (released only after it).
            (record,) = PROBE.records_at_close
            assert record is not None
            assert record.state.name == "CLOSING"
            assert record.object_generation == first.generation
            with pytest.raises(zl.NotFound):
                await node.client.request("c-1", Ping(), reply=Pong).timeout(5)
            second = await node.client.request("c-1", Ping(), reply=Pong).instance_spot()
            assert second.generation > first.generation
            assert len(PROBE.closes) == 1


# --- Execution queue bound -----------------------------------------------------------------


async def fill_application_lane(node: object, spot_id: str, make: Callable[[], object],
                                *, limit: int = 5000) -> tuple[int, zl.CapacityExceeded]:
    """Send ``make()`` to ``spot_id`` until refused; return how many were admitted."""
    for admitted in range(limit):
        try:
            await node.client.send(spot_id, make()).timeout(5)
        except zl.CapacityExceeded as refusal:
            return admitted, refusal
    pytest.fail(f"{limit} sends were all admitted: the application lane is not bounded")


async def fill_one_lane(make: Callable[[], object],
                        **options: object) -> tuple[int, zl.CapacityExceeded]:
    """Fill the application lane of one Counter, ``w-1``, on a node opened with ``options``.

    ``make()`` is a ``Hold`` or a ``Blob``, whose handler blocks, so the sends pile up; the
    handlers are released before the node closes. Returns what
    :func:`fill_application_lane` does.
    """
    async with open_test_node(**options) as node:
        await activate(node, "w-1")
        try:
            return await fill_application_lane(node, "w-1", make)
        finally:
            PROBE.hold_gate.set()


async def test_execution_queue_bounded_on_count_and_bytes_whichever_first(autojump_clock):
    """The execution queue is bounded on both the count and byte axes, and whichever is hit
    first applies."""
    bounds = zl.LaneBounds(max_items=4, max_bytes=50_000)
    with trio.fail_after(10):
        async with open_test_node(application_lane=bounds) as node:
            await activate(node, "w-1")
            await activate(node, "w-2")
            try:
                by_count, count_refusal = await fill_application_lane(node, "w-1", Hold)
                by_bytes, byte_refusal = await fill_application_lane(
                    node, "w-2", partial(Blob, "x" * 20_000)
                )
            finally:
                PROBE.hold_gate.set()
    assert by_count == bounds.max_items  # small items: the count bound came first
    assert count_refusal.lane == "application"
    assert by_bytes == 2  # 20 kB items: the 50 kB byte bound came first, after 2 of 4
    assert byte_refusal.lane == "application"


async def test_large_messages_hit_byte_bound_before_count_bound(autojump_clock):
    """When large messages pile up, the byte bound is hit before the count bound."""
    bounds = zl.LaneBounds(max_items=100, max_bytes=200_000)
    with trio.fail_after(10):
        admitted, refusal = await fill_one_lane(
            partial(Blob, "x" * 20_000), application_lane=bounds
        )
    assert refusal.lane == "application"
    # 200,000 // (20,000 + 256 + envelope) items fit: 9, or 8 with a large envelope.
    assert 8 <= admitted <= bounds.max_bytes // (20_000 + PER_ITEM_BYTES)
    assert admitted < bounds.max_items


async def test_empty_payloads_hit_count_bound_before_byte_bound(autojump_clock):
    """When empty payloads pile up, the count bound is hit before the byte bound."""
    bounds = zl.LaneBounds(max_items=5, max_bytes=MiB)
    with trio.fail_after(10):
        admitted, refusal = await fill_one_lane(Hold, application_lane=bounds)
    assert admitted == bounds.max_items
    assert refusal.lane == "application"


async def test_byte_accounting_counts_fixed_per_item_cost_for_empty_payload(autojump_clock):
    """Byte accounting includes a fixed per-work cost, so even an empty payload counts toward
    the bound."""
    bounds = zl.LaneBounds(max_items=1000, max_bytes=1000)
    with trio.fail_after(10):
        admitted, refusal = await fill_one_lane(Hold, application_lane=bounds)
    assert refusal.lane == "application"
    # Each empty item reserves at least 256 bytes, so at most 1000 // 256 = 3 fit (not ~100s).
    assert 1 <= admitted <= bounds.max_bytes // PER_ITEM_BYTES


async def test_every_execution_lane_has_count_and_byte_bound(autojump_clock):
    """Every execution lane has both a count and a byte bound — there's no unbounded
    execution queue."""
    for bad in (None, 0, -1, math.inf, 1.5, True):
        with pytest.raises(zl.InvalidConfiguration):
            zl.LaneBounds(bad, MiB)
        with pytest.raises(zl.InvalidConfiguration):
            zl.LaneBounds(1024, bad)
    with pytest.raises(TypeError):
        zl.LaneBounds(1024)  # both axes are required
    # The defaults are bounded too: 1,024 empty items fill a default application lane.
    with trio.fail_after(10):
        admitted, refusal = await fill_one_lane(Hold)
    assert admitted == 1024
    assert refusal.lane == "application"

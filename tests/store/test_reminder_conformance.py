"""Location Store conformance: durable reminders, set by the owner, delivered by take.

Set and cancel are fenced like a state write; a take marks due reminders of the given
partitions as held by the taker until its hold runs out; a done acts only on the
reminder exactly as taken (``store.reminder_steps``). Every test runs once per backend
under an absolute ``trio.fail_after``.
"""

from __future__ import annotations

import pytest
import trio
from store_helpers import LEASE, MESH, claim, ready

from zlink_trio.core.errors import InvalidOperation, StaleFence, Unavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.placement import REMINDER_PARTITIONS, reminder_partition
from zlink_trio.store.dead_lifecycle import release_dead_node
from zlink_trio.store.rules.reminders import next_due
from zlink_trio.store.values import MAX_REMINDERS_PER_SPOT, MIN_REMINDER_PERIOD

TIMEOUT = 5
ALL = list(range(REMINDER_PARTITIONS))


async def _take(store, taker, *, now, hold=5.0, limit=100, partitions=ALL, mesh=MESH):
    return await store.location.take_due_reminders(mesh, partitions, taker.owner(), now=now,
                                                   hold=hold, limit=limit)


async def test_a_reminder_is_set_listed_replaced_and_cancelled(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        room = await ready(store, a_node, "room-1")
        location = store.location
        assert await location.reminders("room-1") == ()
        tick = await location.set_reminder(room.fence(), "tick", due=5.0, period=None,
                                           now=0.0)
        assert (tick.spot_id, tick.name, tick.mesh, tick.kind, tick.stable_type, tick.due,
                tick.period, tick.version, tick.taker) == (
            "room-1", "tick", MESH, SpotKind.USER, "room", 5.0, None, 1, None)
        alarm = await location.set_reminder(room.fence(), "alarm", due=3.0, period=60.0,
                                            now=0.0)
        assert await location.reminders("room-1") == (alarm, tick)  # by name
        again = await location.set_reminder(room.fence(), "tick", due=7.0, period=2.0,
                                            now=1.0)
        assert (again.due, again.period, again.version) == (7.0, 2.0, 2)
        assert await location.reminders("room-1") == (alarm, again)
        assert await location.cancel_reminder(room.fence(), "tick", now=1.0) is True
        assert await location.cancel_reminder(room.fence(), "tick", now=1.0) is False
        assert await location.reminders("room-1") == (alarm,)
        assert await location.find("room-1") == room  # the record is not touched


async def test_a_zombie_owner_never_sets_or_cancels_a_reminder(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b")
        room = await ready(store, a_node, "room-1")
        location = store.location
        kept = await location.set_reminder(room.fence(), "tick", due=5.0, period=None,
                                           now=0.0)
        moving = await location.begin_relocation(room.fence(), target=b_node.owner(),
                                                 now=0.0)
        sealed = await location.seal_relocation(moving.fence(), now=0.0)
        relay = await location.accept_relay_ready(sealed.fence(), target=b_node.owner(),
                                                  now=0.0)
        with pytest.raises(Unavailable, match="relay_ready"):
            await location.set_reminder(relay.fence(), "late", due=1.0, period=None,
                                        now=0.0)
        moved = await location.commit_relocation(relay.fence(), now=0.0)
        for write in (lambda: location.set_reminder(room.fence(), "tick", due=9.0,
                                                    period=None, now=0.0),
                      lambda: location.cancel_reminder(room.fence(), "tick", now=0.0)):
            with pytest.raises(StaleFence, match="nothing was written"):
                await write()
        assert await location.reminders("room-1") == (kept,)  # it moved with its Spot
        with pytest.raises(Unavailable, match="expired"):
            await location.set_reminder(moved.fence(), "tick", due=9.0, period=None,
                                        now=LEASE + 1)
        assert await location.reminders("room-1") == (kept,)


async def test_a_take_holds_due_reminders_of_its_partitions_in_scan_order(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a", capacity=8, lease=1000.0)
        location = store.location
        spots = [f"counter-{i}" for i in range(8)]
        for i, spot_id in enumerate(spots):
            record = await ready(store, a_node, spot_id, stable_type="counter",
                                 kind=SpotKind.INSTANCE)
            await location.set_reminder(record.fence(), "tick", due=float(i % 3), period=None,
                                        now=0.0)
            await location.set_reminder(record.fence(), "later", due=100.0, period=None,
                                        now=0.0)
        taken = await _take(store, a_node, now=1.0, limit=3)
        expected = sorted(((float(i % 3), s, "tick") for i, s in enumerate(spots)
                           if i % 3 <= 1))
        assert [(r.due, r.spot_id, r.name) for r in taken] == expected[:3]
        assert all(r.taker == a_node.owner() and r.taken_until == 6.0 for r in taken)
        rest = await _take(store, a_node, now=1.0)
        assert [(r.due, r.spot_id, r.name) for r in rest] == expected[3:]
        held = await _take(store, a_node, now=5.9)  # the held ones are not taken again
        assert [(r.due, r.spot_id) for r in held] == sorted(
            (2.0, s) for i, s in enumerate(spots) if i % 3 == 2)
        # Only the given partitions: a partition of none of them takes nothing.
        mine = {reminder_partition(s) for s in spots}
        other = [p for p in ALL if p not in mine]
        assert await _take(store, a_node, now=200.0, partitions=other) == []
        one = reminder_partition("counter-2")
        only = await _take(store, a_node, now=200.0, partitions=[one])
        assert {r.spot_id for r in only} == {s for s in spots if reminder_partition(s) == one}
        o_node = await claim(store, "node-o", mesh="other", lease=1000.0)
        assert await _take(store, o_node, now=200.0, mesh="other") == []


async def test_a_take_that_runs_out_lets_the_reminder_be_taken_again(store):
    """At least once: the taker crashed before its done; once the hold ran out the
    reminder is due again, to another taker, and the first taker's done does nothing."""
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b")
        counter = await ready(store, a_node, "counter-1", stable_type="counter",
                              kind=SpotKind.INSTANCE)
        location = store.location
        await location.set_reminder(counter.fence(), "tick", due=1.0, period=None, now=0.0)
        [first] = await _take(store, a_node, now=1.0, hold=2.0)
        assert await _take(store, b_node, now=2.9, hold=2.0) == []
        [second] = await _take(store, b_node, now=3.0, hold=2.0)
        assert (second.taker, second.due, second.taken_until) == (b_node.owner(), 1.0, 5.0)
        assert await location.reminder_done(first, now=3.5) is False  # not its take now
        assert await location.reminders("counter-1") == (second,)
        assert await location.reminder_done(second, now=3.5) is True
        assert await location.reminders("counter-1") == ()
        assert await location.reminder_done(second, now=3.5) is False


async def test_done_moves_a_repeating_reminder_past_now(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        counter = await ready(store, a_node, "counter-1", stable_type="counter",
                              kind=SpotKind.INSTANCE)
        location = store.location
        await location.set_reminder(counter.fence(), "tick", due=1.0, period=2.0, now=0.0)
        [taken] = await _take(store, a_node, now=1.5)
        assert await location.reminder_done(taken, now=1.5) is True
        [freed] = await location.reminders("counter-1")
        assert (freed.due, freed.taker, freed.taken_until, freed.version) == (3.0, None, 0.0, 1)
        [taken] = await _take(store, a_node, now=8.2)  # missed 5.0 and 7.0: folded
        assert taken.due == 3.0
        assert await location.reminder_done(taken, now=8.2) is True
        assert (await location.reminders("counter-1"))[0].due == 9.0 == next_due(3.0, 2.0, 8.2)
        assert next_due(3.0, 2.0, 9.0) == 11.0
        assert next_due(3.0, 2.0, 1.0) == 5.0


async def test_a_reminder_set_again_while_taken_is_not_done_by_the_old_take(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        counter = await ready(store, a_node, "counter-1", stable_type="counter",
                              kind=SpotKind.INSTANCE)
        location = store.location
        await location.set_reminder(counter.fence(), "tick", due=1.0, period=None, now=0.0)
        [taken] = await _take(store, a_node, now=1.0)
        again = await location.set_reminder(counter.fence(), "tick", due=1.0, period=None,
                                            now=1.0)
        assert (again.version, again.taker) == (2, None)  # the set ended the take
        assert await location.reminder_done(taken, now=1.0) is False
        assert await location.reminders("counter-1") == (again,)
        [retaken] = await _take(store, a_node, now=1.0)  # the same taker, the same due
        assert (retaken.version, retaken.due, retaken.taker) == (2, 1.0, taken.taker)
        assert await location.reminder_done(taken, now=1.0) is False  # not this setting's
        assert await location.reminders("counter-1") == (retaken,)
        assert await location.reminder_done(retaken, now=1.0) is True


async def test_a_taker_without_a_live_claim_takes_nothing(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        counter = await ready(store, a_node, "counter-1", stable_type="counter",
                              kind=SpotKind.INSTANCE)
        location = store.location
        kept = await location.set_reminder(counter.fence(), "tick", due=1.0, period=None,
                                           now=0.0)
        with pytest.raises(Unavailable, match="expired"):
            await _take(store, a_node, now=LEASE + 1)
        assert await location.reminders("counter-1") == (kept,)


async def test_the_close_of_a_user_spot_ends_its_reminders_an_instance_spots_stay(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        location = store.location
        for spot_id, stable_type, kind, kept in (
                ("room-1", "room", SpotKind.USER, False),
                ("counter-1", "counter", SpotKind.INSTANCE, True)):
            record = await ready(store, a_node, spot_id, stable_type=stable_type, kind=kind)
            reminder = await location.set_reminder(record.fence(), "tick", due=1.0,
                                                   period=None, now=0.0)
            closing = await location.begin_close(
                spot_id, object_generation=record.object_generation, owner=a_node.owner(),
                now=0.0)
            assert await location.release(closing.fence()) is True
            assert await location.reminders(spot_id) == ((reminder,) if kept else ())
        assert [r.spot_id for r in await _take(store, a_node, now=1.0)] == ["counter-1"]


async def test_an_actor_sets_no_reminder(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        await ready(store, a_node, "room-2")
        player = await ready(store, a_node, "p-1", stable_type="player",
                             kind=SpotKind.ACTOR, container="room-2")
        with pytest.raises(InvalidOperation, match="Actor"):
            await store.location.set_reminder(player.fence(), "tick", due=1.0, period=None,
                                              now=0.0)
        assert await store.location.reminders("p-1") == ()


async def test_the_reminders_of_a_user_spot_that_is_gone_are_dropped(store):
    """Restart recovery releases a dead node's User Spot without a close: its reminders
    stay until a delivery finds it gone and drops them; a Spot that exists keeps its."""
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        location = store.location
        room = await ready(store, a_node, "room-1")
        counter = await ready(store, a_node, "counter-1", stable_type="counter",
                              kind=SpotKind.INSTANCE)
        for record in (room, counter):
            await location.set_reminder(record.fence(), "tick", due=1.0, period=None,
                                        now=0.0)
            await location.set_reminder(record.fence(), "tock", due=2.0, period=None,
                                        now=0.0)
        assert await location.drop_reminders("room-1") == 0  # it exists
        await release_dead_node(store, "node-a", now=lambda: LEASE + 1)
        assert await location.find("room-1") is None
        assert await location.drop_reminders("counter-1") == 0  # an Instance Spot's stay
        assert await location.drop_reminders("room-1") == 2
        assert await location.reminders("room-1") == ()
        assert len(await location.reminders("counter-1")) == 2


async def test_a_reminder_write_checks_its_arguments(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        room = await ready(store, a_node, "room-1")
        location = store.location
        for name, due, period, match in (("", 1.0, None, "reminder name"),
                                         ("a\x00b", 1.0, None, "NUL"),
                                         ("x" * 201, 1.0, None, "reminder name"),
                                         ("tick", float("nan"), None, "due"),
                                         ("tick", 1.0, MIN_REMINDER_PERIOD / 2, "period")):
            with pytest.raises(InvalidOperation, match=match):
                await location.set_reminder(room.fence(), name, due=due, period=period,
                                            now=0.0)
        with pytest.raises(InvalidOperation, match="AuthorityFence"):
            await location.set_reminder(room, "tick", due=1.0, period=None, now=0.0)
        for _ in range(MAX_REMINDERS_PER_SPOT):
            await location.set_reminder(room.fence(), f"r{_}", due=1.0, period=None, now=0.0)
        with pytest.raises(InvalidOperation, match="most a Spot may keep"):
            await location.set_reminder(room.fence(), "one more", due=1.0, period=None,
                                        now=0.0)
        await location.set_reminder(room.fence(), "r0", due=2.0, period=None, now=0.0)
        assert len(await location.reminders("room-1")) == MAX_REMINDERS_PER_SPOT
        for kwargs, match in (({"hold": 0.0}, "positive"), ({"limit": 0}, "limit"),
                              ({"partitions": [REMINDER_PARTITIONS]}, "partitions")):
            with pytest.raises(InvalidOperation, match=match):
                await _take(store, a_node, now=1.0, **kwargs)
        assert all(r.taker is None for r in await location.reminders("room-1"))


async def test_a_done_of_an_earlier_take_does_not_end_a_later_one(store):
    """Cancelled and set again under the same name (version 1 again, the same due), then
    taken again by the same node: the first take's late done must not end the reminder
    the second take is delivering -- each take holds until its own time."""
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a", lease=1000.0)
        counter = await ready(store, a_node, "counter-1", stable_type="counter",
                              kind=SpotKind.INSTANCE)
        location = store.location
        await location.set_reminder(counter.fence(), "tick", due=1.0, period=None, now=0.0)
        [first] = await _take(store, a_node, now=1.0)
        assert await location.cancel_reminder(counter.fence(), "tick", now=1.5) is True
        again = await location.set_reminder(counter.fence(), "tick", due=1.0, period=None,
                                            now=1.5)
        assert (again.version, again.due) == (first.version, first.due)
        [second] = await _take(store, a_node, now=2.0)
        assert (second.version, second.due, second.taker) == (
            first.version, first.due, first.taker)
        assert await location.reminder_done(first, now=2.5) is False
        assert await location.reminders("counter-1") == (second,)
        assert await location.reminder_done(second, now=2.5) is True
        assert await location.reminders("counter-1") == ()

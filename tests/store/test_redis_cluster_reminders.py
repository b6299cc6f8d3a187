"""Redis Cluster reminders: the due index is a hint beside the buckets, never late or
missing (``store.redis_cluster.reminders``).

A hint is written before its reminder's bucket script, so a crash between the two leaves a
hint without its reminder (the take sweeps it and takes nothing), and a hint may be earlier
than its reminder's wake (the take sets it to the real wake and takes nothing early). A
write whose hint a take swept between its two steps must not stand on it (its bucket
script is refused and writes a new hint), or the hint could end up after its wake.
"""

from __future__ import annotations

import pytest
import trio
from redis_helpers import cluster_test_store
from store_helpers import MESH, claim, ready

from zlink_trio.core.identity import SpotKind
from zlink_trio.core.placement import REMINDER_PARTITIONS, reminder_partition
from zlink_trio.store.redis.reminders import index_member

TIMEOUT = 30
ALL = list(range(REMINDER_PARTITIONS))


async def _take(store, node, *, now, hold=5.0, limit=100):
    return await store.location.take_due_reminders(MESH, ALL, node.owner(), now=now,
                                                   hold=hold, limit=limit)


async def _hint_of(store, spot_id, name):
    """The hint's score (``None``: no hint) and its token (``None``: none)."""
    keys, run = store.keys, store.location._run
    partition = reminder_partition(spot_id)
    member = index_member(spot_id, name)
    score = await run.command("test", ["ZSCORE", keys.reminder_index(MESH, partition), member])
    token = await run.command("test", ["HGET", keys.reminder_tokens(MESH, partition), member])
    return (None if score is None else float(score)), token


async def test_a_hint_whose_bucket_write_was_lost_is_swept_and_nothing_is_taken():
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store() as store:
            node = await claim(store, lease=1000.0)
            counter = await ready(store, node, "counter-1", stable_type="counter",
                                  kind=SpotKind.INSTANCE)
            steps = store.location._reminder_steps
            # The set's first step ran (its hint), then the writer crashed: no bucket write.
            await steps._hint("test", MESH, reminder_partition("counter-1"),
                              index_member("counter-1", "lost"), repr(1.0))
            assert await _hint_of(store, "counter-1", "lost") == (1.0, b"1")
            assert await store.location.reminders("counter-1") == ()
            assert await _take(store, node, now=2.0) == []
            assert await _hint_of(store, "counter-1", "lost") == (None, None)  # swept
            # A reminder set beside it is untouched by the sweep and taken when due.
            kept = await store.location.set_reminder(counter.fence(), "kept", due=3.0,
                                                     period=None, now=2.0)
            assert await _hint_of(store, "counter-1", "kept") == (3.0, b"2")
            assert await _take(store, node, now=2.5) == []
            [taken] = await _take(store, node, now=3.0)
            assert (taken.name, taken.version, taken.due) == ("kept", kept.version, 3.0)


async def test_an_early_hint_is_set_to_the_real_wake_without_a_take():
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store() as store:
            node = await claim(store, lease=1000.0)
            counter = await ready(store, node, "counter-1", stable_type="counter",
                                  kind=SpotKind.INSTANCE)
            location = store.location
            await location.set_reminder(counter.fence(), "tick", due=10.0, period=None,
                                        now=0.0)
            later = await location.set_reminder(counter.fence(), "tick", due=50.0,
                                                period=None, now=0.0)
            # ZADD LT never raises a hint: it is early now (10 < 50).
            assert (await _hint_of(store, "counter-1", "tick"))[0] == 10.0
            assert await _take(store, node, now=20.0) == []
            assert (await _hint_of(store, "counter-1", "tick"))[0] == 50.0  # fixed
            assert await location.reminders("counter-1") == (later,)  # not taken
            assert await _take(store, node, now=49.0) == []  # nothing read: not due
            [taken] = await _take(store, node, now=50.0, hold=5.0)
            assert (taken.version, taken.taker, taken.taken_until) == (2, node.owner(), 55.0)
            assert (await _hint_of(store, "counter-1", "tick"))[0] == 55.0  # the hold's end
            assert await location.reminder_done(taken, now=50.5) is True
            assert await location.reminders("counter-1") == ()
            # A one-shot's done leaves its hint: the next take that reads it sweeps it.
            assert await _take(store, node, now=60.0) == []
            assert await _hint_of(store, "counter-1", "tick") == (None, None)


async def test_a_set_whose_hint_a_take_swept_meanwhile_writes_a_new_one(monkeypatch):
    """The window the tokens close: a set's hint (ZADD LT: unchanged, 8 > 5) is read by a
    take that finds the reminder's real wake 50 and fixes the hint to 50 before the set's
    bucket script lands with due 8. Standing on that hint would leave it late (50 > 8):
    the bucket script is refused (the take raised the watermark past its token) and the
    set writes a new hint."""
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store() as store:
            node = await claim(store, lease=1000.0)
            counter = await ready(store, node, "counter-1", stable_type="counter",
                                  kind=SpotKind.INSTANCE)
            location = store.location
            await location.set_reminder(counter.fence(), "tick", due=5.0, period=None,
                                        now=0.0)
            await location.set_reminder(counter.fence(), "tick", due=50.0, period=None,
                                        now=0.0)  # the hint stays early: 5
            run = location._run
            script, node_script = run.script, run.node
            armed, hints, refusals = [True], [], []

            async def racing_script(what, name, keys, args, **kwargs):
                if name == "set_reminder" and args[-1] and armed[0]:
                    armed[0] = False  # this set's hint is written: a take runs now
                    assert await _take(store, node, now=6.0) == []
                    assert (await _hint_of(store, "counter-1", "tick"))[0] == 50.0
                reply = await script(what, name, keys, args, **kwargs)
                if name == "set_reminder":
                    refusals.append(reply[0])
                return reply

            async def counting_node(name, keys, args, **kwargs):
                if name == "h_hint":
                    hints.append(args[1])
                return await node_script(name, keys, args, **kwargs)

            monkeypatch.setattr(run, "script", racing_script)
            monkeypatch.setattr(run, "node", counting_node)
            soon = await location.set_reminder(counter.fence(), "tick", due=8.0, period=None,
                                               now=6.0)
            assert refusals == [b"REM_BANNED", b"OK"]
            assert hints == [repr(8.0), repr(8.0)]  # a new hint after the refusal
            assert (await _hint_of(store, "counter-1", "tick"))[0] == 8.0  # not late
            assert await location.reminders("counter-1") == (soon,)
            [taken] = await _take(store, node, now=8.0)
            assert (taken.version, taken.due) == (3, 8.0)


async def test_a_repeating_done_hints_its_next_due_first():
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store() as store:
            node = await claim(store, lease=1000.0)
            counter = await ready(store, node, "counter-1", stable_type="counter",
                                  kind=SpotKind.INSTANCE)
            location = store.location
            await location.set_reminder(counter.fence(), "tick", due=1.0, period=2.0, now=0.0)
            [taken] = await _take(store, node, now=1.5, hold=100.0)
            assert (await _hint_of(store, "counter-1", "tick"))[0] == 101.5
            assert await location.reminder_done(taken, now=1.5) is True
            assert (await _hint_of(store, "counter-1", "tick"))[0] == 3.0  # lowered first
            [again] = await _take(store, node, now=3.0)
            assert again.due == 3.0


@pytest.mark.parametrize("crash", ["before", "after"])
async def test_many_reminders_are_taken_in_scan_order_across_rounds(crash):
    """More due hints than one round reads, some of them stale: the take reads again
    until it has ``limit`` or nothing due is left unread."""
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store() as store:
            node = await claim(store, lease=1000.0, capacity=20)
            location = store.location
            steps = location._reminder_steps
            spots = [f"c-{i}" for i in range(12)]
            for i, spot_id in enumerate(spots):
                record = await ready(store, node, spot_id, stable_type="counter",
                                     kind=SpotKind.INSTANCE)
                if crash == "before" or i % 2:
                    await location.set_reminder(record.fence(), "tick", due=float(i),
                                                period=None, now=0.0)
                # stale hints, earlier than every real wake
                await steps._hint("test", MESH, reminder_partition(spot_id),
                                  index_member(spot_id, "ghost"), repr(-1.0))
            expected = sorted((float(i), s) for i, s in enumerate(spots)
                              if crash == "before" or i % 2)
            first = await _take(store, node, now=100.0, limit=3)
            assert [(r.due, r.spot_id) for r in first] == expected[:3]
            rest = await _take(store, node, now=100.0, limit=100)
            assert [(r.due, r.spot_id) for r in rest] == expected[3:]
            for spot_id in spots:
                assert await _hint_of(store, spot_id, "ghost") == (None, None)


async def test_a_take_reads_the_due_hints_of_each_master_in_one_script():
    """The due hints of all 64 partitions are read one script per master (the sweep); with
    a stale slot map those scripts meet keys their node does not serve, and each master's
    partitions are read one call each, with redirects: the same reminders are taken."""
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store() as store:
            node = await claim(store, lease=1000.0, capacity=20)
            location = store.location
            sweep = location._reminder_steps.sweep
            for i in range(8):
                record = await ready(store, node, f"s-{i}", stable_type="counter",
                                     kind=SpotKind.INSTANCE)
                await location.set_reminder(record.fence(), "tick", due=float(i + 1),
                                            period=None, now=0.0)
            masters = store.router.masters()
            assert await _take(store, node, now=0.5) == []  # nothing due yet
            assert (sweep.grouped, sweep.fell_back) == (len(masters), 0)
            taken = await _take(store, node, now=4.0)  # held until 9.0
            assert [(r.spot_id, r.due) for r in taken] == [(f"s-{i}", float(i + 1))
                                                            for i in range(4)]
            slots = store.router._slots
            for slot, address in enumerate(slots):  # every slot "on" the next master
                if address is not None:
                    slots[slot] = masters[(masters.index(address) + 1) % len(masters)]
            store.router.version += 1
            stale = await _take(store, node, now=8.0)
            assert [(r.spot_id, r.due) for r in stale] == [(f"s-{i}", float(i + 1))
                                                           for i in range(4, 8)]
            assert sweep.fell_back >= len(masters)
            assert store.router.moved > 0

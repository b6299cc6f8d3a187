"""What the Redis backends' reminders add beyond the conformance suite: the index order is
``scan_order`` for every Spot ID (also one holding NUL, the separator of the index
member), and a repeating reminder's next due computed in Lua is exactly the oracle's float.

Runs on memory (the oracle), Redis and Redis Cluster.
"""

from __future__ import annotations

import pytest
import trio
from redis_helpers import cluster_test_store, redis_test_store
from store_helpers import MESH, claim, ready

from zlink_trio.core.identity import SpotKind
from zlink_trio.core.placement import REMINDER_PARTITIONS
from zlink_trio.store import open_store
from zlink_trio.store.redis.reminders import index_member, parse_member
from zlink_trio.store.rules.reminders import next_due, scan_order

TIMEOUT = 10
ALL = list(range(REMINDER_PARTITIONS))


@pytest.fixture(params=["memory://", "redis", "redis-cluster"])
async def store(request):
    if request.param == "redis":
        async with redis_test_store() as opened:
            yield opened
    elif request.param == "redis-cluster":
        async with cluster_test_store() as opened:
            yield opened
    else:
        async with open_store(request.param) as opened:
            yield opened


def test_an_index_member_sorts_as_its_spot_id_and_name():
    keys = [("s", "z"), ("s\x00a", "b"), ("s\x00", "a"), ("s\x01", "a"), ("s", "y"),
            ("t", ""), ("s\x00\x01", "q"), ("é", "x"), ("e", "\x01")]
    assert sorted(keys) == sorted(keys, key=lambda k: index_member(*k))
    for spot_id, name in keys:
        assert parse_member(index_member(spot_id, name)) == (spot_id, name)


async def test_spot_ids_holding_nul_are_taken_in_scan_order(store):
    with trio.fail_after(TIMEOUT):
        node = await claim(store, capacity=8, lease=1000.0)
        location = store.location
        records = {spot_id: await ready(store, node, spot_id, stable_type="counter",
                                        kind=SpotKind.INSTANCE)
                   for spot_id in ("s", "s\x00a", "s\x01")}
        for spot_id, name in (("s", "z"), ("s\x00a", "b"), ("s\x01", "a"), ("s", "y")):
            await location.set_reminder(records[spot_id].fence(), name, due=1.0, period=None,
                                        now=0.0)
        taken = await location.take_due_reminders(MESH, ALL, node.owner(), now=1.0,
                                                  hold=5.0, limit=100)
        assert [(r.spot_id, r.name) for r in taken] == [
            ("s", "y"), ("s", "z"), ("s\x00a", "b"), ("s\x01", "a")]
        assert taken == sorted(taken, key=lambda r: scan_order(r)[1:])
        assert [r.name for r in await location.reminders("s")] == ["y", "z"]


@pytest.mark.parametrize(("due", "period", "now"), [
    (0.1, 1.3, 12345.67),
    (1e9 + 0.1, 3.3, 1e9 + 1234.5),
    (2.5, 1.1, 2.5),
    (7.0, 2.0, 1.0),
    (1.0 / 3.0, 1.0 + 1e-9, 1e6 / 7.0),
])
async def test_a_repeating_done_gives_the_oracles_float(store, due, period, now):
    with trio.fail_after(TIMEOUT):
        node = await claim(store, lease=1e12)
        counter = await ready(store, node, "counter-1", stable_type="counter",
                              kind=SpotKind.INSTANCE)
        location = store.location
        await location.set_reminder(counter.fence(), "tick", due=due, period=period, now=0.0)
        [taken] = await location.take_due_reminders(MESH, ALL, node.owner(),
                                                    now=max(now, due), hold=1.0, limit=1)
        assert await location.reminder_done(taken, now=now) is True
        [freed] = await location.reminders("counter-1")
        assert freed.due == next_due(due, period, now)
        assert (freed.period, freed.taker, freed.taken_until) == (period, None, 0.0)

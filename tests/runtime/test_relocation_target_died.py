"""A move whose target died past relay-ready ends when that target restarts (issue #26 item 4).

In one process, on every backend (``store_url``: memory, a SQLite file, Redis) and on the
mock clock, two nodes linked over memory streams (``open_test_cluster(links="memory")``):
the Spot's owner moves it to the other node, which the test kit kills at the relocation
crash point ``relay_ready`` (``Faults.crash_at``: relay-ready recorded, not committed; its
claim and records stay as a dead process leaves them). The source cannot abort any more
(06 §6.1, §8): the Spot is Unavailable. When the target restarts under its NodeId, its
startup scan releases the move (``store.dead_lifecycle``: ``release_relay_ready``, not a
resumed move -- 06 §8, docs/decisions.md) and deletes the payload root; the source's
incarnation ends (``on_close(OWNERSHIP_LOST)``) and the next Instance-intent call
activates a new incarnation. No message runs twice. Every test is bounded by
``trio.fail_after``.
"""

from __future__ import annotations

import pytest
import trio
from runtime_spots import Add, Counter, Total

import zlink_trio as zl
from zlink_trio.core.records import AuthorityState
from zlink_trio.testing import open_test_cluster

SPOT = "moving-1"
LEASE = 3.0
TIMEOUT = 2.0  # the nodes' default_timeout: how long the source waits past relay-ready


async def test_a_restarted_target_releases_the_move_it_died_in_past_relay_ready(
        store_url, store):
    with trio.fail_after(300):
        async with open_test_cluster(2, store=store_url, spots=[Counter], links="memory",
                                     lease=LEASE, default_timeout=TIMEOUT) as cluster:
            first = await cluster[0].client.request(SPOT, Add(5), reply=Total).instance_spot(
                "counter").timeout(10)
            assert first == Total(5)
            source = next(node for node in cluster if node.inspection.hosted_spot(SPOT))
            target_name = next(name for name in cluster.names if name != source.node_id)
            cluster.faults.crash_at("relocation:relay_ready")
            with pytest.raises(zl.Unavailable, match="relay-ready"):
                await source.relocate(SPOT, to=target_name)
            await cluster.wait_down(target_name)
            record = await store.location.find(SPOT)
            assert record is not None
            assert record.state is AuthorityState.RELAY_READY
            assert record.relocation_payload is not None
            assert (await store.relocation.statistics()).roots == 1
            # Past relay-ready the source never serves again: Unavailable until the
            # target restarts.
            with pytest.raises(zl.Unavailable):
                await source.client.request(SPOT, Add(1), reply=Total).timeout(5)

            target = await cluster.start(target_name)  # waits for the dead lease, recovers
            assert await store.location.find(SPOT) is None  # released, not resumed
            assert (await store.relocation.statistics()).roots == 0
            # The source's stranded incarnation ends without a store write once it sees
            # the record gone (it polls the store at most a second apart: mock seconds).
            await trio.sleep(1.5)
            await cluster.settle()
            closes = cluster.recorder.closes_of(SPOT)
            assert [c.reason for c in closes if c.generation == record.object_generation] \
                == [zl.CloseReason.OWNERSHIP_LOST]
            assert not source.inspection.hosted_spot(SPOT)
            # The Spot is usable again, from either node: a new incarnation (the moved
            # state died with the old one).
            again = await source.client.request(SPOT, Add(7), reply=Total).instance_spot(
                "counter").timeout(10)
            assert again == Total(7)
            assert await target.client.request(SPOT, Add(1), reply=Total).timeout(10) \
                == Total(8)
            current = await store.location.find(SPOT)
            assert current is not None
            assert current.state is AuthorityState.READY
            assert current.object_generation > record.object_generation
            # No message ran twice: the first incarnation ran Add(5) only (the refused
            # call never ran), the new one each of its two calls once.
            turns = cluster.recorder.turns_by_incarnation()
            assert [t.message for t in turns[(SPOT, record.object_generation)]] == [Add(5)]
            assert [t.message for t in turns[(SPOT, current.object_generation)]] == [
                Add(7), Add(1)]
            hosting = [n.node_id for n in cluster if n.inspection.hosted_spot(SPOT)]
            assert len(hosting) == 1

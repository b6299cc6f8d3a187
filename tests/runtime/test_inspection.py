"""``node.inspection``: what tests and tools see inside a running node, and its test hooks.

Every test is bounded by ``trio.fail_after``. Single nodes run without links on
``autojump_clock``; the linked nodes use the in-process link double
(``open_test_cluster(links="memory")``), so no test waits on a socket.
"""

from __future__ import annotations

import pytest
import trio
from runtime_spots import Add, Counter, Total, journal

import zlink_trio as zl
from zlink_trio.store import MemoryStore
from zlink_trio.testing import open_test_cluster, open_test_node


@pytest.fixture(autouse=True)
def _fresh_journal() -> None:
    journal()


async def test_hosted_spots_name_each_local_incarnation_with_its_generation_and_state(
        autojump_clock):
    with trio.fail_after(100):
        async with open_test_node("node-a", store=MemoryStore(), spots=[Counter]) as node:
            assert node.inspection.hosted_spot("c-1") is None
            await node.client.request("c-1", Add(1), reply=Total).instance_spot()
            found = await node.spots.find("c-1")
            assert found is not None
            hosted = node.inspection.hosted_spot("c-1")
            assert hosted == zl.HostedSpot(spot_id="c-1", generation=found.generation,
                                           state="serving")
            assert hosted in node.inspection.hosted_spots()
            assert node.inspection.linked_nodes() == []


async def test_idle_candidates_name_the_spots_idle_past_the_timeout_and_evict_none(
        autojump_clock):
    with trio.fail_after(100):
        async with open_test_node("node-a", store=MemoryStore(), spots=[Counter],
                                  instance_idle_timeout=5, idle_sweep_interval=1000) as node:
            await node.client.request("c-1", Add(1), reply=Total).instance_spot()
            assert node.inspection.idle_candidates() == []
            await trio.sleep(10)
            assert node.inspection.idle_candidates() == ["c-1"]
            assert node.inspection.hosted_spot("c-1") is not None


async def test_lose_lease_stops_the_local_spots_without_touching_the_store(autojump_clock):
    store = MemoryStore()
    with trio.fail_after(100):
        async with open_test_node("node-a", store=store, spots=[Counter]) as node:
            await node.client.request("c-1", Add(1), reply=Total).instance_spot()
            assert node.inspection.lose_lease("the test said so") is True
            assert node.inspection.lose_lease("again") is False
            await node.inspection.wait_lease_lost()
            assert node.inspection.hosted_spots() == []
            assert node.statistics().state == "stopped"
            with pytest.raises(zl.Unavailable):
                await node.client.request("c-1", Add(1), reply=Total)
        assert await store.location.find("c-1") is not None  # left as a crash leaves it


async def test_refused_links_fail_dials_with_the_reason_until_the_hook_is_removed(
        autojump_clock):
    with trio.fail_after(100):
        async with open_test_cluster(2, spots=[Counter], links="memory") as cluster:
            await cluster[0].client.request("c-1", Add(1), reply=Total).instance_spot(
                ).timeout(10)
            b = next(node for node in cluster if node.inspection.hosted_spot("c-1"))
            a = next(node for node in cluster if node is not b)  # calls c-1 over a link
            await a.client.request("c-1", Add(1), reply=Total).timeout(10)
            assert a.inspection.linked_nodes() == [b.node_id]
            a.inspection.refuse_links(lambda other: f"no link to {other} in this test")
            await a.inspection.close_links(to=b.node_id)
            assert a.inspection.linked_nodes() == []
            with pytest.raises(zl.Unavailable, match=f"no link to {b.node_id} in this test"):
                await a.client.request("c-1", Add(1), reply=Total).timeout(10)
            a.inspection.refuse_links(None)
            assert await a.client.request("c-1", Add(1), reply=Total).timeout(10) == Total(3)

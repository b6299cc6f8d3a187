"""The fault hooks: what a test sees when it fails a store call, cuts a link, pauses, kills,
or crashes a node at a named step.

Linked clusters run on the real clock, single nodes without links on ``autojump_clock``;
every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from kit_spots import Add, Counter, Room, Spec, Total

import zlink_trio as zl
from zlink_trio.testing import CRASH_STEPS, InjectedFault, SimulatedCrash, open_test_cluster


async def test_the_failed_store_call_fails_its_operation_writes_nothing_and_the_next_one_works(
        autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(60):
        async with open_test_cluster(1, spots=[Room], links=False) as cluster:
            cluster.faults.fail_next_store_call(method="reserve")
            with pytest.raises(zl.Unavailable, match="failed by the test"):
                await cluster[0].spots.get_or_create("r-1", "kit-room").request(Spec())
            assert await cluster.store.location.find("r-1") is None
            assert cluster.recorder.factory_runs_of("r-1") == []
            created = await cluster[0].spots.get_or_create("r-1", "kit-room").request(Spec())
            assert created.state is zl.CreateState.CREATED


async def test_a_cut_link_makes_the_owner_unreachable_until_it_is_healed() -> None:
    with trio.fail_after(30):
        async with open_test_cluster(2, spots=[Counter]) as cluster:
            node_0, node_1 = cluster.names
            # c-1 lives on node-0 (the caller's node wins a cold activation it places)
            await cluster[0].client.request("c-1", Add(1), reply=Total).instance_spot(
                "kit-counter").timeout(10)
            owner = cluster.recorder.factory_runs_of("c-1")[0].node
            other = node_1 if owner == node_0 else node_0
            await cluster.faults.cut(owner, other)
            with pytest.raises(zl.Unavailable, match="cut"):
                await cluster[other].client.request("c-1", Add(1), reply=Total).timeout(5)
            cluster.faults.heal(owner, other)
            assert await cluster[other].client.request("c-1", Add(1), reply=Total).timeout(5) \
                == Total(2)


async def test_a_node_paused_past_its_lease_learns_it_lost_the_lease_when_resumed(
        autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(120):
        async with open_test_cluster(1, spots=[Counter], links=False, lease=3.0) as cluster:
            node = cluster[0]
            await node.client.request("c-1", Add(1), reply=Total).instance_spot("kit-counter")
            first = node.node_rid
            await cluster.faults.pause("node-0")
            await trio.sleep(10)  # mock seconds: more than a lease without a renewal
            with pytest.raises(zl.Unavailable, match="lost its lease"):
                await node.client.request("c-1", Add(1), reply=Total).timeout(2)
            cluster.faults.resume("node-0")
            for _ in range(10_000):  # it rejoins as a new lifecycle (bounded above)
                if node.node_rid != first:
                    break
                await trio.sleep(0.1)
            assert [c.reason for c in cluster.recorder.closes_of("c-1")] == [
                zl.CloseReason.OWNERSHIP_LOST]
            # The new lifecycle released what the lost one owned: c-1 starts anew.
            assert await node.client.request("c-1", Add(1), reply=Total).instance_spot(
                "kit-counter").timeout(5) == Total(1)


async def test_a_node_crashed_after_reserve_is_recovered_by_its_restart(
        autojump_clock: trio.testing.MockClock) -> None:
    assert "cold:after_reserve" in CRASH_STEPS
    with trio.fail_after(120):
        async with open_test_cluster(1, spots=[Counter], links=False, lease=3.0) as cluster:
            cluster.faults.crash_at("cold:after_reserve")
            with pytest.raises((SimulatedCrash, zl.ZLinkError)):
                await cluster[0].client.request("c-1", Add(1), reply=Total).instance_spot(
                    "kit-counter").timeout(5)
            await cluster.wait_down("node-0")  # the node's task ends
            left = await cluster.store.location.find("c-1")
            assert left is not None  # Creating, as the dead process left it
            assert cluster.recorder.factory_runs_of("c-1") == []  # it died before the factory

            node = await cluster.start("node-0")
            total = await node.client.request("c-1", Add(7), reply=Total).instance_spot(
                "kit-counter").timeout(10)
            assert total in (Total(7), Total(8))  # resumed (the first message too) or anew
            assert len(cluster.recorder.factory_runs_of("c-1")) == 1


async def test_killed_node_reaches_no_store() -> None:
    with trio.fail_after(30):
        async with open_test_cluster(2, spots=[Counter]) as cluster:
            doomed = cluster["node-1"]
            await cluster.kill("node-1")
            with pytest.raises(zl.Unavailable):
                await doomed.client.request("c-9", Add(1), reply=Total).instance_spot(
                    "kit-counter").timeout(2)
            assert await cluster.store.location.find("c-9") is None
            with pytest.raises(KeyError, match="not running"):
                cluster["node-1"]
            with pytest.raises(InjectedFault):
                raise InjectedFault("the type is public")


def test_an_unknown_crash_step_is_refused_with_the_list_of_steps() -> None:
    from zlink_trio.testing import Faults

    with pytest.raises(ValueError, match=r"unknown step 'cold:nowhere'.*cold:after_reserve"):
        Faults().crash_at("cold:nowhere")

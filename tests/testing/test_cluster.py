"""``open_test_cluster`` and the recorder: several nodes on every store, as a user runs them.

Linked clusters run on the real clock (loopback sockets), bounded by ``trio.fail_after``;
single-node clusters without links run on ``autojump_clock`` -- on SQLite and Redis the
kit then suspends autojump while a store call is in flight, which these tests rely on.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from kit_spots import Add, Counter, Room, Spec, Total

import zlink_trio as zl
from zlink_trio.testing import open_test_cluster


async def test_three_nodes_on_every_store_reach_one_spot_and_the_recorder_says_where(
        kit_store: str) -> None:
    with trio.fail_after(30):
        async with open_test_cluster(3, store=kit_store, spots=[Counter, Room]) as cluster:
            record = cluster.recorder
            with record.operation("first"):
                total = await cluster[0].client.request(
                    "c-1", Add(2), reply=Total).instance_spot("kit-counter").timeout(10)
            assert total == Total(2)
            assert await cluster[1].client.request("c-1", Add(3), reply=Total).timeout(10) \
                == Total(5)
            assert await cluster["node-2"].client.request(
                "c-1", Add(4), reply=Total).timeout(10) == Total(9)

            runs = record.factory_runs_of("c-1")
            assert len(runs) == 1
            owner = runs[0].node
            assert [(t.node, t.message, t.result) for t in record.turns_of("c-1")] == [
                (owner, Add(2), Total(2)), (owner, Add(3), Total(5)), (owner, Add(4), Total(9))]
            cold = [t.chart for t in record.transitions_of("first")]
            assert "ColdActivation" in cold
            assert record.violations == []

            found = await cluster.store.location.find("c-1")
            assert found is not None
            assert found.object_generation == runs[0].generation


async def test_a_user_spot_created_on_one_node_is_closed_from_another_and_on_close_is_recorded(
        ) -> None:
    with trio.fail_after(30):
        async with open_test_cluster(2, spots=[Counter, Room]) as cluster:
            created = await cluster[0].spots.get_or_create("r-1", "kit-room").request(
                Spec()).timeout(10)
            assert created.state is zl.CreateState.CREATED
            assert await cluster[1].spots.close(created.ref) is True
            closes = cluster.recorder.closes_of("r-1")
            assert [(c.generation, c.reason) for c in closes] == [
                (created.ref.generation, zl.CloseReason.CLOSED)]
            assert await cluster[1].spots.find("r-1") is None


async def test_one_node_without_links_runs_on_an_autojumping_mock_clock(
        kit_store: str, autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(120):
        async with open_test_cluster(1, store=kit_store, spots=[Counter], links=False,
                                     instance_idle_timeout=5.0) as cluster:
            await cluster[0].client.request("c-1", Add(1), reply=Total).instance_spot(
                "kit-counter")
            await trio.sleep(60)  # mock seconds: leases renew, the idle sweep runs
            assert [c.reason for c in cluster.recorder.closes_of("c-1")] == [
                zl.CloseReason.IDLE_EVICTED]
            assert await cluster.store.location.find("c-1") is None


async def test_a_restarted_node_recovers_what_its_killed_lifecycle_left(
        autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(120):
        async with open_test_cluster(1, spots=[Counter], links=False, lease=3.0) as cluster:
            await cluster[0].client.request("c-1", Add(1), reply=Total).instance_spot(
                "kit-counter")
            await cluster.kill("node-0")
            assert len(cluster) == 0
            left = await cluster.store.location.find("c-1")
            assert left is not None  # a killed process leaves its authority behind
            assert cluster.recorder.closes_of("c-1")[-1].reason is zl.CloseReason.OWNERSHIP_LOST

            node = await cluster.start("node-0")  # waits the old lease out, then recovers
            again = await node.client.request("c-1", Add(5), reply=Total).instance_spot(
                "kit-counter").timeout(10)
            assert again == Total(5)  # a new incarnation
            generations = [r.generation for r in cluster.recorder.factory_runs_of("c-1")]
            assert len(generations) == 2
            assert generations[1] > generations[0]


async def test_the_recorder_sees_a_relocation_build_a_new_instance_on_the_target() -> None:
    with trio.fail_after(30):
        async with open_test_cluster(2, spots=[Counter]) as cluster:
            record = cluster.recorder
            await cluster[0].client.request("c-1", Add(1), reply=Total).instance_spot(
                "kit-counter").timeout(10)
            source = record.factory_runs_of("c-1")[0].node
            target = next(name for name in cluster.names if name != source)
            moved = await cluster[source].relocate("c-1", to=target, timeout=10)
            assert moved.outcome is zl.RelocationOutcome.COMMITTED
            await cluster[source].client.request("c-1", Add(2), reply=Total).timeout(10)

            runs = record.factory_runs_of("c-1")
            assert [(r.node, r.generation) for r in runs] == [
                (source, moved.ref.generation), (target, moved.ref.generation)]
            assert [(c.node, c.reason) for c in record.closes_of("c-1")] == [
                (source, zl.CloseReason.RELOCATED)]
            by_instance = record.turns_by_instance()
            assert [t.message for t in by_instance[runs[0]]] == [Add(1)]
            assert [(t.message, t.result) for t in by_instance[runs[1]]] == [
                (Add(2), Total(2))]  # RecreateOnRelocation: the new instance starts at 0


async def test_memory_links_let_a_linked_cluster_run_on_an_autojumping_clock(
        autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(600):
        async with open_test_cluster(3, spots=[Counter], links="memory") as cluster:
            assert all(node.statistics() is not None for node in cluster)
            await cluster[0].client.request("c-1", Add(1), reply=Total).instance_spot(
                "kit-counter")
            owner = cluster.recorder.factory_runs_of("c-1")[0].node
            others = [name for name in cluster.names if name != owner]
            assert await cluster[others[0]].client.request("c-1", Add(1), reply=Total) \
                == Total(2)
            await trio.sleep(120)  # mock seconds: leases renew and links keep alive
            moved = await cluster[owner].relocate("c-1", to=others[1])
            assert moved.outcome is zl.RelocationOutcome.COMMITTED
            assert await cluster[owner].client.request("c-1", Add(1), reply=Total) == Total(1)
            await cluster.faults.cut(others[0], others[1])
            with pytest.raises(zl.Unavailable, match="cut"):
                await cluster[others[0]].client.request("c-1", Add(1), reply=Total).timeout(5)
            cluster.faults.heal(others[0], others[1])
            # the refused call may have run (a route through the source can forward it)
            after = await cluster[others[0]].client.request("c-1", Add(1), reply=Total)
            assert after in (Total(2), Total(3))


async def test_links_must_be_one_of_the_kinds() -> None:
    with pytest.raises(ValueError, match="links must be True, 'tcp', 'memory' or False"):
        async with open_test_cluster(1, links="udp"):
            pass  # pragma: no cover


async def test_over_memory_links_a_spot_of_a_killed_node_is_unavailable(
        autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(120):
        async with open_test_cluster(2, spots=[Counter], links="memory", lease=3.0) as cluster:
            await cluster[1].client.request("c-1", Add(1), reply=Total).instance_spot(
                "kit-counter").timeout(5)
            owner = cluster.recorder.factory_runs_of("c-1")[0].node
            caller = next(name for name in cluster.names if name != owner)
            await cluster.kill(owner)
            with pytest.raises(zl.Unavailable):
                await cluster[caller].client.request("c-1", Add(1), reply=Total).timeout(5)

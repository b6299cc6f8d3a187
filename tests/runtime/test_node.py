"""open_node: validation before anything is written, descriptor + Entry claim, lease, exit."""

from __future__ import annotations

import logging
import random

import pytest
import trio
from runtime_spots import KNOBS, Add, Block, Counter, Room, Total, journal

import zlink_trio as zl
from zlink_trio.core.identity import is_entry_spot_id
from zlink_trio.runtime.incarnation.catalog import SHUTDOWN_CLOSES_IN_FLIGHT
from zlink_trio.store import MemoryStore


async def test_node_claims_descriptor_and_entry_and_removes_both_at_exit(autojump_clock):
    store = MemoryStore()
    with trio.fail_after(10):
        async with zl.open_node("node-a", store=store, spots=[Counter, Room]) as node:
            assert node.node_id == "node-a"
            assert node.mesh == "world"
            assert node.entry_spot_id.startswith("node-a-entry-")
            assert is_entry_spot_id(node.entry_spot_id)
            claims = await store.location.descriptors(now=trio.current_time())
            assert [c.descriptor.node_rid for c in claims] == [node.node_rid]
            assert claims[0].descriptor.entry_spot_id == node.entry_spot_id
            assert dict(claims[0].descriptor.served_types) == {
                "counter": zl.SpotKind.INSTANCE, "room": zl.SpotKind.USER}
            entry = await store.location.find(node.entry_spot_id)
            assert entry is not None
            assert entry.kind is zl.SpotKind.ENTRY
        assert await store.location.descriptors(now=trio.current_time()) == []
        assert await store.location.find(node.entry_spot_id) is None


async def test_lease_is_renewed_in_the_background(autojump_clock):
    store = MemoryStore()
    with trio.fail_after(100):
        async with zl.open_node("node-a", store=store, spots=[Counter], lease=3.0) as node:
            await trio.sleep(30)  # ten leases: only renewal keeps the claim live
            claims = await store.location.descriptors(now=trio.current_time())
            assert len(claims) == 1
            assert node.statistics().state == "serving"
            assert await node.client.request("c", Add(1), reply=Total).instance_spot() == Total(1)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"route_cache_max_age": 26.0}, "at least 5"),
        ({"lease": 0}, "lease"),
        ({"instance_idle_timeout": -1}, "instance_idle_timeout"),
        ({"active_object_ceiling": -1}, "active_object_ceiling"),
        ({"default_timeout": float("inf")}, "default_timeout"),
        ({"application_lane": (10, 10)}, "application_lane"),
        ({"mesh": ""}, "mesh"),
        ({"spots": [Counter, Counter]}, "registered twice"),
        ({"spots": [int]}, "not a Spot type"),
    ],
)
async def test_invalid_configuration_is_refused_before_anything_is_written(kwargs, needle):
    store = MemoryStore()
    with trio.fail_after(10), pytest.raises(zl.InvalidConfiguration, match=needle):
        async with zl.open_node("node-a", store=store, **kwargs):
            pytest.fail("must not start")
    assert store.location.state.claims == {}
    assert store.location.state.records == {}


@pytest.mark.parametrize("node_id", ["", "x" * 256, "x" * 213, 7])
async def test_invalid_node_id_is_a_configuration_error(node_id):
    with trio.fail_after(10), pytest.raises(zl.InvalidConfiguration):
        async with zl.open_node(node_id):
            pytest.fail("must not start")


async def test_claim_conflict_is_a_startup_configuration_error(autojump_clock):
    store = MemoryStore()
    with trio.fail_after(10):
        async with zl.open_node("node-a", store=store,
                                injected=zl.InjectedOptions(random=random.Random(7))):
            # The same seed draws the same NodeRid and Entry ID: the claim conflicts.
            with pytest.raises(zl.InvalidConfiguration, match="startup configuration error"):
                async with zl.open_node("node-a", store=store,
                                        injected=zl.InjectedOptions(random=random.Random(7))):
                    pytest.fail("must not start")
            assert len(store.location.state.claims) == 1


async def test_exit_closes_local_spots_with_node_shutdown_and_releases_them(autojump_clock):
    events = journal()
    store = MemoryStore()
    with trio.fail_after(10):
        async with zl.open_node("node-a", store=store, spots=[Counter, Room]) as node:
            await node.client.request("c-1", Add(1), reply=Total).instance_spot()
            await node.spots.get_or_create("r-1", "room")
            assert node.statistics().active_spots == 2
        closes = sorted(e[1:] for e in events if e[0] == "close")
        assert [(c[0], c[2]) for c in closes] == [
            ("c-1", zl.CloseReason.NODE_SHUTDOWN), ("r-1", zl.CloseReason.NODE_SHUTDOWN)]
        assert store.location.state.records == {}
        assert (await store.relocation.statistics()).roots == 0


async def _exit_closes_more_spots_than_one_batch(url: str) -> None:
    # More Spots than the shutdown keeps BeginClose calls in flight: every one closes with
    # NODE_SHUTDOWN and is released, none twice.
    count = SHUTDOWN_CLOSES_IN_FLIGHT * 2 + 7
    events = journal()
    with trio.fail_after(60):
        async with zl.open_node("node-a", store=url, spots=[Counter]) as node:
            for i in range(count):
                await node.client.request(f"c-{i}", Add(1), reply=Total).instance_spot()
        closes = [e for e in events if e[0] == "close"]
        assert sorted(e[1] for e in closes) == sorted(f"c-{i}" for i in range(count))
        assert {e[3] for e in closes} == {zl.CloseReason.NODE_SHUTDOWN}
        async with zl.open_store(url) as store:
            assert [await store.location.find(f"c-{i}") for i in range(0, count, 10)] == [
                None] * len(range(0, count, 10))


async def test_exit_closes_more_spots_than_one_batch_of_shutdown_closes(autojump_clock):
    await _exit_closes_more_spots_than_one_batch("memory://")


async def test_exit_closes_more_spots_than_one_batch_of_shutdown_closes_on_sqlite(tmp_path):
    # The real clock: SQLite's worker threads are real time (no autojump past them).
    await _exit_closes_more_spots_than_one_batch(f"sqlite://{tmp_path / 'exit.db'}")


async def test_a_shutdown_past_default_timeout_says_how_many_spots_stayed_and_what_to_do(
        autojump_clock, caplog):
    caplog.set_level(logging.ERROR, logger="zlink_trio")
    journal()
    KNOBS["gate"] = trio.Event()  # never set: the Spot's running turn never ends
    store = MemoryStore()
    with trio.fail_after(60):
        async with zl.open_node("node-a", store=store, spots=[Counter],
                                default_timeout=2.0) as node:
            await node.client.request("c-1", Add(1), reply=Total).instance_spot()
            await node.client.request("c-2", Add(1), reply=Total).instance_spot()
            await node.client.send("c-1", Block("forever"))
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1, errors
        assert ("1 local Spots did not close (and 0 creations did not end) within "
                "default_timeout (2.0 s)") in errors[0]
        assert "zlink-trio release --store URL --node node-a" in errors[0]
        # The other Spot closed; the blocked one's record stays, owned by the old lifecycle,
        # and so does its descriptor (not removed: it expires with the lease).
        assert await store.location.find("c-2") is None
        left = await store.location.find("c-1")
        assert left is not None
        claims = list(store.location.state.claims.values())
        assert [c.descriptor.node_rid for c in claims] == [left.owner.node_rid]
        assert not claims[0].accepts_placements  # no other node places new Spots on it
        # The next start of the NodeId waits that lease out and its startup scan releases
        # what the abandoned lifecycle owned: c-1 activates anew, a larger generation.
        KNOBS.pop("gate")
        async with zl.open_node("node-a", store=store, spots=[Counter]) as node:
            assert await node.client.request("c-1", Add(5), reply=Total).instance_spot() == (
                Total(5))
            again = await store.location.find("c-1")
            assert again is not None
            assert again.object_generation > left.object_generation
async def test_an_error_in_the_block_comes_out_unwrapped(autojump_clock):
    with trio.fail_after(10), pytest.raises(zl.NotFound):
        async with zl.open_node("node-a", spots=[Counter]) as node:
            await node.client.send("nobody", Add(1))


async def test_nodes_without_links_share_a_namespace_but_do_not_cross_deliver(autojump_clock):
    store = MemoryStore()
    with trio.fail_after(10):
        async with zl.open_node("node-a", store=store, spots=[Counter, Room], listen=None) as a, \
                zl.open_node("node-b", store=store, spots=[Counter, Room], listen=None,
                             placement_weight=0) as b:  # b takes no new Spots
            await a.spots.get_or_create("r-1", "room")
            result = await b.spots.get_or_create("r-1", "room")
            assert result.state is zl.CreateState.EXISTING
            assert result.ref.node_rid == a.node_rid
            with pytest.raises(zl.Unavailable, match="opened with listen=None"):
                await b.client.request("r-1", Add(1), reply=Total)

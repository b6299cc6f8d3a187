"""Small user-facing errors (issue #13 item 10): each says what was wrong and what to do."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio
from runtime_spots import Add, Counter, Total

import zlink_trio as zl
from zlink_trio.core.descriptor import NodeDescriptor
from zlink_trio.core.identity import NodeRid, SpotKind, new_entry_spot_id
from zlink_trio.core.placement import Role

if TYPE_CHECKING:
    from pathlib import Path


async def test_a_node_used_after_its_block_ended_says_it_is_closed():
    with trio.fail_after(10):
        async with zl.open_node("n-closed", spots=[Counter], listen=None) as node:
            await node.client.request("c-1", Add(1), reply=Total).instance_spot()
        for call in (lambda: node.client.request("c-1", Add(1), reply=Total),
                     lambda: node.client.send("c-1", Add(1)).instance_spot(),
                     lambda: node.spots.find("c-1"),
                     lambda: node.spots.get_or_create("r-1", "room")):
            with pytest.raises(zl.InvalidOperation, match="is closed"):
                await call()


async def test_a_call_that_is_never_awaited_warns_like_a_coroutine():
    with trio.fail_after(10):
        async with zl.open_node("n-unawaited", spots=[Counter], listen=None) as node:
            # (dropped at the end of the statement: CPython frees it there)
            with pytest.warns(RuntimeWarning, match="the call to Spot 'c-2' was never awaited"):
                node.client.request("c-2", Add(1), reply=Total)
            with pytest.warns(RuntimeWarning, match=r"get_or_create of 'r-2'.*never awaited"):
                node.spots.get_or_create("r-2", "room")


async def test_a_sqlite_store_whose_directory_is_missing_says_so(tmp_path: Path):
    url = f"sqlite://{tmp_path / 'missing' / 'store.db'}"
    with trio.fail_after(10), pytest.raises(zl.StoreUnavailable,
                                            match=r"directory .* does not exist"):
        async with zl.open_store(url):
            pass


async def test_open_node_takes_max_links_and_refuses_a_bad_value():
    with trio.fail_after(10):
        with pytest.raises(zl.InvalidConfiguration, match="max_links"):
            async with zl.open_node("n-links", max_links=0):
                pass
        async with zl.open_node("n-links", max_links=2) as node:
            assert node.statistics().links == 0


async def test_a_call_to_a_dead_owner_names_it_by_node_id_and_says_how_to_release_it(
        autojump_clock: trio.abc.Clock):
    """The record names its owner only by NodeRid; the message names the NodeId read from
    the dead lifecycle's claim, with the command that takes the NodeId, and without a claim
    to read it from says so (the rid is then all there is)."""
    url = "memory://dead-owner"
    with trio.fail_after(30):
        async with zl.open_store(url) as store, zl.open_node(
                "n-live", store=url, spots=[Counter], listen=None) as node:
            dead = await store.location.new_claim(NodeDescriptor(
                mesh="world", node_rid=NodeRid.generate(), node_id="n-dead",
                endpoint="ws://127.0.0.1:9/", roles=[Role.OBJECT_SERVER],
                served_types={"counter": SpotKind.INSTANCE}, capacity=10,
                entry_spot_id=new_entry_spot_id("n-dead")), now=trio.current_time(), lease=5)
            fence = await store.location.reserve(
                "c-dead", kind=SpotKind.INSTANCE, stable_type="counter", mesh="world",
                owner=dead.owner(), now=trio.current_time())
            await store.location.commit_ready(fence, now=trio.current_time())
            await trio.sleep(6)  # n-dead's lease runs out; its claim stays (it owns c-dead)
            with pytest.raises(zl.Unavailable) as named:
                await node.client.request("c-dead", Add(1), reply=Total)
            assert ("Spot 'c-dead' is owned by node 'n-dead' (lifecycle 1), which is not "
                    "live") in named.value.message
            assert "zlink-trio release --store URL --node n-dead" in named.value.message
            assert str(dead.descriptor.node_rid) not in named.value.message
            assert await store.location.remove("world", dead.descriptor.node_rid, 1)
            with pytest.raises(zl.Unavailable) as unnamed:
                await node.client.request("c-dead", Add(1), reply=Total)
            assert (f"an unnamed lifecycle (lifecycle 1, rid {dead.descriptor.node_rid}: no "
                    "claim of it was found to name its NodeId)") in unnamed.value.message
            assert "zlink-trio inspect" in unnamed.value.message

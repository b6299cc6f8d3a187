"""Small user-facing errors (issue #13 item 10): each says what was wrong and what to do."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio
from runtime_spots import Add, Counter, Total

import zlink_trio as zl

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

"""spots.close(ref) (06 §7): generation check, seal then finish, once, merge, re-create."""

from __future__ import annotations

import pytest
import trio
from runtime_spots import KNOBS, Add, Block, Counter, Room, Total, journal, store_counts

import zlink_trio as zl
from zlink_trio.testing import open_test_node


async def test_close_finishes_accepted_turns_then_cleans_up_once_and_releases(
        autojump_clock, store_url, store):
    events = journal()
    KNOBS["gate"] = gate = trio.Event()
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Room]) as node:
            ref = (await node.spots.get_or_create("r", "room")).ref
            await node.client.send("r", Block("accepted"))
            await node.client.send("r", Add(1))
            results: list[bool] = []

            async def close() -> None:
                results.append(await node.spots.close(ref))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(close)
                nursery.start_soon(close)  # merges with the first
                await trio.sleep(1)
                assert results == []
                gate.set()
            assert results == [True, True]
            kinds = [e[0] for e in events]
            assert kinds[-3:] == ["block-end", "handle", "close"]
            assert kinds.count("close") == 1
            assert events[-1][3] is zl.CloseReason.CLOSED
            assert await store_counts(store) == (0, 0, 0)
            assert await node.spots.close(ref) is False
            with pytest.raises(zl.NotFound):
                await node.client.send("r", Add(1))


async def test_close_checks_the_generation_and_never_retargets(autojump_clock, store_url):
    journal()
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Room, Counter]) as node:
            old = (await node.spots.get_or_create("r", "room")).ref
            assert await node.spots.close(old) is True
            new = (await node.spots.get_or_create("r", "room")).ref
            assert new.generation > old.generation
            with pytest.raises(zl.InvalidOperation, match="never retargets"):
                await node.spots.close(old)
            assert await node.spots.find("r") == new
            # Messages do not compare generations: the new incarnation takes them.
            assert await node.client.request("r", Add(4), reply=Total) == Total(4)
            await node.client.request("c", Add(1), reply=Total).instance_spot()
            ref = await node.spots.find("c")
            assert ref is not None
            with pytest.raises(zl.InvalidOperation, match=r"ctx\.close"):
                await node.spots.close(ref)
            with pytest.raises(zl.InvalidOperation):
                await node.spots.close("r")  # type: ignore[arg-type]

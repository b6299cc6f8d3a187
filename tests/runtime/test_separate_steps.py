"""Cold activation through ``SeparateSteps``: a store without its own combined transactions.

``open_node`` completes the store it opens with ``with_combined``; a store that offers
only ``location`` and ``relocation`` then runs the three groups of a cold activation
as separate calls. And when a built-in ``finish_first_record`` refuses with StaleFence
the runtime runs the separate steps, which re-read. Every test runs on ``memory://``
under MockClock with an absolute ``trio.fail_after``.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from types import SimpleNamespace

import trio
from runtime_spots import Add, Counter, Total, journal, store_counts
from test_activation import first_records_cleaned_up

import zlink_trio.runtime.node
from zlink_trio.core.errors import StaleFence
from zlink_trio.store import MemoryStore, SeparateSteps
from zlink_trio.store.memory import MemoryCombined
from zlink_trio.store.open import open_store
from zlink_trio.testing import open_test_node


async def test_a_store_without_combined_activates_through_the_separate_steps(
        autojump_clock, monkeypatch):
    shared = MemoryStore()

    @asynccontextmanager
    async def halves_only(url, *, relocation=None):
        async with open_store(url) as opened:
            yield SimpleNamespace(location=opened.location, relocation=opened.relocation)

    monkeypatch.setattr(zlink_trio.runtime.node, "open_store", halves_only)
    journal()
    with trio.fail_after(10):
        async with open_test_node("node-a", store=shared, spots=[Counter]) as node:
            assert isinstance(node._rt.store.combined, SeparateSteps)
            assert await node.client.request("c-1", Add(2), reply=Total).instance_spot(
                "counter").timeout(5) == Total(2)
            await first_records_cleaned_up(node)
            record = await shared.location.find("c-1")
            assert record.recovery_pointer is None
            assert await shared.relocation.inbox_cursor("c-1", record.object_generation) == 1
            assert await store_counts(shared) == (1, 0, 1)


async def test_a_stale_combined_cleanup_falls_back_to_the_separate_steps(autojump_clock):
    refused = []
    finish = MemoryCombined.finish_first_record

    async def stale_once(self: MemoryCombined, spot_id: str, *args: object,
                         **kwargs: object) -> object:
        if not refused:
            refused.append(spot_id)
            raise StaleFence(f"{spot_id!r} changed since Ready (test)")
        return await finish(self, spot_id, *args, **kwargs)

    journal()
    with trio.fail_after(10):
        async with open_test_node("node-a", store="memory://", spots=[Counter]) as node:
            store = node._rt.store
            MemoryCombined.finish_first_record = stale_once  # type: ignore[assignment]
            try:
                assert await node.client.request("c-1", Add(1), reply=Total).instance_spot(
                    "counter").timeout(5) == Total(1)
                await first_records_cleaned_up(node)
            finally:
                MemoryCombined.finish_first_record = finish  # type: ignore[method-assign]
            assert refused == ["c-1"]
            record = await store.location.find("c-1")
            assert record.recovery_pointer is None
            assert await store_counts(store) == (1, 0, 1)

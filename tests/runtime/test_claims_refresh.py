"""Placement's claims refreshed once, ahead of expiry, in the background (MockClock)."""

from __future__ import annotations

import pytest
import trio
from runtime_spots import Add, Counter, Total

from zlink_trio.bench.stores import count_store_calls
from zlink_trio.core.errors import StoreUnavailable
from zlink_trio.testing import open_test_node


async def _activate(node, spot_id: str) -> None:
    assert await node.client.request(spot_id, Add(1), reply=Total).instance_spot(
        "counter").timeout(5) == Total(1)


async def _refreshes(rt, reads: int) -> None:
    """Let the refresh task run (autojump waits for store calls in flight), then check
    how many reads it has started."""
    await trio.sleep(0.05)
    assert rt.claims_refresh.reads == reads


async def test_a_burst_past_half_the_max_age_reads_the_claims_once(autojump_clock, store_url,
                                                                    store):
    async with open_test_node("node-a", store=store_url, spots=[Counter]) as node:
        rt = node._rt
        max_age = rt.options.placement_max_age
        await _activate(node, "first")
        first = rt.placement_claims
        assert first is not None
        autojump_clock.jump(max_age * 0.6)  # still valid, older than half its age
        with count_store_calls(store) as calls:
            async with trio.open_nursery() as nursery:
                for i in range(20):
                    nursery.start_soon(_activate, node, f"burst-{i}")
            await _refreshes(rt, 1)
        # None of the 20 read the claims itself: the one read is the refresh's.
        assert calls["location.descriptors"] == 1
        assert rt.claims_refresh.reads == 1
        refreshed = rt.placement_claims
        assert refreshed is not None
        assert refreshed[0] >= first[0] + max_age * 0.6
        # Past the first read's max age, the refreshed one still serves (and asks again).
        autojump_clock.jump(max_age * 0.6)
        with count_store_calls(store) as calls:
            await _activate(node, "later")
            await _refreshes(rt, 2)
        assert calls["location.descriptors"] == 1
        assert rt.claims_refresh.reads == 2


async def test_a_young_read_asks_for_no_refresh(autojump_clock, store_url):
    async with open_test_node("node-a", store=store_url, spots=[Counter]) as node:
        rt = node._rt
        await _activate(node, "first")
        autojump_clock.jump(rt.options.placement_max_age * 0.2)
        await _activate(node, "second")
        await trio.sleep(0.01)
        assert rt.claims_refresh.reads == 0


async def test_a_failed_refresh_leaves_placement_reading_itself(autojump_clock, store_url,
                                                                monkeypatch):
    async with open_test_node("node-a", store=store_url, spots=[Counter]) as node:
        rt = node._rt
        max_age = rt.options.placement_max_age
        await _activate(node, "first")
        first = rt.placement_claims
        location = type(rt.store.location)
        original = location.descriptors

        async def refused(self, *args, **kwargs):
            raise StoreUnavailable("the test refuses descriptor reads")

        monkeypatch.setattr(location, "descriptors", refused)
        autojump_clock.jump(max_age * 0.6)
        await _activate(node, "uses-the-old-read")  # valid still: no read of its own
        await _refreshes(rt, 1)
        assert rt.placement_claims is first  # the failed refresh changed nothing
        monkeypatch.setattr(location, "descriptors", original)
        autojump_clock.jump(max_age * 0.5)  # expired now: the activation reads itself
        await _activate(node, "reads-itself")
        assert rt.placement_claims is not first
        assert rt.placement_claims[0] >= first[0] + max_age
        await trio.sleep(0.01)
        assert rt.claims_refresh.reads == 1  # the old read is not asked for again


@pytest.mark.parametrize("age", [0.49, 0.5])
async def test_the_refresh_is_asked_from_half_the_max_age(autojump_clock, age):
    async with open_test_node("node-a", store="memory://", spots=[Counter]) as node:
        rt = node._rt
        await _activate(node, "first")
        autojump_clock.jump(rt.options.placement_max_age * age)
        await _activate(node, "second")
        await trio.sleep(0.01)
        assert rt.claims_refresh.reads == (1 if age >= 0.5 else 0)

"""Idle eviction of Instance Spots (09 §5), through the public API on MockClock."""

from __future__ import annotations

import trio
from runtime_spots import KNOBS, Add, Block, Counter, Room, Total, journal

import zlink_trio as zl
from zlink_trio.testing import open_test_node


async def test_idle_instance_spot_is_evicted_with_on_close_before_release(
        autojump_clock, store_url, store, monkeypatch):
    events = journal()
    seen: list[object] = []
    with trio.fail_after(100):
        async with open_test_node("node-a", store=store_url, spots=[Counter, Room],
                                  instance_idle_timeout=10) as node:
            await node.client.request("c", Add(1), reply=Total).instance_spot()
            first = await node.spots.find("c")
            await node.spots.get_or_create("r", "room")

            # The node's store is its own connection (memory: the same object), of the
            # same class as the test's, so the spy patches the class.
            location_type = type(store.location)
            original = location_type.release

            async def spy(self, fence):  # the location is released only after on_close ran
                seen.append([e for e in events if e[0] == "close"])
                return await original(self, fence)

            monkeypatch.setattr(location_type, "release", spy)
            await trio.sleep(9)
            assert await node.spots.find("c") == first
            await trio.sleep(5)
            assert await node.spots.find("c") is None
            assert ("close", "c", first.generation, zl.CloseReason.IDLE_EVICTED) in events
            assert seen
            assert seen[0] == [("close", "c", first.generation,
                                         zl.CloseReason.IDLE_EVICTED)]
            # User Spots are never idle-evicted.
            assert await node.spots.find("r") is not None
            # The next call with Instance intent activates a new generation.
            assert await node.client.request("c", Add(1), reply=Total).instance_spot() \
                == Total(1)
            again = await node.spots.find("c")
            assert again is not None
            assert again.generation > first.generation


async def test_spot_with_work_in_progress_is_not_evicted(autojump_clock, store_url):
    events = journal()
    KNOBS["gate"] = gate = trio.Event()
    with trio.fail_after(100):
        async with open_test_node("node-a", store=store_url, spots=[Counter],
                                  instance_idle_timeout=5) as node:
            await node.client.send("c", Block("long")).instance_spot()
            await trio.sleep(30)
            assert not [e for e in events if e[0] == "close"]
            gate.set()
            await trio.sleep(30)
            assert [e[3] for e in events if e[0] == "close"] == [zl.CloseReason.IDLE_EVICTED]


async def test_activity_postpones_eviction_and_zero_disables_it(autojump_clock, store_url):
    events = journal()
    with trio.fail_after(200):
        async with open_test_node("node-a", store=store_url, spots=[Counter],
                                  instance_idle_timeout=10) as node:
            await node.client.send("c", Add(1)).instance_spot()
            for _ in range(5):
                await trio.sleep(6)
                await node.client.send("c", Add(1))
            assert not [e for e in events if e[0] == "close"]
        async with open_test_node("node-b", store=store_url, spots=[Counter],
                                  instance_idle_timeout=0) as node:
            await node.client.send("d", Add(1)).instance_spot()
            await trio.sleep(100)
            assert await node.spots.find("d") is not None


async def test_eviction_racing_an_intent_request_ends_ready_or_new_generation(
        autojump_clock, store_url):
    events = journal()
    with trio.fail_after(300):
        async with open_test_node("node-a", store=store_url, spots=[Counter],
                                  instance_idle_timeout=3, idle_sweep_interval=0.5) as node:
            await node.client.send("c", Add(1)).instance_spot()
            replies = []
            for _ in range(40):  # requests keep arriving around each eviction
                await trio.sleep(0.37)
                replies.append(await node.client.request("c", Add(1), reply=Total)
                               .instance_spot())
                await trio.sleep(3.0)
            assert all(isinstance(r, Total) for r in replies)
            factories = [e for e in events if e[0] == "factory"]
            evictions = [e for e in events if e[0] == "close"]
            assert len(factories) == len(evictions) + 1
            gens = [e[2] for e in factories]
            assert gens == sorted(set(gens))

"""Direct calls to existing Spots: errors, one turn at a time, lanes, deadlines, builders."""

from __future__ import annotations

import logging

import pytest
import trio
from runtime_spots import (
    KNOBS,
    Add,
    Big,
    Block,
    Boom,
    Counter,
    Note,
    Room,
    Total,
    Unhandled,
    journal,
    store_counts,
)

import zlink_trio as zl
from zlink_trio.store import MemoryStore


async def test_missing_spot_without_intent_is_not_found_and_nothing_is_written(autojump_clock):
    store = MemoryStore()
    with trio.fail_after(10):
        async with zl.open_node("node-a", store=store, spots=[Counter]) as node:
            with pytest.raises(zl.NotFound, match="no Instance intent"):
                await node.client.request("c-1", Add(1), reply=Total)
            with pytest.raises(zl.NotFound):
                await node.client.send("c-1", Add(1))
            assert await store_counts(store) == (0, 0, 0)


async def test_handler_error_reaches_the_requester_and_the_spot_keeps_running(autojump_clock):
    with trio.fail_after(10):
        async with zl.open_node("node-a", spots=[Counter]) as node:
            await node.client.request("c", Add(1), reply=Total).instance_spot()
            with pytest.raises(zl.HandlerError, match="ValueError: bad") as info:
                await node.client.request("c", Boom("bad"), reply=Total)
            assert isinstance(info.value.__cause__, ValueError)
            assert info.value.error_type == "ValueError"
            assert await node.client.request("c", Add(1), reply=Total) == Total(2)


async def test_a_failing_send_is_logged(autojump_clock, caplog):
    with trio.fail_after(10):
        async with zl.open_node("node-a", spots=[Counter]) as node:
            await node.client.send("c", Boom("quiet")).instance_spot()
            with caplog.at_level(logging.ERROR, logger="zlink_trio"):
                await node.client.send("c", Boom("loud"))
                await node.client.request("c", Add(0), reply=Total)  # the send ran first
    assert any("raised on a one-way send" in r.getMessage() for r in caplog.records)


async def test_type_mismatch_for_unhandled_message_and_wrong_reply_type(autojump_clock):
    with trio.fail_after(10):
        async with zl.open_node("node-a", spots=[Counter, Room]) as node:
            await node.client.send("c", Add(1)).instance_spot()
            with pytest.raises(zl.TypeMismatch, match="no handler"):
                await node.client.request("c", Unhandled(1), reply=Total)
            with pytest.raises(zl.TypeMismatch, match="reply=Total"):
                await node.client.request("c", Add(1), reply=Add)
            with pytest.raises(zl.TypeMismatch):
                await node.client.request("c", Add(1))  # handler replies Total, not None
            await node.spots.get_or_create("r", "room")
            with pytest.raises(zl.TypeMismatch, match="User Spot"):
                await node.client.send("r", Add(1)).instance_spot("counter")


async def test_one_turn_at_a_time_in_admission_order(autojump_clock):
    events = journal()
    KNOBS["gate"] = gate = trio.Event()
    with trio.fail_after(10):
        async with zl.open_node("node-a", spots=[Counter]) as node:
            await node.client.send("c", Block("first")).instance_spot()
            for n in range(1, 4):
                await node.client.send("c", Add(n))
            await trio.sleep(1)
            assert [e[0] for e in events if e[0] != "factory" and e[0] != "activate"] == [
                "block-start"]
            gate.set()
            assert await node.client.request("c", Add(0), reply=Total) == Total(6)
            handled = [e for e in events if e[0] in ("block-end", "handle")]
            assert [e[0] for e in handled] == ["block-end", "handle", "handle", "handle",
                                               "handle"]
            assert [e[3] for e in handled[1:]] == [1, 2, 3, 0]


async def test_count_bound_refuses_with_capacity_exceeded_naming_the_lane(autojump_clock):
    journal()
    KNOBS["gate"] = gate = trio.Event()
    with trio.fail_after(10):
        async with zl.open_node("node-a", spots=[Counter],
                                application_lane=zl.LaneBounds(3, 1 << 20)) as node:
            await node.client.send("c", Block("hold")).instance_spot()
            await node.client.send("c", Add(1))
            await node.client.send("c", Add(1))
            with pytest.raises(zl.CapacityExceeded) as info:
                await node.client.send("c", Add(1))
            assert info.value.lane == "application"
            gate.set()
            await trio.sleep(1)
            # The reservations come back at terminal completion: admission works again.
            assert await node.client.request("c", Add(1), reply=Total) == Total(3)


async def test_byte_bound_is_hit_before_the_count_bound_by_large_messages(autojump_clock):
    journal()
    KNOBS["gate"] = gate = trio.Event()
    with trio.fail_after(10):
        async with zl.open_node("node-a", spots=[Counter],
                                application_lane=zl.LaneBounds(100, 40_000)) as node:
            await node.client.send("c", Block("hold")).instance_spot()
            await node.client.send("c", Big("x" * 15_000))
            await node.client.send("c", Big("x" * 15_000))
            with pytest.raises(zl.CapacityExceeded, match="byte bound") as info:
                await node.client.send("c", Big("x" * 15_000))
            assert info.value.lane == "application"
            gate.set()


async def test_queued_request_past_its_deadline_is_not_run(autojump_clock):
    events = journal()
    KNOBS["gate"] = gate = trio.Event()
    with trio.fail_after(20):
        async with zl.open_node("node-a", spots=[Counter]) as node:
            await node.client.send("c", Block("hold")).instance_spot()
            with pytest.raises(zl.DeadlineExceeded):
                await node.client.request("c", Add(5), reply=Total).timeout(1)
            gate.set()
            assert await node.client.request("c", Add(1), reply=Total) == Total(1)
            assert [e[3] for e in events if e[0] == "handle"] == [1]


async def test_builder_options_once_awaited_once_and_in_mesh_after_intent(autojump_clock):
    with trio.fail_after(10):
        async with zl.open_node("node-a", spots=[Counter]) as node:
            call = node.client.request("c", Add(1), reply=Total).timeout(5)
            with pytest.raises(zl.InvalidOperation, match="already set"):
                call.timeout(5)
            with pytest.raises(zl.InvalidOperation, match="instance_spot"):
                node.client.send("c", Add(1)).in_mesh("world")
            call = node.client.request("c", Add(1), reply=Total).instance_spot().in_mesh("world")
            assert await call == Total(1)
            with pytest.raises(zl.InvalidOperation, match="already awaited"):
                await call
            with pytest.raises(zl.InvalidOperation, match="after the call was awaited"):
                call.timeout(1)
            for bad in (0, -1, float("nan"), True):
                with pytest.raises(zl.InvalidOperation):
                    node.client.send("c", Add(1)).timeout(bad)
            with pytest.raises(zl.InvalidOperation):
                await node.client.send("", Add(1))
            with pytest.raises(zl.InvalidOperation, match="reserved"):
                await node.client.send(node.entry_spot_id, Add(1)).instance_spot()
            with pytest.raises(zl.InvalidOperation, match="attrs"):
                await node.client.send("c", object())


async def test_message_to_a_closing_spot_is_stale_and_not_run(autojump_clock):
    events = journal()
    KNOBS["gate"] = gate = trio.Event()
    with trio.fail_after(10):
        async with zl.open_node("node-a", spots=[Room]) as node:
            ref = (await node.spots.get_or_create("r", "room")).ref
            await node.client.send("r", Block("hold"))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(node.spots.close, ref)
                await trio.sleep(1)
                with pytest.raises(zl.StaleRoute):
                    await node.client.send("r", Note("late"))
                gate.set()
            assert ("note", "r", "late") not in events
            assert events[-1][0] == "close"


async def test_stale_owner_filtering_uses_lease_validity_not_generation(autojump_clock):
    now = [0.0]
    with trio.fail_after(50):
        async with zl.open_node("node-a", spots=[Counter],
                                injected=zl.InjectedOptions(clock=lambda: now[0]),
                                lease=10.0) as node:
            await node.client.request("c", Add(1), reply=Total).instance_spot()
            now[0] = 11.0  # the store clock passes the lease deadline: owner invalid
            with pytest.raises(zl.StaleRoute, match="lease"):
                await node.client.send("c", Add(1))
            now[0] = 0.0

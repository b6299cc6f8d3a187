"""User Spot Create / GetOrCreate / Find on one node (06 §3)."""

from __future__ import annotations

import pytest
import trio
from runtime_spots import (
    KNOBS,
    Add,
    Big,
    Counter,
    Room,
    RoomSpec,
    Total,
    Welcome,
    journal,
    store_counts,
)

import zlink_trio as zl
from zlink_trio.testing import open_test_node


async def test_get_or_create_created_then_existing_with_reply_and_ref(
        autojump_clock, store_url, store):
    events = journal()
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Room]) as node:
            created = await node.spots.get_or_create("r", "room").request(RoomSpec("hall")) \
                .timeout(5)
            assert created.state is zl.CreateState.CREATED
            assert created.reply == Welcome("welcome to hall")
            assert created.ref.spot_id == "r"
            assert created.ref.node_rid == node.node_rid
            assert created.ref.mesh == "world"
            again = await node.spots.get_or_create("r", "room").in_mesh("world")
            assert again.state is zl.CreateState.EXISTING
            assert again.reply is None
            assert again.ref == created.ref
            assert await node.spots.find("r") == created.ref
            assert await node.spots.find("nobody") is None
            assert [e for e in events if e[0] == "factory"] == [
                ("factory", "r", created.ref.generation, RoomSpec("hall"))]
            assert await store_counts(store) == (1, 0, 0)  # request root deleted


async def test_rejected_creation_leaves_nothing_and_is_not_shared(autojump_clock, store_url, store):
    events = journal()
    KNOBS["reject"] = Welcome("full")
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Room]) as node:
            result = await node.spots.get_or_create("r", "room")
            assert result.state is zl.CreateState.REJECTED
            assert result.reply == Welcome("full")
            assert result.ref.spot_id == "r"
            assert await store_counts(store) == (0, 0, 0)
            assert await node.spots.find("r") is None
            assert ("close", "r", result.ref.generation,
                    zl.CloseReason.ACTIVATION_FAILED) in events
            del KNOBS["reject"]
            second = await node.spots.get_or_create("r", "room")
            assert second.state is zl.CreateState.CREATED
            assert second.ref.generation > result.ref.generation


async def test_waiter_on_a_rejected_attempt_competes_again(autojump_clock, store_url):
    journal()
    KNOBS["slow_activate"] = 1
    KNOBS["reject"] = True
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Room]) as node:
            results: dict[str, zl.CreateResult] = {}

            async def first() -> None:
                results["first"] = await node.spots.get_or_create("r", "room")
                KNOBS.pop("reject")

            async def second() -> None:
                await trio.sleep(0.5)
                results["second"] = await node.spots.get_or_create("r", "room")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(first)
                nursery.start_soon(second)
            assert results["first"].state is zl.CreateState.REJECTED
            assert results["second"].state is zl.CreateState.CREATED


async def test_concurrent_get_or_create_converges_on_one_factory_run(autojump_clock, store_url):
    events = journal()
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Room]) as node:
            results: list[zl.CreateResult] = []

            async def call() -> None:
                results.append(await node.spots.get_or_create("r", "room"))

            async with trio.open_nursery() as nursery:
                for _ in range(100):
                    nursery.start_soon(call)
            states = [r.state for r in results]
            assert states.count(zl.CreateState.CREATED) == 1
            assert states.count(zl.CreateState.EXISTING) == 99
            assert len({r.ref for r in results}) == 1
            assert [e[0] for e in events].count("factory") == 1


async def test_create_issues_a_uuid4_each_time(autojump_clock, store_url):
    journal()
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Room]) as node:
            a = await node.spots.create("room").request(RoomSpec())
            b = await node.spots.create("room")
            assert a.state is b.state is zl.CreateState.CREATED
            assert a.ref.spot_id != b.ref.spot_id
            assert await node.spots.find(a.ref.spot_id) == a.ref


async def test_type_errors_and_invalid_input_write_nothing(autojump_clock, store_url, store):
    journal()
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Room, Counter]) as node:
            with pytest.raises(zl.TypeMismatch):
                await node.spots.get_or_create("r", "counter")
            with pytest.raises(zl.NotFound):
                await node.spots.get_or_create("r", "nope")
            with pytest.raises(zl.InvalidOperation, match="reserved"):
                await node.spots.get_or_create(node.entry_spot_id, "room")
            with pytest.raises(zl.InvalidOperation, match="bound"):
                await node.spots.get_or_create("r", "room").request(Big("x" * (1 << 20)))
            with pytest.raises(zl.InvalidOperation, match="already set"):
                node.spots.create("room").timeout(1).timeout(1)
            assert await store_counts(store) == (0, 0, 0)
            await node.client.request("c", Add(1), reply=Total).instance_spot()
            with pytest.raises(zl.TypeMismatch, match="Instance"):
                await node.spots.get_or_create("c", "room")


async def test_factory_failure_and_deadline_abort_the_reservation(autojump_clock, store_url, store):
    journal()
    with trio.fail_after(30):
        async with open_test_node("node-a", store=store_url, spots=[Room]) as node:
            KNOBS["fail_factory"] = True
            with pytest.raises(zl.HandlerError) as info:
                await node.spots.get_or_create("r", "room")
            assert isinstance(info.value.__cause__, RuntimeError)
            KNOBS.clear()
            KNOBS["slow_activate"] = 10
            with pytest.raises(zl.DeadlineExceeded):
                await node.spots.get_or_create("r", "room").timeout(2)
            assert await store_counts(store) == (0, 0, 0)
            KNOBS.clear()
            assert (await node.spots.get_or_create("r", "room")).state is zl.CreateState.CREATED

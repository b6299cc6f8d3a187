"""Cold activation on one node (06 §4.1): store transactions, first message first, failures."""

from __future__ import annotations

import pytest
import trio
from runtime_spots import KNOBS, Add, Counter, Gauge, Note, Room, Total, journal, store_counts

import zlink_trio as zl
from zlink_trio.testing import open_test_node


async def first_records_cleaned_up(node) -> None:
    """Wait until every local Spot's first-record cleanup (after its reply) has run."""
    with trio.fail_after(30):
        for host in list(node._rt.catalog.hosts.values()):
            await host.wait_first_record()
    assert all(h.first_record_settled for h in node._rt.catalog.hosts.values()), (
        "a first-record cleanup ran but did not finish (see the logged store error)")


async def test_activation_leaves_ready_authority_and_no_recovery_state(
        autojump_clock, store_url, store):
    events = journal()
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Counter]) as node:
            assert await node.client.request("c", Add(2), reply=Total).instance_spot(
                "counter").timeout(5) == Total(2)
            await first_records_cleaned_up(node)
            record = await store.location.find("c")
            assert record is not None
            assert record.state.value == "ready"
            assert record.kind is zl.SpotKind.INSTANCE
            assert record.recovery_pointer is None
            assert record.creation_intent is None
            # Root deleted; the inbox cursor moved past the first record.
            assert await store_counts(store) == (1, 0, 1)
            assert await store.relocation.inbox_cursor("c", record.object_generation) == 1
            assert [e[0] for e in events] == ["factory", "activate", "handle"]


async def test_concurrent_first_messages_run_the_factory_once_and_each_once(
        autojump_clock, store_url):
    events = journal()
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Counter]) as node:
            replies: list[Total] = []

            async def call(n: int) -> None:
                replies.append(await node.client.request("c", Add(n), reply=Total)
                               .instance_spot())

            async with trio.open_nursery() as nursery:
                for n in range(1, 31):
                    nursery.start_soon(call, n)
            assert [e[0] for e in events].count("factory") == 1
            handled = [e[3] for e in events if e[0] == "handle"]
            assert sorted(handled) == list(range(1, 31))
            assert sorted(r.value for r in replies) == sorted(
                sum(handled[: i + 1]) for i in range(30))


async def test_first_message_runs_before_any_other(autojump_clock, store_url):
    events = journal()
    KNOBS["activating"] = started = trio.Event()
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Counter]) as node:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_send, node, "first")
                # The others start once "first" won the reservation (it is activating):
                # callers that race "first" to it on a networked store may win instead,
                # and then *their* message is the first one, as it should be.
                await started.wait()
                for text in ("a", "b", "c"):
                    nursery.start_soon(_send, node, text)
            await node.client.request("c", Add(0), reply=Total)
            notes = [e[2] for e in events if e[0] == "note"]
            assert notes[0] == "first"
            assert sorted(notes) == ["a", "b", "c", "first"]


async def _send(node: zl.Node, text: str) -> None:
    await node.client.send("c", Note(text)).instance_spot()


async def test_a_send_with_intent_completes_at_admission(autojump_clock, store_url):
    events = journal()
    KNOBS["slow_activate"] = 3
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Counter]) as node:
            start = trio.current_time()
            await node.client.send("c", Add(1)).instance_spot()
            assert trio.current_time() == start  # did not wait for the factory
            assert await node.client.request("c", Add(1), reply=Total) == Total(2)
            assert trio.current_time() - start >= 3
            assert [e[0] for e in events].count("factory") == 1


@pytest.mark.parametrize("knob", ["fail_factory", "fail_activate"])
async def test_factory_failure_aborts_with_the_fence_and_reports_handler_error(
        autojump_clock, store_url, store, knob):
    events = journal()
    KNOBS[knob] = True
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Counter]) as node:
            with pytest.raises(zl.HandlerError) as info:
                await node.client.request("c", Add(1), reply=Total).instance_spot()
            assert isinstance(info.value.__cause__, RuntimeError | KeyError)
            assert await store_counts(store) == (0, 0, 0)
            constructed = knob == "fail_activate"
            closes = [e for e in events if e[0] == "close"]
            assert closes == ([("close", "c", closes[0][2], zl.CloseReason.ACTIVATION_FAILED)]
                              if constructed else [])
            KNOBS.clear()
            assert await node.client.request("c", Add(1), reply=Total).instance_spot() == Total(1)


async def test_deadline_during_initialize_aborts_and_frees_the_id(autojump_clock, store_url, store):
    events = journal()
    KNOBS["slow_activate"] = 10
    with trio.fail_after(30):
        async with open_test_node("node-a", store=store_url, spots=[Counter]) as node:
            with pytest.raises(zl.DeadlineExceeded):
                await node.client.request("c", Add(1), reply=Total).instance_spot().timeout(2)
            await trio.sleep(1)
            assert await store_counts(store) == (0, 0, 0)
            assert ("close", "c", events[0][2], zl.CloseReason.ACTIVATION_FAILED) in events
            assert node.statistics().activating == 0


async def test_instance_type_auto_selection_and_type_errors(autojump_clock):
    journal()
    with trio.fail_after(10):
        async with zl.open_node("node-a", spots=[Counter, Gauge, Room]) as node:
            with pytest.raises(zl.InvalidOperation, match="several Instance Spot types"):
                await node.client.send("x", Add(1)).instance_spot()
            with pytest.raises(zl.NotFound, match="nope"):
                await node.client.send("x", Add(1)).instance_spot("nope")
            with pytest.raises(zl.TypeMismatch, match="User Spot type"):
                await node.client.send("x", Add(1)).instance_spot("room")
            with pytest.raises(zl.NotFound):
                await node.client.send("x", Add(1)).instance_spot("counter").in_mesh("other")
            await node.client.request("g", Add(1), reply=Total).instance_spot("gauge")
            with pytest.raises(zl.TypeMismatch, match="'gauge'"):
                await node.client.send("g", Add(1)).instance_spot("counter")
            # Without a type, an existing Instance Spot uses the type in its authority.
            assert await node.client.request("g", Add(1), reply=Total).instance_spot() == Total(2)


async def test_ceiling_rejects_local_activation(autojump_clock, store_url):
    journal()
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Counter, Room],
                                  active_object_ceiling=2) as node:
            await node.client.request("c-1", Add(1), reply=Total).instance_spot()
            await node.spots.get_or_create("r-1", "room")
            with pytest.raises(zl.CapacityExceeded, match=r"ceiling|capacity") as info:
                await node.client.request("c-2", Add(1), reply=Total).instance_spot()
            assert info.value.lane is None
            with pytest.raises(zl.CapacityExceeded):
                await node.spots.get_or_create("r-2", "room")
            # Existing Spots still take messages.
            assert await node.client.request("c-1", Add(1), reply=Total) == Total(2)


async def test_local_cold_activation_skips_redundant_reads(autojump_clock, store_url, store):
    # The target's re-read repeats the source's Missing (Reserve still checks), and
    # placement reuses the descriptor claims it read less than placement_max_age ago.
    from zlink_trio.bench.stores import count_store_calls

    journal()
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store_url, spots=[Counter]) as node:
            with count_store_calls(store) as calls:
                for i in range(3):
                    assert await node.client.request(f"c{i}", Add(i), reply=Total) \
                        .instance_spot("counter").timeout(5) == Total(i)
                # The cleanup after the first handler runs after the reply: wait for it.
                await first_records_cleaned_up(node)
            assert calls["location.find"] == 3
            assert calls["location.descriptors"] == 1
            # Both stores share the backend: root + Reserve, first record + CommitReady
            # and the cleanup after the first handler are one transaction each.
            assert calls["combined.reserve_with_root"] == 3
            assert calls["combined.commit_ready_with_first_record"] == 3
            assert calls["combined.finish_first_record"] == 3
            assert sum(calls.values()) == 3 * 4 + 1
            autojump_clock.jump(1.5)  # past the 1 s default: placement reads again
            with count_store_calls(store) as calls:
                await node.client.request("c9", Add(1), reply=Total).instance_spot("counter")
            assert calls["location.descriptors"] == 1


async def test_owner_that_won_after_the_source_read_refuses_reserve(autojump_clock):
    # The target no longer re-reads after the source's Missing: an owner that appears in
    # between must be caught by Reserve (AuthorityExists), the root deleted, the factory
    # not run here, and the message handed back to the resolver (here: owned elsewhere).
    # The racing Reserve waits on another node's request: a transaction that suspends,
    # so the store offers no immediate (never suspending) transactions.
    from zlink_trio.store import MemoryStore
    from zlink_trio.store.memory import MemoryCombined

    events = journal()
    shared = MemoryStore(immediate=False)
    reserve_with_root = MemoryCombined.reserve_with_root
    with trio.fail_after(10):
        async with open_test_node("node-a", store=shared, spots=[Counter]) as a:
            await a.client.request("warm", Add(1), reply=Total).instance_spot("counter")
            # node-b serves another Mesh, so its own cold activation of "x" is placed on
            # node-b for sure (placement among equal weights is random), and node-a's
            # names its Mesh explicitly now that there are two.
            async with open_test_node("node-b", store=shared, spots=[Counter],
                                      mesh="other") as b:
                raced = False

                async def racing_reserve(self: MemoryCombined, spot_id: str, data: bytes,
                                         **kwargs: object) -> object:
                    nonlocal raced
                    if not raced and spot_id == "x":
                        raced = True  # node-b creates "x" between node-a's find and Reserve
                        await b.client.request("x", Add(7), reply=Total).instance_spot() \
                            .in_mesh("other")
                    return await reserve_with_root(self, spot_id, data, **kwargs)

                MemoryCombined.reserve_with_root = racing_reserve  # type: ignore[assignment]
                try:
                    with pytest.raises(zl.Unavailable, match="no mesh links"):
                        await a.client.request("x", Add(1), reply=Total).instance_spot(
                            "counter").in_mesh("world")
                finally:
                    MemoryCombined.reserve_with_root = reserve_with_root  # type: ignore[method-assign]
                assert raced
                assert [e[0] for e in events if e[1] == "x"].count("factory") == 1
                assert await b.client.request("x", Add(1), reply=Total) == Total(8)
                stats = await a._rt.store.relocation.statistics()
                assert stats.roots == 0

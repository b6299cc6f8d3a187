"""Cold activation in one synchronous continuation (``memory://``, a type without async hooks).

``activation.activate_inline`` (the sync driver) runs the steps of 06 §4.1 with nothing
awaited; these tests check it takes the same durable steps and chart events as the
task path (``activation.run_activation``, the async driver), and that a failure after
Reserve still aborts with the fence and reports HandlerError.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio
from runtime_spots import store_counts

import zlink_trio as zl
from zlink_trio.runtime import charts
from zlink_trio.runtime.coordinators.envelope import ActivationEnvelope
from zlink_trio.store import MemoryStore
from zlink_trio.store.combined_protocol import immediate_of
from zlink_trio.testing import open_test_node

KNOBS: dict[str, Any] = {}
EVENTS: list[tuple[Any, ...]] = []


@attrs.frozen
class Put:
    n: int


@attrs.frozen
class Got:
    n: int


@zl.instance_spot("quick", relocation=zl.RecreateOnRelocation())
class Quick:
    """An Instance Spot whose activation has nothing to await (sync ``on_activate``)."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        if KNOBS.get("fail_factory"):
            raise RuntimeError("factory failed")
        self.ctx = ctx
        self.seen: list[int] = []

    def on_activate(self) -> None:
        if KNOBS.get("fail_activate"):
            raise KeyError("activate failed")
        EVENTS.append(("activate", self.ctx.spot_id))

    @zl.handler
    async def put(self, msg: Put) -> Got:
        self.seen.append(msg.n)
        EVENTS.append(("handle", self.ctx.spot_id, msg.n))
        return Got(sum(self.seen))

    def on_close(self, reason: zl.CloseReason) -> None:
        EVENTS.append(("close", self.ctx.spot_id, reason))


def awaited_store() -> MemoryStore:
    """A memory store that offers no synchronous transactions: the task path runs."""
    return MemoryStore(immediate=False)


@pytest.fixture(autouse=True)
def _clean() -> Any:
    KNOBS.clear()
    EVENTS.clear()
    yield
    KNOBS.clear()


async def _cold_transitions(store: MemoryStore) -> list[tuple[str, str, str]]:
    taken: list[tuple[str, str, str]] = []

    def observe(chart: str, state: str, event: str, target: str) -> None:
        if chart == charts.COLD.name:
            taken.append((state, event, target))

    charts.TRACE.append(observe)
    try:
        async with open_test_node("node-a", store=store, spots=[Quick]) as node:
            assert await node.client.request("q", Put(2), reply=Got).instance_spot() == Got(2)
            for _ in range(100):  # the first record's cleanup follows the reply
                host = node._rt.catalog.hosts["q"]
                if host.first_record_settled:
                    break
                await trio.sleep(0.01)
            assert await store_counts(store) == (1, 0, 1)  # Ready; root gone; inbox kept
            record = await store.location.find("q")
            assert record is not None
            assert record.recovery_pointer is None
            assert await store.relocation.inbox_cursor("q", record.object_generation) == 1
    finally:
        charts.TRACE.remove(observe)
    return taken


async def test_the_synchronous_path_takes_every_step_of_the_task_path(autojump_clock):
    with trio.fail_after(10):
        assert immediate_of(MemoryStore()) is not None
        assert immediate_of(awaited_store()) is None
        now = await _cold_transitions(MemoryStore())
        awaited = await _cold_transitions(awaited_store())
    assert now == awaited
    assert now[-1][2] == charts.COLD.st.activated


@pytest.mark.parametrize("knob", ["fail_factory", "fail_activate"])
async def test_a_failure_after_reserve_aborts_and_reports_handler_error(autojump_clock, knob):
    store = MemoryStore()
    KNOBS[knob] = True
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store, spots=[Quick]) as node:
            with pytest.raises(zl.HandlerError) as info:
                await node.client.request("q", Put(1), reply=Got).instance_spot()
            assert isinstance(info.value.__cause__, RuntimeError | KeyError)
            assert await store_counts(store) == (0, 0, 0)  # aborted, inbox and root gone
            closes = [e for e in EVENTS if e[0] == "close"]
            assert closes == ([("close", "q", zl.CloseReason.ACTIVATION_FAILED)]
                              if knob == "fail_activate" else [])
            assert node.statistics().activating == 0
            KNOBS.clear()
            assert await node.client.request("q", Put(1), reply=Got).instance_spot() == Got(1)


@pytest.mark.parametrize("knob", ["fail_factory", "fail_activate", "refuse_commit"])
async def test_a_failure_after_an_inline_reserve_hands_its_cleanup_to_a_task(
        autojump_clock, monkeypatch, knob):
    # Placement has read the claims ("warm"), so "q" activates in the caller's
    # continuation; a failure after its Reserve (the factory, on_activate, CommitReady)
    # goes on cleaning up (on_close, AbortCreating) in a catalog task, and the caller
    # gets the error once that is done.
    from zlink_trio.core.errors import StaleFence
    from zlink_trio.store.rules import combined

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise StaleFence("the reservation changed (test)")

    store = MemoryStore()
    with trio.fail_after(10):
        async with open_test_node("node-a", store=store, spots=[Quick]) as node:
            await node.client.request("warm", Put(0), reply=Got).instance_spot()
            original = combined.txn_commit_ready_with_first_record
            if knob == "refuse_commit":
                monkeypatch.setattr(combined, "txn_commit_ready_with_first_record", refuse)
            else:
                KNOBS[knob] = True
            expected = zl.Unavailable if knob == "refuse_commit" else zl.HandlerError
            with pytest.raises(expected):
                await node.client.request("q", Put(1), reply=Got).instance_spot()
            monkeypatch.setattr(combined, "txn_commit_ready_with_first_record", original)
            KNOBS.clear()
            assert await store_counts(store) == (1, 0, 1)  # "warm" only: "q" aborted
            closes = [e for e in EVENTS if e[0] == "close"]
            assert closes == ([] if knob == "fail_factory"
                              else [("close", "q", zl.CloseReason.ACTIVATION_FAILED)])
            assert node.statistics().activating == 0
            assert await node.client.request("q", Put(1), reply=Got).instance_spot() == Got(1)


async def test_a_send_with_intent_activates_and_runs_its_message_first(autojump_clock):
    with trio.fail_after(10):
        async with open_test_node("node-a", store=MemoryStore(), spots=[Quick]) as node:
            await node.client.send("q", Put(5)).instance_spot()
            assert await node.client.request("q", Put(1), reply=Got) == Got(6)
            assert [e for e in EVENTS if e[0] == "handle"] == [("handle", "q", 5),
                                                              ("handle", "q", 1)]


async def test_activating_sends_still_let_other_tasks_run(autojump_clock):
    ran: list[int] = []

    async def other() -> None:
        ran.append(len(EVENTS))

    with trio.fail_after(10):
        async with open_test_node("node-a", store=MemoryStore(), spots=[Quick]) as node:
            # Placement has read the claims: the sends below activate with nothing to await.
            await node.client.request("q-warm", Put(0), reply=Got).instance_spot()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(other)
                for i in range(3):
                    await node.client.send(f"q-{i}", Put(i)).instance_spot()
                assert ran  # a send that resolved yielded once (nothing else would)


async def _recorded_envelope(store: MemoryStore, monkeypatch: pytest.MonkeyPatch
                             ) -> dict[str, Any]:
    from zlink_trio.store.rules import combined

    roots: list[bytes] = []
    original = combined.txn_reserve_with_root

    def recording(lstate: Any, rstate: Any, spot_id: str, root: bytes, **kwargs: Any) -> Any:
        roots.append(root)
        return original(lstate, rstate, spot_id, root, **kwargs)

    monkeypatch.setattr(combined, "txn_reserve_with_root", recording)
    async with open_test_node("node-a", store=store, spots=[Quick]) as node:
        assert await node.client.request("q", Put(3), reply=Got).instance_spot() == Got(3)
        node_rid = str(node._rt.node_rid)
    monkeypatch.undo()
    assert len(roots) == 1
    fields = json.loads(roots[0])
    assert ActivationEnvelope.decode(roots[0]).encode() == roots[0]
    assert fields.pop("sourceNodeRid") == node_rid
    assert fields.pop("operationId")
    assert fields.pop("deadlineMs") > 0
    return fields


async def test_the_synchronous_path_records_the_envelope_the_task_path_records(
        autojump_clock, monkeypatch):
    # Both drivers write the envelope's bytes without an ActivationEnvelope object.
    with trio.fail_after(10):
        now = await _recorded_envelope(MemoryStore(), monkeypatch)
        awaited = await _recorded_envelope(awaited_store(), monkeypatch)
    assert now == awaited
    assert now["spotId"] == "q"
    assert now["stableType"] == "quick"


def test_pooled_operation_ids_are_fresh_lowercase_uuid4s():
    from zlink_trio.core.identity import is_lowercase_uuid4
    from zlink_trio.runtime.calls.delivery import pooled_uuid4

    ids = [pooled_uuid4() for _ in range(1000)]  # several reads of the pool
    assert all(is_lowercase_uuid4(i) for i in ids)
    assert len(set(ids)) == len(ids)


async def test_without_trace_the_fixed_paths_end_where_stepping_ends(autojump_clock):
    # The activation, the first record's cleanup and Incarnation.open index precomputed states
    # unless charts.TRACE observes; they must be where stepping each event leads.
    from zlink_trio.runtime.coordinators import activation
    from zlink_trio.runtime.incarnation import first_record

    assert not charts.TRACE
    with trio.fail_after(10):
        async with open_test_node("node-a", store=MemoryStore(), spots=[Quick]) as node:
            assert await node.client.request("q", Put(1), reply=Got).instance_spot() == Got(1)
            assert await node.client.request("q", Put(1), reply=Got) == Got(2)
            host = node._rt.catalog.hosts["q"]
            assert host.state == charts.INCARNATION.st.serving
            assert host.first_record_settled
    assert activation._WALKS
    for start, walk in activation._WALKS.items():
        state, stepped = start, []
        for event in activation._PATH:
            state = charts.step(charts.COLD, state, event)
            stepped.append(state)
        assert tuple(stepped) == walk
    assert first_record._CLEANED
    for start, end in first_record._CLEANED.items():
        state = start
        for event in first_record._CLEANUP:
            state = charts.step(charts.COLD, state, event)
        assert state == end == charts.COLD.st.activated

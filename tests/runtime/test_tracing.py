"""OpenTelemetry traces (docs/observability.md, "Traces"; ``runtime/observe/tracing.py``).

Nodes in this process trace with a ``TracerProvider`` of the SDK given to ``open_node``
(``tracing=``) and an in-memory exporter: the global tracer provider is never set here,
since it can be set once per process and every later node would trace. The test across
two processes (:func:`test_a_request_to_a_spot_on_another_process_is_one_trace`) runs
node B in a child process that sets the global provider, so the default (``tracing``
left out) is covered there. Each test under ``trio.fail_after``.
"""

from __future__ import annotations

import json
import sys
import textwrap
from functools import partial
from pathlib import Path
from subprocess import PIPE
from typing import Any

import attrs
import pytest
import trio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import zlink_trio as zl
from zlink_trio.runtime.observe.tracing import NO_TRACING, OtelTracing, tracing_for
from zlink_trio.store import MemoryStore
from zlink_trio.wire.call_metadata import decode_call_metadata, encode_call_metadata

LIMIT = 30


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Total:
    value: int


@attrs.frozen
class Relay:
    """Ask a ``TracedCounter`` to call another counter from its handler."""

    to: str
    n: int


@zl.instance_spot("traced-counter", relocation=zl.RecreateOnRelocation())
class TracedCounter:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.total = 0

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total)

    @zl.handler
    async def relay(self, msg: Relay) -> Total:
        return await self.ctx.client.request(msg.to, Add(msg.n), reply=Total).instance_spot()


def new_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def one(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (span,) = by_name(spans, name)
    return span


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_request_with_cold_activation_is_one_trace_of_resolve_activation_and_turn():
    provider, exporter = new_provider()
    with trio.fail_after(LIMIT):
        async with zl.open_node("node-a", store="memory://", spots=[TracedCounter],
                                tracing=provider) as node:
            total = await node.client.request("c-1", Add(2), reply=Total).instance_spot()
    assert total == Total(2)
    spans = exporter.get_finished_spans()
    request = one(spans, "zlink.request")
    assert request.kind is SpanKind.CLIENT
    assert parent_of(request) is None
    assert attributes(request) == {
        "zlink.node_id": "node-a", "zlink.spot_id": "c-1", "zlink.message": "Add",
        "zlink.mesh": "world", "zlink.outcome": "ok"}
    trace_id = request.context.trace_id
    assert {span.context.trace_id for span in spans} == {trace_id}
    resolve, activation, handle = (one(spans, name) for name in (
        "zlink.resolve", "zlink.cold_activation", "zlink.handle"))
    for child in (resolve, activation, handle):
        assert parent_of(child) == request.context.span_id
    for step in ("zlink.reserve", "zlink.factory", "zlink.commit"):
        assert parent_of(one(spans, step)) == activation.context.span_id
    assert attributes(activation)["zlink.outcome"] == "activated"
    generation = attributes(activation)["zlink.generation"]
    assert handle.kind is SpanKind.SERVER
    assert attributes(handle) == {
        "zlink.node_id": "node-a", "zlink.spot_id": "c-1", "zlink.mesh": "world",
        "zlink.spot_type": "traced-counter", "zlink.generation": generation,
        "zlink.handler": "add", "zlink.outcome": "ok"}


async def test_a_call_on_a_cached_route_is_a_request_and_a_turn_only():
    provider, exporter = new_provider()
    with trio.fail_after(LIMIT):
        async with zl.open_node("node-a", store="memory://", spots=[TracedCounter],
                                tracing=provider) as node:
            await node.client.request("c-1", Add(1), reply=Total).instance_spot()
            exporter.clear()
            await node.client.send("c-1", Add(1))
            await node.client.request("c-1", Add(1), reply=Total)
    spans = exporter.get_finished_spans()
    assert sorted(span.name for span in spans) == [
        "zlink.handle", "zlink.handle", "zlink.request", "zlink.send"]
    send = one(spans, "zlink.send")
    assert send.kind is SpanKind.PRODUCER
    consumed = [span for span in by_name(spans, "zlink.handle")
                if parent_of(span) == send.context.span_id]
    assert [span.kind for span in consumed] == [SpanKind.CONSUMER]


async def test_a_failed_request_is_a_span_with_its_outcome_and_status_error():
    provider, exporter = new_provider()
    with trio.fail_after(LIMIT):
        async with zl.open_node("node-a", store="memory://", spots=[TracedCounter],
                                tracing=provider) as node:
            with pytest.raises(zl.NotFound):
                await node.client.request("missing", Add(1), reply=Total)
    request = one(exporter.get_finished_spans(), "zlink.request")
    assert attributes(request)["zlink.outcome"] == "NotFound"
    assert request.status.status_code is StatusCode.ERROR
    assert [event.name for event in request.events] == ["exception"]


async def test_calls_a_handler_makes_are_children_of_its_turn():
    provider, exporter = new_provider()
    with trio.fail_after(LIMIT):
        async with zl.open_node("node-a", store="memory://", spots=[TracedCounter],
                                tracing=provider) as node:
            await node.client.request("c-1", Relay("c-2", 5), reply=Total).instance_spot()
    spans = exporter.get_finished_spans()
    outer, inner = sorted(by_name(spans, "zlink.request"),
                          key=lambda span: attributes(span)["zlink.message"], reverse=True)
    assert attributes(outer)["zlink.message"] == "Relay"
    (relay_turn,) = [span for span in by_name(spans, "zlink.handle")
                     if attributes(span)["zlink.handler"] == "relay"]
    assert parent_of(relay_turn) == outer.context.span_id
    assert parent_of(inner) == relay_turn.context.span_id
    assert {span.context.trace_id for span in spans} == {outer.context.trace_id}


async def test_a_request_to_another_node_and_its_message_follow_hop_are_one_trace():
    provider, exporter = new_provider()
    store = MemoryStore()
    with trio.fail_after(LIMIT):
        async with zl.open_node("node-a", store=store, spots=[TracedCounter],
                                tracing=provider) as a, \
                zl.open_node("node-b", store=store, spots=[TracedCounter], tracing=provider,
                             placement_weight=0) as b, \
                zl.open_node("node-c", store=store, client_only=True, tracing=provider) as c:
            await c.client.request("c-1", Add(1), reply=Total).instance_spot()
            await c.client.request("c-1", Add(1), reply=Total)  # c caches a's route
            moved = await a.relocate("c-1", to="node-b")
            assert moved.outcome is zl.RelocationOutcome.COMMITTED
            exporter.clear()
            assert await c.client.request("c-1", Add(4), reply=Total) == Total(4)
            spans = exporter.get_finished_spans()
            assert b.node_id == "node-b"
    request = one(spans, "zlink.request")
    assert attributes(request)["zlink.node_id"] == "node-c"
    follow = one(spans, "zlink.follow")
    assert attributes(follow)["zlink.node_id"] == "node-a"
    assert attributes(follow)["zlink.follow.hops"] == 1
    assert parent_of(follow) == request.context.span_id
    handle = one(spans, "zlink.handle")
    assert attributes(handle)["zlink.node_id"] == "node-b"
    assert parent_of(handle) == request.context.span_id
    assert {span.context.trace_id for span in spans} == {request.context.trace_id}


async def test_a_relocation_is_a_span_of_its_steps_with_its_chart_steps_as_events():
    provider, exporter = new_provider()
    store = MemoryStore()
    with trio.fail_after(LIMIT):
        async with zl.open_node("node-a", store=store, spots=[TracedCounter],
                                tracing=provider) as a, \
                zl.open_node("node-b", store=store, spots=[TracedCounter], placement_weight=0):
            await a.client.request("c-1", Add(1), reply=Total).instance_spot()
            exporter.clear()
            moved = await a.relocate("c-1", to="node-b")
            spans = exporter.get_finished_spans()
    relocation = one(spans, "zlink.relocation")
    assert attributes(relocation)["zlink.outcome"] == "committed"
    assert attributes(relocation)["zlink.generation"] == moved.ref.generation
    steps = sorted(spans, key=lambda span: span.start_time or 0)
    assert [span.name for span in steps if parent_of(span) == relocation.context.span_id] == [
        "zlink.seal", "zlink.capture", "zlink.transfer"]
    events = [event.name for event in relocation.events]
    assert events[:2] == ["seal", "capture_done"]
    assert events[-1] == "commit_relocation"


async def test_a_node_without_tracing_makes_no_span_and_reads_no_metadata():
    provider, exporter = new_provider()
    store = MemoryStore()
    with trio.fail_after(LIMIT):
        async with zl.open_node("node-a", store=store, spots=[TracedCounter], tracing=False) as a, \
                zl.open_node("node-b", store=store, client_only=True, tracing=provider) as b:
            await b.client.request("c-1", Add(1), reply=Total).instance_spot()
            await b.client.request("c-1", Add(1), reply=Total)
            await a.client.request("c-1", Add(1), reply=Total)
    names = [span.name for span in exporter.get_finished_spans()]
    # Only node-b's own spans: node-a ignored the trace context its messages carried.
    assert names.count("zlink.request") == 2
    assert set(names) == {"zlink.request", "zlink.resolve"}
    assert tracing_for(False, "n") is NO_TRACING
    assert tracing_for(None, "n") is NO_TRACING  # (no global provider is set here)
    assert isinstance(tracing_for(provider, "n"), OtelTracing)


async def test_tracing_must_be_a_tracer_provider():
    with pytest.raises(zl.InvalidConfiguration, match="TracerProvider"):
        async with zl.open_node("node-a", store="memory://", tracing="yes"):
            pass


def test_call_metadata_round_trips_and_refuses_what_it_cannot_carry():
    fields = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
              "tracestate": "vendor=a=b,other=c"}
    assert decode_call_metadata(encode_call_metadata(fields)) == fields
    assert decode_call_metadata(b"") == {}
    for bad in (b"\xff", b"no-equals", b"UPPER=x", b"a=1\na=2", b"a=1\r"):
        with pytest.raises(ValueError, match="metadata"):
            decode_call_metadata(bad)
    with pytest.raises(ValueError, match="line break"):
        encode_call_metadata({"a": "x\ny"})


def test_unreadable_metadata_from_a_peer_is_no_trace_context():
    provider, _ = new_provider()
    tracing = tracing_for(provider, "n")
    assert tracing.context_of(b"\xff\xfe") is None
    assert tracing.context_of(b"traceparent=garbage") is not None  # (an empty context)
    assert tracing.context_of(encode_call_metadata({"other": "x"})) is None


WORKER = textwrap.dedent('''
    import json, sys
    import trio
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    import zlink_trio as zl
    sys.path.insert(0, sys.argv[2])
    from test_tracing import TracedCounter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # the global provider: open_node finds it

    async def main():
        async with zl.open_node("node-b", store=sys.argv[1], spots=[TracedCounter]) as node:
            print(json.dumps({"ready": node.node_id}), flush=True)
            await trio.wrap_file(sys.stdin).readline()
        print(json.dumps([{
            "name": s.name, "trace": s.context.trace_id, "span": s.context.span_id,
            "parent": s.parent.span_id if s.parent else None, "kind": s.kind.name,
            "attributes": dict(s.attributes)} for s in exporter.get_finished_spans()]),
            flush=True)

    trio.run(main)
''')


async def test_a_request_to_a_spot_on_another_process_is_one_trace(tmp_path: Path):
    """Node B runs in a child process (global tracer provider); node A here is a
    client-only node: the Spot is placed on B, whose spans are children of A's request."""
    provider, exporter = new_provider()
    url = f"sqlite:///{tmp_path / 'mesh.db'}"
    worker = tmp_path / "trace_worker.py"
    worker.write_text(WORKER)
    here = str(Path(__file__).parent)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            proc: trio.Process = await nursery.start(partial(
                trio.run_process, [sys.executable, str(worker), url, here], stdin=PIPE,
                stdout=PIPE, check=False))
            assert proc.stdout is not None
            assert proc.stdin is not None
            lines = _Lines(proc.stdout)
            assert json.loads(await lines.next()) == {"ready": "node-b"}
            async with zl.open_node("node-a", store=url, client_only=True, tracing=provider) as a:
                await a.client.request("c-1", Add(3), reply=Total).instance_spot()
                assert await a.client.request("c-1", Add(4), reply=Total) == Total(7)
            await proc.stdin.send_all(b"done\n")
            remote = json.loads(await lines.next())
    first, second = sorted(by_name(exporter.get_finished_spans(), "zlink.request"),
                           key=lambda span: span.start_time or 0)
    # The first request cold-activated the Spot on B: B's activation and first turn are
    # children of A's request; the second is B's turn alone, a child of the second.
    for request, names in ((first, {"zlink.cold_activation", "zlink.handle"}),
                           (second, {"zlink.handle"})):
        children = [span for span in remote if span["parent"] == request.context.span_id]
        assert {span["name"] for span in children} == names
        assert {span["trace"] for span in children} == {request.context.trace_id}
        (turn,) = [span for span in children if span["name"] == "zlink.handle"]
        assert turn["kind"] == "SERVER"
        assert turn["attributes"]["zlink.node_id"] == "node-b"
        assert turn["attributes"]["zlink.spot_id"] == "c-1"
    assert first.context.trace_id != second.context.trace_id


@attrs.define
class _Lines:
    """The lines of a child's standard output, one per :meth:`next`."""

    stream: trio.abc.ReceiveStream
    buffer: bytes = b""

    async def next(self) -> bytes:
        while b"\n" not in self.buffer:
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                raise AssertionError("the worker exited without answering")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

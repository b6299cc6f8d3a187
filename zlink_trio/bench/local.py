"""Local figures: one node, ``memory://``, each figure beside a raw Trio memory channel.

Theory of operation
-------------------
:func:`measure_local` measures a local Spot request next to a raw Trio
memory-channel round trip to a task, one at a time and with :data:`IN_FLIGHT`
requests in flight, and reports the ratios (spot / raw: the share of the
physical baseline the runtime keeps). Each figure and its baseline are measured in
turn, :data:`ROUNDS` times, and the best round of each counts, so a slow moment of a
shared machine falls on one round, not on one side of a ratio. Get-or-create
convergence (100 concurrent callers, one factory run) and memory per idle Spot
have no raw counterpart and are reported as measured.

The benchmark Spots live here too: :class:`Echo` (an Instance Spot, the
cheapest possible handler; the cold-activation figures of
:mod:`zlink_trio.bench.cold` use it as well) and :class:`Room` (a User Spot
that counts its factory runs). :func:`rate` runs a fixed number of calls with
a number of workers and returns calls per second.

Nothing here is a test: no figure is asserted. The benchmark runs on the
real clock.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from typing import TYPE_CHECKING, Final

import attrs
import trio

import zlink_trio as zl
from zlink_trio.bench.output import merge_figures

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ("IN_FLIGHT", "Echo", "Ping", "Pong", "Room", "measure_local", "rate")

#: Requests in flight for the pipelined figures.
IN_FLIGHT: Final = 100
#: Rounds of each request figure and its baseline, taken in turn (the best of each counts).
ROUNDS: Final = 3


@attrs.frozen
class Ping:
    """The request every benchmark Spot answers."""

    n: int


@attrs.frozen
class Pong:
    """The reply to :class:`Ping`."""

    n: int


@zl.instance_spot("bench-echo", relocation=zl.RecreateOnRelocation())
class Echo:
    """An Instance Spot that echoes: the cheapest possible handler."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx

    @zl.handler
    async def ping(self, msg: Ping) -> Pong:
        return Pong(msg.n)


@zl.user_spot("bench-room", relocation=zl.DisableRelocation())
class Room:
    """A User Spot that counts its factory runs (to check convergence)."""

    factory_runs = 0

    def __init__(self, ctx: zl.SpotContext, request: Ping | None) -> None:
        type(self).factory_runs += 1

    @zl.handler
    async def ping(self, msg: Ping) -> Pong:
        return Pong(msg.n)


async def rate(count: int, one: Callable[[int], Awaitable[object]], in_flight: int) -> float:
    """Run ``one(i)`` ``count`` times with ``in_flight`` workers; return calls per second."""
    per_worker = count // in_flight

    async def worker(base: int) -> None:
        for i in range(per_worker):
            await one(base + i)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for w in range(in_flight):
            nursery.start_soon(worker, w * per_worker)
    return (per_worker * in_flight) / (time.perf_counter() - start)


async def _raw_channel_rate(count: int, in_flight: int) -> float:
    """Round trips to a server task over Trio memory channels, each with its own reply channel."""
    send, receive = trio.open_memory_channel[tuple[int, trio.MemorySendChannel[int]]](in_flight)

    async def server() -> None:
        async with receive:
            async for n, reply in receive:
                await reply.send(n)

    async def one(n: int) -> None:
        reply_send, reply_receive = trio.open_memory_channel[int](1)
        await send.send((n, reply_send))
        await reply_receive.receive()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        result = await rate(count, one, in_flight)
        await send.aclose()
    return result


async def _spot_rate(node: zl.Node, count: int, in_flight: int) -> float:
    await node.client.request("bench-echo-1", Ping(0), reply=Pong).instance_spot("bench-echo")

    async def one(n: int) -> None:
        await node.client.request("bench-echo-1", Ping(n), reply=Pong)

    return await rate(count, one, in_flight)


async def _convergence(node: zl.Node, callers: int) -> dict[str, float]:
    Room.factory_runs = 0
    states: list[zl.CreateState] = []

    async def caller() -> None:
        result = await node.spots.get_or_create("bench-room-1", "bench-room").timeout(30)
        states.append(result.state)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(callers):
            nursery.start_soon(caller)
    elapsed = time.perf_counter() - start
    return {
        "callers": callers,
        "ms": elapsed * 1000,
        "factory_runs": Room.factory_runs,
        "created": sum(s is zl.CreateState.CREATED for s in states),
    }


async def _memory_per_idle_spot(node: zl.Node, count: int) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(count):
        await node.client.send(f"bench-idle-{i}", Ping(i)).instance_spot("bench-echo")
    # Let every activation finish its first turn so only idle Spots remain.
    await node.client.request(f"bench-idle-{count - 1}", Ping(0), reply=Pong)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / count


async def measure_local(*, requests: int, idle: int) -> dict[str, object]:
    """The local figures: ``requests`` calls per mode, ``idle`` Spots for the memory figure.

    Keys: ``raw_channel_round_trips_per_s``, ``local_requests_per_s``,
    ``local_request_ratio``, ``raw_channel_pipelined_per_s``,
    ``local_pipelined_per_s``, ``local_pipelined_ratio``,
    ``get_or_create_convergence`` (``{"callers", "ms", "factory_runs",
    "created"}``), ``memory_per_idle_spot_bytes``, ``local_metrics_requests_per_s``
    and ``local_metrics_ratio`` (the sequential rate of a node with
    ``metrics=``, and its ratio to ``local_requests_per_s``),
    ``local_tracing_requests_per_s`` and ``local_tracing_ratio`` (the same for a node
    that traces every call with an OpenTelemetry SDK tracer provider).
    """
    figures: dict[str, object] = {}
    raw_seq = raw_par = spot_seq = spot_par = 0.0
    async with zl.open_node(
        "bench-node", store="memory://", mesh="bench", spots=[Echo, Room],
        instance_idle_timeout=0, active_object_ceiling=idle + 10,
    ) as node:
        # Each figure and its baseline in turn, ROUNDS times, the best of each kept (as the
        # remote figures are): a slow moment of a shared machine then falls on one round
        # of one of them, not on the whole of one side of the ratio.
        for _ in range(ROUNDS):
            raw_seq = max(raw_seq, await _raw_channel_rate(requests, 1))
            spot_seq = max(spot_seq, await _spot_rate(node, requests, 1))
            raw_par = max(raw_par, await _raw_channel_rate(requests, IN_FLIGHT))
            spot_par = max(spot_par, await _spot_rate(node, requests, IN_FLIGHT))
        # Right beside it (same heap, same moment), so the ratio compares like with like.
        merge_figures(figures, await _with_metrics(requests, spot_seq))
        merge_figures(figures, await _with_tracing(requests, spot_seq))
        figures["raw_channel_round_trips_per_s"] = round(raw_seq)
        figures["local_requests_per_s"] = round(spot_seq)
        figures["local_request_ratio"] = round(spot_seq / raw_seq, 3)
        figures["raw_channel_pipelined_per_s"] = round(raw_par)
        figures["local_pipelined_per_s"] = round(spot_par)
        figures["local_pipelined_ratio"] = round(spot_par / raw_par, 3)
        figures["get_or_create_convergence"] = await _convergence(node, 100)
        figures["memory_per_idle_spot_bytes"] = round(await _memory_per_idle_spot(node, idle))
    return figures


async def _with_metrics(requests: int, without: float) -> dict[str, object]:
    """The sequential local request rate of a node recording metrics, and its ratio to the
    same node without (``local_metrics_*``; ``null`` without prometheus-client)."""
    try:
        from prometheus_client import CollectorRegistry
    except ImportError:
        reason = "prometheus-client is not installed (the metrics extra)"
        return {"local_metrics_requests_per_s": None, "local_metrics_ratio": None,
                "unavailable": {"local_metrics_requests_per_s": reason}}
    async with zl.open_node("bench-metrics", store="memory://", mesh="bench", spots=[Echo],
                            listen=None, instance_idle_timeout=0,
                            metrics=CollectorRegistry()) as node:
        with_metrics = await _spot_rate(node, requests, 1)
    return {"local_metrics_requests_per_s": round(with_metrics),
            "local_metrics_ratio": round(with_metrics / without, 3)}


class _DroppingExporter:
    """A span exporter that keeps nothing: the cost measured is the spans' own."""

    def export(self, spans: object) -> object:
        from opentelemetry.sdk.trace.export import SpanExportResult
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered."""
        return True


async def _with_tracing(requests: int, without: float) -> dict[str, object]:
    """The sequential local request rate of a node tracing every call (an SDK tracer
    provider, each span handed to an exporter that drops it), and its ratio to the same
    node without (``local_tracing_*``; ``null`` without opentelemetry-sdk)."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    except ImportError:
        reason = "opentelemetry-sdk is not installed (the otel extra and an SDK)"
        return {"local_tracing_requests_per_s": None, "local_tracing_ratio": None,
                "unavailable": {"local_tracing_requests_per_s": reason}}
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_DroppingExporter()))  # type: ignore[arg-type]
    async with zl.open_node("bench-tracing", store="memory://", mesh="bench", spots=[Echo],
                            listen=None, instance_idle_timeout=0, tracing=provider) as node:
        traced = await _spot_rate(node, requests, 1)
    provider.shutdown()
    return {"local_tracing_requests_per_s": round(traced),
            "local_tracing_ratio": round(traced / without, 3)}

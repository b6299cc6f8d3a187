"""``python -m zlink_trio.bench`` — speed and memory, each beside its raw-Trio baseline.

Theory of operation
-------------------
Absolute numbers depend on the machine; ratios measured in the same run do
not (much). So every figure that has a physical baseline is printed next to
it: a local Spot request next to a raw Trio memory-channel round trip to a
task, sequential and with 100 requests in flight. Get-or-create convergence
and memory per idle Spot have no raw counterpart and are printed as
measured; they run on ``memory://``. Remote requests between two processes are
measured beside a raw trio-websocket echo between the same two processes
(:mod:`zlink_trio.bench_remote`).

Cold activations are measured on every store backend (``memory://``, a
SQLite file in a temporary directory, and the Redis at ``redis_url`` under a
fresh key prefix that is deleted afterwards): ``cold_activations_per_s`` with
100 first messages in flight (the node's activation throughput), and
``cold_activations_sequential_per_s`` one at a time (latency-bound), together
with the store calls one activation makes and the latency of the store's
Reserve and CommitReady transactions
(:mod:`zlink_trio.bench_stores`). A backend that cannot be opened (no Redis
running) is reported as ``null`` with the reason under ``unavailable``.
``--json`` prints the figures as one JSON object; ``docs/performance.md``
records the latest run.

Nothing here is a test: no figure is asserted. The benchmark runs on the
real clock.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from typing import TYPE_CHECKING

import attrs
import trio

import zlink_trio as zl
from zlink_trio.bench_remote import measure_remote
from zlink_trio.bench_stores import (
    BACKENDS,
    DEFAULT_REDIS_URL,
    bench_store_url,
    count_store_calls,
    txn_figures,
)
from zlink_trio.core.errors import ZLinkError
from zlink_trio.store import open_store

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from contextlib import AbstractAsyncContextManager

__all__ = ("main", "run")

IN_FLIGHT = 100


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


async def _rate(count: int, one: Callable[[int], Awaitable[object]], in_flight: int) -> float:
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
        rate = await _rate(count, one, in_flight)
        await send.aclose()
    return rate


async def _spot_rate(node: zl.Node, count: int, in_flight: int) -> float:
    await node.client.request("bench-echo-1", Ping(0), reply=Pong).instance_spot("bench-echo")

    async def one(n: int) -> None:
        await node.client.request("bench-echo-1", Ping(n), reply=Pong)

    return await _rate(count, one, in_flight)


async def _cold_activations(node: zl.Node, count: int, in_flight: int = 1, *,
                            prefix: str = "bench-cold") -> float:
    """First messages with Instance intent to ``count`` new IDs; activations per second."""

    async def one(i: int) -> None:
        await node.client.request(f"{prefix}-{i}", Ping(i), reply=Pong).instance_spot(
            "bench-echo")

    return await _rate(count, one, in_flight)


async def _backend_figures(url: str, cold: int) -> dict[str, object]:
    """Cold activations at ``url``: sequential (with store calls), then 100 in flight.

    Each mode runs on a fresh node after a full garbage collection, so neither pays for
    the Spots the other left resident (every figure starts from the same state).
    """
    async with open_store(url) as view:
        async with _cold_node(url, cold) as node:
            await _cold_activations(node, 10, prefix="bench-warm")
            gc.collect()
            with count_store_calls(view) as calls:
                sequential = await _cold_activations(node, cold, prefix="bench-seq")
        async with _cold_node(url, cold) as node:
            await _cold_activations(node, 10, prefix="bench-warm-par")
            gc.collect()
            concurrent = await _cold_activations(node, cold, min(IN_FLIGHT, cold),
                                                 prefix="bench-par")
    per_activation = {name: round(n / cold, 2) for name, n in sorted(calls.items())}
    return {"sequential": round(sequential), "in_flight": round(concurrent),
            "store_calls": per_activation}


def _cold_node(url: str, cold: int) -> AbstractAsyncContextManager[zl.Node]:
    # Idle eviction off: every activated Spot stays resident while the figure runs.
    return zl.open_node("bench-node", store=url, mesh="bench", spots=[Echo],
                        instance_idle_timeout=0, active_object_ceiling=cold + 20)


async def _backends(backends: Sequence[str], cold: int, txn: int,
                    redis_url: str) -> dict[str, object]:
    """Cold activations and Reserve/CommitReady latency for each backend."""
    sequential: dict[str, object] = {}
    in_flight: dict[str, object] = {}
    calls: dict[str, object] = {}
    txn_ms: dict[str, object] = {}
    unavailable: dict[str, str] = {}
    for backend in backends:
        try:
            async with bench_store_url(backend, redis_url=redis_url) as url:
                figures = await _backend_figures(url, cold)
            async with bench_store_url(backend, redis_url=redis_url) as url:
                txn_figs = await txn_figures(url, count=txn)
        except (ZLinkError, OSError) as exc:
            unavailable[backend] = f"{type(exc).__name__}: {exc}"
            sequential[backend] = in_flight[backend] = calls[backend] = txn_ms[backend] = None
            continue
        sequential[backend] = figures["sequential"]
        in_flight[backend] = figures["in_flight"]
        calls[backend] = figures["store_calls"]
        txn_ms[backend] = {"reserve": txn_figs["reserve"],
                           "commit_ready": txn_figs["commit_ready"]}
    result: dict[str, object] = {
        # The figure is throughput: the rate a node brings new Spots up when many
        # first messages arrive together (batching across activations is what decides it).
        "cold_activations_per_s": in_flight,
        "cold_activations_sequential_per_s": sequential,
        "store_calls_per_cold_activation": calls,
        "store_txn_ms": txn_ms,
    }
    if unavailable:
        result["unavailable"] = unavailable
    return result


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


async def run(*, requests: int = 20_000, cold: int = 2_000, idle: int = 2_000,
              txn: int = 2_000, backends: Sequence[str] = BACKENDS,
              redis_url: str = DEFAULT_REDIS_URL, remote: bool = True,
              quick: bool = False) -> dict[str, object]:
    """Measure every figure and return them as a JSON-ready dict.

    ``cold`` activations per backend and mode, ``txn`` Reserve/CommitReady pairs per
    backend; ``backends`` is a subset of ``memory``, ``sqlite``, ``redis``. ``remote``
    adds the two-process figures of :mod:`zlink_trio.bench_remote` (``quick``: short).
    """
    figures: dict[str, object] = {}
    raw_seq = await _raw_channel_rate(requests, 1)
    raw_par = await _raw_channel_rate(requests, IN_FLIGHT)
    async with zl.open_node(
        "bench-node", store="memory://", mesh="bench", spots=[Echo, Room],
        instance_idle_timeout=0, active_object_ceiling=idle + 10,
    ) as node:
        spot_seq = await _spot_rate(node, requests, 1)
        spot_par = await _spot_rate(node, requests, IN_FLIGHT)
        figures["raw_channel_round_trips_per_s"] = round(raw_seq)
        figures["local_requests_per_s"] = round(spot_seq)
        figures["local_request_ratio"] = round(spot_seq / raw_seq, 3)
        figures["raw_channel_pipelined_per_s"] = round(raw_par)
        figures["local_pipelined_per_s"] = round(spot_par)
        figures["local_pipelined_ratio"] = round(spot_par / raw_par, 3)
        figures["get_or_create_convergence"] = await _convergence(node, 100)
        figures["memory_per_idle_spot_bytes"] = round(await _memory_per_idle_spot(node, idle))
    figures.update(await _backends(backends, cold, txn, redis_url))
    if remote:
        gc.collect()
        figures.update(await measure_remote(quick=quick))
    return figures


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table (or ``--json``); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.bench", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help="store backends for the cold-activation figures (default: all)")
    parser.add_argument("--redis", default=DEFAULT_REDIS_URL, help="the Redis to measure")
    parser.add_argument("--no-remote", action="store_true",
                        help="skip the two-process remote request figures")
    args = parser.parse_args(argv)
    sizes = {"requests": 1_000, "cold": 100, "idle": 100, "txn": 200} if args.quick else {}
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    figures = trio.run(lambda: run(**sizes, backends=backends, redis_url=args.redis,
                                   remote=not args.no_remote, quick=args.quick))
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for name, value in figures.items():
            print(f"{name:<34} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Cold activations per store backend, with the store calls and transactions behind them.

Theory of operation
-------------------
:func:`measure_backends` measures, on every store backend it is given
(``memory://``, a SQLite file in a temporary directory, and the Redis at
``redis_url`` under a fresh key prefix that is deleted afterwards, and -- when a
``redis+cluster://`` URL is given -- the Redis Cluster backend as ``redis_cluster``; see
:func:`zlink_trio.bench.stores.bench_store_url`):

- ``cold_activations_per_s``: first messages with Instance intent to new IDs
  with 100 in flight -- the rate a node brings new Spots up when many first
  messages arrive together (batching across activations is what decides it);
  the best of :data:`ROUNDS` rounds, each on a fresh node;
- ``cold_activations_sequential_per_s``: the same one at a time
  (latency-bound);
- ``store_calls_per_cold_activation``: the store methods one activation
  calls (:func:`~zlink_trio.bench.stores.count_store_calls`), per backend, counted
  over :data:`COUNTED` sequential activations before the timed ones (counting wraps
  the methods, so the timed runs are not counted);
- ``store_round_trips_per_cold_activation``: on the Redis backends, the round trips
  and commands behind those calls, per activation (``{"round_trips", "commands"}``;
  commands one call has in flight at once, to one Redis in a batch or to several
  masters, are one round trip), ``null`` on the others;
- ``store_txn_ms``: the latency of the store's Reserve and CommitReady
  transactions alone (:func:`~zlink_trio.bench.stores.txn_figures`);
- ``state_save_ms``: the latency of the owner's save of a Spot's durable state (64
  bytes, one at a time; the same function);
- ``raw_spawn_per_s`` (with ``memory``): the raw Trio baseline of an activation, a task
  spawned with its own channel and one round trip to it, as many in flight
  (:func:`~zlink_trio.bench.raw_spawn.raw_spawn_rate`), one round after each round of
  the memory backend's activations, the best counting; ``cold_activation_spawn_ratio`` is
  ``cold_activations_per_s.memory`` divided by it.

Each mode runs on a fresh node after a full garbage collection, so neither
pays for the Spots the other left resident. A backend that cannot be opened
(no Redis running) is reported as ``null`` in every figure, with the reason
under ``unavailable``. Nothing here is a test: no figure is asserted.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

import zlink_trio as zl
from zlink_trio.bench.local import IN_FLIGHT, Echo, Ping, Pong, rate
from zlink_trio.bench.raw_spawn import raw_spawn_rate
from zlink_trio.bench.stores import bench_store_url, count_store_calls, txn_figures
from zlink_trio.store import open_store

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractAsyncContextManager

__all__ = ("measure_backends",)


async def _cold_activations(node: zl.Node, count: int, in_flight: int = 1, *,
                            prefix: str = "bench-cold") -> float:
    """First messages with Instance intent to ``count`` new IDs; activations per second."""

    async def one(i: int) -> None:
        await node.client.request(f"{prefix}-{i}", Ping(i), reply=Pong).instance_spot(
            "bench-echo")

    return await rate(count, one, in_flight)


def _cold_node(url: str, cold: int) -> AbstractAsyncContextManager[zl.Node]:
    # Idle eviction off: every activated Spot stays resident while the figure runs.
    return zl.open_node("bench-node", store=url, mesh="bench", spots=[Echo],
                        instance_idle_timeout=0, active_object_ceiling=cold + 20)


#: Sequential cold activations whose store calls are counted (apart from the timed ones:
#: counting wraps every store method, which costs time of its own).
COUNTED: int = 100


#: Rounds of the 100-in-flight figure (each on a fresh node) and of its baseline, taken in
#: turn; the best of each counts, as in the local and remote figures.
ROUNDS: int = 3


async def _backend_figures(url: str, cold: int, *, with_spawn: bool = False
                           ) -> dict[str, object]:
    """Cold activations at ``url``: store calls, sequential, then 100 in flight.

    ``with_spawn``: the raw spawn baseline too (``raw_spawn``), one round after each
    round of activations.
    """
    counted = min(COUNTED, cold)
    async with open_store(url) as view:
        async with _cold_node(url, cold + counted) as node:
            await _cold_activations(node, 10, prefix="bench-warm")
            with count_store_calls(view) as calls:
                await _cold_activations(node, counted, prefix="bench-count")
                # The last one's first-record cleanup follows its reply: a second request
                # (a route-cache hit, no store call) queues behind it.
                await node.client.request(f"bench-count-{counted - 1}", Ping(0), reply=Pong)
            gc.collect()
            sequential = await _cold_activations(node, cold, prefix="bench-seq")
        concurrent = raw = 0.0
        for r in range(ROUNDS):
            async with _cold_node(url, cold) as node:
                await _cold_activations(node, 10, prefix=f"bench-warm-par-{r}")
                gc.collect()
                concurrent = max(concurrent, await _cold_activations(
                    node, cold, min(IN_FLIGHT, cold), prefix=f"bench-par-{r}"))
            if with_spawn:
                gc.collect()
                raw = max(raw, await raw_spawn_rate(cold, min(IN_FLIGHT, cold)))
    trips = {"round_trips": round(calls.round_trips / counted, 2),
             "commands": round(calls.commands / counted, 2)}
    per_activation = {name: round(n / counted, 2) for name, n in sorted(calls.items())}
    figures: dict[str, object] = {"sequential": round(sequential),
                                  "in_flight": round(concurrent), "store_calls": per_activation,
                                  "round_trips": trips if trips["commands"] else None}
    if with_spawn:
        figures["raw_spawn"] = raw
    return figures


async def measure_backends(backends: Sequence[str], *, cold: int, txn: int,
                           redis_url: str, cluster_url: str = "") -> dict[str, object]:
    """The figures above for each of ``backends`` (``memory``, ``sqlite``, ``redis``).

    ``cold`` activations per backend and mode, ``txn`` Reserve/CommitReady pairs
    per backend. Keys: ``cold_activations_per_s``,
    ``cold_activations_sequential_per_s``, ``store_calls_per_cold_activation``,
    ``store_round_trips_per_cold_activation``, ``store_txn_ms`` and ``state_save_ms``
    (the owner's fenced save of a Spot's durable state, ``{"p50", "p99"}``) (each
    ``{backend: figure or None}``), plus ``unavailable`` (``{backend: reason}``) when a
    backend could not be opened.
    ``cluster_url`` (a ``redis+cluster://`` URL) adds the ``redis_cluster`` backend.
    With ``memory`` measured: ``raw_spawn_per_s`` and ``cold_activation_spawn_ratio``.
    """
    if cluster_url and "redis_cluster" not in backends:
        backends = [*backends, "redis_cluster"]
    sequential: dict[str, object] = {}
    in_flight: dict[str, object] = {}
    calls: dict[str, object] = {}
    trips: dict[str, object] = {}
    txn_ms: dict[str, object] = {}
    saves: dict[str, object] = {}
    unavailable: dict[str, str] = {}
    spawn: dict[str, object] = {}
    for backend in backends:
        try:
            async with bench_store_url(backend, redis_url=redis_url,
                                       cluster_url=cluster_url) as url:
                figures = await _backend_figures(url, cold, with_spawn=backend == "memory")
            async with bench_store_url(backend, redis_url=redis_url,
                                       cluster_url=cluster_url) as url:
                txn_figs = await txn_figures(url, count=txn)
        except (zl.ZLinkError, OSError) as exc:
            unavailable[backend] = f"{type(exc).__name__}: {exc}"
            sequential[backend] = in_flight[backend] = calls[backend] = txn_ms[backend] = None
            trips[backend] = None
            saves[backend] = None
            continue
        sequential[backend] = figures["sequential"]
        in_flight[backend] = figures["in_flight"]
        calls[backend] = figures["store_calls"]
        trips[backend] = figures["round_trips"]
        txn_ms[backend] = {"reserve": txn_figs["reserve"],
                           "commit_ready": txn_figs["commit_ready"]}
        saves[backend] = txn_figs["save_state"]
        if backend == "memory":  # its baseline, measured in turn with it
            raw = figures["raw_spawn"]
            activations = figures["in_flight"]
            assert isinstance(raw, float)
            assert isinstance(activations, int)
            spawn = {"raw_spawn_per_s": round(raw),
                     "cold_activation_spawn_ratio": round(activations / raw, 3)}
    result: dict[str, object] = {
        "cold_activations_per_s": in_flight,
        "cold_activations_sequential_per_s": sequential,
        "store_calls_per_cold_activation": calls,
        "store_round_trips_per_cold_activation": trips,
        "store_txn_ms": txn_ms,
        "state_save_ms": saves,
        **spawn,
    }
    if unavailable:
        result["unavailable"] = unavailable
    return result

"""How cost grows with resident Spots: ``python -m zlink_trio.bench.growth``.

Theory of operation
-------------------
One node on ``memory://`` is filled, in one fresh process, with idle Ready Instance
Spots -- 10,000, then 100,000, then 1,000,000 (``--sizes``) -- each its own Trio
task, as the footprint figure makes them. At each size, with every Spot resident
(idle eviction on, with a timeout far longer than the run, so the sweep runs and
examines but evicts nothing), it measures:

- ``cold_activations_per_s``: first messages with Instance intent to new IDs,
  :data:`PROBE` of them, 100 in flight (they stay resident: the next size counts
  them);
- ``warm_request_ms``: ``p50`` / ``p99`` of :data:`PROBE` sequential requests to
  resident Spots picked at random (so neither the route lookup nor the Spot's task
  is cache-warm);
- ``idle_sweep_us_per_tick``: the median wall time of one idle-sweep examination
  (the next 64 candidates, and whether each is idle: ``Catalog.idle_candidates``,
  what a sweep tick does apart from the store calls of an eviction), over
  :data:`SWEEP_TICKS` ticks;
- ``rss_bytes_per_spot``: resident memory over the Spots filled so far;
- ``tracked_objects_per_spot``: the objects the garbage collector tracks (frozen or
  not) over the Spots filled so far;
- ``full_gc_ms``: one full garbage collection (``gc.collect()``) as the node leaves
  the process: the node froze its long-lived objects out of the collector's view after
  each burst of activations (``gc_freeze_after``, ``runtime/collector.py``), so this
  pause is what a collection costs the node at that size;
- ``longest_gc_pause_ms``: the longest collection of any generation the process ran
  (``gc.callbacks``) since the previous size, the node's freezes included.

The node runs with the default lease and options (idle timeout aside), and the run
fails if the node loses its lease at any point (a full collection that outlasted it
would). Last, ``growth_exit_s``: the time the node takes to leave its ``open_node`` block
with every Spot resident (no other node: it closes them all, within
``default_timeout``).

With ``--exit-peer`` the node listens on loopback and, once every size is measured, a
second node of the Mesh opens in the same process on the same store, serving the same
type: the exit is then the stop of docs/operations.md with another node up, the drain
(``on_stop="drain"``: at most ``stop_drain_timeout``, 15 s, of moves; the benchmark's
Spots are re-created on the other node) and then the close of what did not move. It
reports ``growth_exit_drain_s`` (instead of ``growth_exit_s``) and
``growth_exit_moved``, the Spots the other node hosts once the exit is over.

A flat curve means each figure stays the same as the node grows. Prints one figure
set per size (``--json``: ``{"growth": {"10000": {...}, ...}}`` on the last line).
Nothing here is a test: no figure is asserted.
"""

from __future__ import annotations

import argparse
import functools
import gc
import random
import statistics
import sys
import time
from typing import Final

import trio

import zlink_trio as zl
from zlink_trio.bench.child import child_figures
from zlink_trio.bench.footprint import RSS_MISSING, STATM, activate_idle, rss_bytes
from zlink_trio.bench.local import IN_FLIGHT, Echo, Ping, Pong, rate
from zlink_trio.bench.output import print_figures

__all__ = ("PROBE", "SIZES", "SWEEP_TICKS", "main", "measure_growth",
           "measure_growth_process")

#: The node sizes measured by default.
SIZES: Final = (10_000, 100_000, 1_000_000)
#: Cold activations and warm requests measured at each size.
PROBE: Final = 5_000
#: Idle-sweep examinations timed at each size.
SWEEP_TICKS: Final = 2_000
#: Idle timeout of the measured node: longer than any run, so the sweep evicts nothing.
IDLE_TIMEOUT: Final = 24 * 3600.0
#: Spots filled between two looks at the node's lease.
CHUNK: Final = 50_000
#: The store of the measured node (and of the other node of ``--exit-peer``).
STORE: Final = "memory://bench-growth"
#: Where the nodes listen with ``--exit-peer`` (else the measured node has no links).
LOOPBACK: Final = "127.0.0.1:0"
#: The lease of the other node of ``--exit-peer`` (see ``_peer``).
PEER_LEASE: Final = 300.0
#: Deadline of the whole child process (a million Spots take several minutes).
CHILD_TIMEOUT: Final = 1_800.0


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered) * 1e3, 4), "p99": round(p99 * 1e3, 4)}


class _Pauses:
    """The longest garbage collection since it was last read (a ``gc.callbacks`` entry)."""

    def __init__(self) -> None:
        self.started = 0.0
        self.longest = 0.0

    def __call__(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        else:
            self.longest = max(self.longest, time.perf_counter() - self.started)

    def take(self) -> float:
        longest, self.longest = self.longest, 0.0
        return longest


def _tracked() -> int:
    """Objects the garbage collector tracks, frozen ones included."""
    return len(gc.get_objects()) + gc.get_freeze_count()


def _check_lease(node: zl.Node, lifecycle: zl.NodeRid, filled: int) -> None:
    """Fail the run if the node lost its lease (a new lifecycle joined since)."""
    stats = node.statistics()
    if stats.node_rid != lifecycle or stats.rejoining:
        raise zl.Unavailable(
            f"the growth node lost its lease at {filled} resident Spots (lifecycle "
            f"{lifecycle} became {stats.node_rid}): a pause outlasted the lease")


async def _size_figures(node: zl.Node, filled: int, base: tuple[int, int],
                        pauses: _Pauses, rng: random.Random) -> dict[str, object]:
    async def cold(i: int) -> None:
        await node.client.request(f"growth-cold-{filled}-{i}", Ping(i),
                                  reply=Pong).instance_spot("bench-echo").timeout(60)

    cold_rate = await rate(PROBE, cold, IN_FLIGHT)
    warm: list[float] = []
    for _ in range(PROBE):
        spot = f"growth-{rng.randrange(filled)}"
        start = time.perf_counter()
        await node.client.request(spot, Ping(0), reply=Pong).timeout(60)
        warm.append(time.perf_counter() - start)
    inspection = node.inspection  # the sweep's own examination, timed alone
    ticks: list[float] = []
    for _ in range(SWEEP_TICKS):
        start = time.perf_counter()
        inspection.idle_candidates()
        ticks.append(time.perf_counter() - start)
    longest = pauses.take()
    start = time.perf_counter()
    gc.collect()
    full_gc = time.perf_counter() - start
    pauses.take()  # (that one is measured above)
    resident = node.statistics().active_spots
    base_rss, base_tracked = base
    return {"cold_activations_per_s": round(cold_rate), "warm_request_ms": _ms(warm),
            "idle_sweep_us_per_tick": round(statistics.median(ticks) * 1e6, 2),
            "full_gc_ms": round(full_gc * 1e3, 1),
            "longest_gc_pause_ms": round(longest * 1e3, 1),
            "tracked_objects_per_spot": round((_tracked() - base_tracked) / resident, 2),
            "rss_bytes_per_spot": (round((rss_bytes() - base_rss) / resident)
                                   if STATM.exists() else None),
            "resident_spots": resident}


async def _peer(ceiling: int, *,
                task_status: trio.TaskStatus[zl.Node] = trio.TASK_STATUS_IGNORED) -> None:
    """The other node of ``--exit-peer``: serves the type until cancelled, then closes.

    Its lease is :data:`PEER_LEASE`: it shares the process, so while the measured node
    closes hundreds of thousands of Spots their tasks fill every pass of the run loop
    and this node's renewals wait behind them -- which a node in a process of its own,
    as in a deployment, never does."""
    async with zl.open_node(
        "bench-growth-peer", store=STORE, mesh="bench-growth", spots=[Echo],
        listen=LOOPBACK, instance_idle_timeout=IDLE_TIMEOUT, active_object_ceiling=ceiling,
        on_stop="close", lease=PEER_LEASE,
    ) as peer:
        task_status.started(peer)
        await trio.sleep_forever()


async def measure_growth(sizes: tuple[int, ...] = SIZES, *, seed: int = 1,
                         exit_peer: bool = False) -> dict[str, object]:
    """The figures above at each of ``sizes`` (ascending), on one node filled in turn;
    ``exit_peer``: the exit with another node up (``growth_exit_drain_s``)."""
    rng = random.Random(seed)
    ordered = sorted(set(sizes))
    ceiling = ordered[-1] + len(ordered) * PROBE + 1_000
    pauses = _Pauses()
    gc.callbacks.append(pauses)
    try:
        async with trio.open_nursery() as peers:
            async with zl.open_node(
                "bench-growth", store=STORE, mesh="bench-growth", spots=[Echo],
                listen=LOOPBACK if exit_peer else None, instance_idle_timeout=IDLE_TIMEOUT,
                active_object_ceiling=ceiling,
            ) as node:
                lifecycle = node.statistics().node_rid
                await activate_idle(node, "growth-warm", 200)
                gc.collect()
                base = (rss_bytes() if STATM.exists() else 0, _tracked())
                figures: dict[str, object] = {}
                filled = 0
                for size in ordered:
                    for chunk_start in range(filled, size, CHUNK):
                        await _fill(node, chunk_start, min(size, chunk_start + CHUNK))
                        _check_lease(node, lifecycle, chunk_start)
                    filled = size
                    figures[str(size)] = await _size_figures(node, filled, base, pauses, rng)
                    _check_lease(node, lifecycle, filled)
                peer: zl.Node | None = await peers.start(_peer, ceiling) if exit_peer else None
                leaving = time.perf_counter()
            exit_s = time.perf_counter() - leaving
            moved = 0 if peer is None else peer.statistics().active_spots
            peers.cancel_scope.cancel()
    finally:
        gc.callbacks.remove(pauses)
    result: dict[str, object] = {"growth": figures}
    if exit_peer:
        result["growth_exit_drain_s"] = round(exit_s, 2)
        result["growth_exit_moved"] = moved
    else:
        result["growth_exit_s"] = round(exit_s, 2)
    if not STATM.exists():
        result["unavailable"] = {"rss_bytes_per_spot": RSS_MISSING}
    return result


async def _fill(node: zl.Node, first: int, end: int) -> None:
    """Activate ``growth-<first>`` .. ``growth-<end - 1>``, 100 in flight."""
    async def worker(offset: int) -> None:
        for i in range(first + offset, end, IN_FLIGHT):
            await node.client.request(f"growth-{i}", Ping(i), reply=Pong).instance_spot(
                "bench-echo").timeout(60)

    async with trio.open_nursery() as nursery:
        for w in range(min(IN_FLIGHT, end - first)):
            nursery.start_soon(worker, w)


async def measure_growth_process(sizes: tuple[int, ...] = SIZES) -> dict[str, object]:
    """:func:`measure_growth` in a fresh process, so its million Spots, their heap and
    the frozen generation stay out of the caller (``python -m zlink_trio.bench``).

    Raises :class:`~zlink_trio.Unavailable` if the child process fails.
    """
    with trio.fail_after(CHILD_TIMEOUT):
        return await child_figures("zlink_trio.bench.growth", "--json", "--sizes",
                                   ",".join(str(n) for n in sizes))


def main(argv: list[str] | None = None) -> int:
    """``python -m zlink_trio.bench.growth [--sizes N,N,...] [--json]``."""
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.bench.growth",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(str(n) for n in SIZES),
                        help="resident Spot counts, comma-separated (10000,100000,1000000)")
    parser.add_argument("--json", action="store_true", help="one JSON line")
    parser.add_argument("--exit-peer", action="store_true",
                        help="exit with another node up: the drain (growth_exit_drain_s)")
    args = parser.parse_args(argv)
    try:
        sizes = tuple(int(n) for n in args.sizes.split(",") if n.strip())
    except ValueError:
        parser.error(f"--sizes takes comma-separated counts, got {args.sizes!r}")
    if not sizes or min(sizes) < 1:
        parser.error("--sizes takes positive counts")
    figures = trio.run(functools.partial(measure_growth, sizes, exit_peer=args.exit_peer))
    print_figures(figures, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m zlink_trio.bench`` — speed and memory, each beside its raw-Trio baseline.

Theory of operation
-------------------
Absolute numbers depend on the machine; ratios measured in the same run do
not (much). So every figure that has a physical baseline is printed next to
it, all in one run (:func:`run`):

- local requests beside a raw Trio memory-channel round trip, get-or-create
  convergence and memory per idle Spot (:mod:`zlink_trio.bench.local`);
- resident memory per idle Spot, the RSS growth over 100,000 idle Spots in a
  fresh process divided by their number (:mod:`zlink_trio.bench.footprint`);
- cold activations on every store backend, with the store calls one
  activation makes and the latency of Reserve and CommitReady
  (:mod:`zlink_trio.bench.cold`);
- durable reminders on every store backend: delivered per second, and how late with
  10,000 registered (:mod:`zlink_trio.bench.reminders`; ``--no-reminders``);
- remote requests between two processes beside a raw trio-websocket echo and a
  raw Trio TCP echo between the same two processes (:mod:`zlink_trio.bench.remote`);
- planned relocations on every store backend, idle and under load, with the
  messages a move lost or duplicated, and the Message Follow relay rate beside
  direct remote requests (:mod:`zlink_trio.bench.relocation`);
- cold activations with 1, 2 and 4 node processes sharing one SQLite file or
  Redis (:mod:`zlink_trio.bench.scale`);
- how cost grows: one node at 10,000, 100,000 and 1,000,000 resident Spots, in a
  fresh process (:mod:`zlink_trio.bench.growth`, several minutes; ``--no-growth``).

A figure that cannot be measured here -- a backend that cannot be opened (no
Redis running), the raw websocket echo without trio-websocket (the ``bench``
extra) -- is reported as ``null``, with the reason under ``unavailable``.
The keys are a contract: ``docs/performance.md`` names each one and records
the latest run. ``--json`` prints the figures as one JSON object on the last
line of stdout.

Nothing here is a test: no figure is asserted. The benchmark runs on the
real clock.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import TYPE_CHECKING

import trio

from zlink_trio.bench.cold import measure_backends
from zlink_trio.bench.footprint import measure_footprint
from zlink_trio.bench.growth import SIZES, measure_growth_process
from zlink_trio.bench.local import measure_local
from zlink_trio.bench.output import merge_figures, print_figures
from zlink_trio.bench.relocation import measure_relocation
from zlink_trio.bench.reminders import measure_reminders
from zlink_trio.bench.remote import measure_remote
from zlink_trio.bench.scale import PER_PROCESS, PROCESSES, SHARED, measure_scale
from zlink_trio.bench.stores import BACKENDS, DEFAULT_REDIS_URL

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ("main", "run")


async def run(*, requests: int = 20_000, cold: int = 2_000, idle: int = 2_000,
              txn: int = 2_000, idle_rss: int = 100_000, backends: Sequence[str] = BACKENDS,
              redis_url: str = DEFAULT_REDIS_URL, remote: bool = True,
              moves: int = 50, relocation: bool = True,
              quick: bool = False, cluster_url: str = "", scale: bool = True,
              growth: bool = True, reminders: int = 10_000) -> dict[str, object]:
    """Measure every figure and return them as a JSON-ready dict.

    ``requests`` calls per local mode, ``idle`` Spots for the traced memory figure and
    ``idle_rss`` for the resident one (a fresh process; 100,000 take about a minute),
    ``cold`` activations per backend and mode, ``txn`` Reserve/CommitReady pairs per
    backend; ``backends`` is a subset of ``memory``, ``sqlite``, ``redis``. ``remote``
    adds the two-process figures of :mod:`zlink_trio.bench.remote` (``quick``: short);
    ``relocation`` the figures of :mod:`zlink_trio.bench.relocation` on ``backends``,
    ``moves`` timed moves per backend and mode. ``cluster_url`` (``redis+cluster://``)
    adds a ``redis_cluster`` entry to the cold-activation figures. ``scale`` adds the
    cold activations of 1, 2 and 4 node processes on one store
    (:mod:`zlink_trio.bench.scale`, on the shared ones of ``backends``), ``growth`` the
    figures of one node at 10k / 100k / 1M resident Spots in a fresh process
    (:mod:`zlink_trio.bench.growth`; ``quick``: 2k and 10k). ``reminders`` durable
    reminders registered per backend for the reminder figures
    (:mod:`zlink_trio.bench.reminders`; 0 skips them).
    """
    figures = await measure_local(requests=requests, idle=idle)
    gc.collect()
    merge_figures(figures, await measure_footprint(idle_rss))
    merge_figures(figures, await measure_backends(backends, cold=cold, txn=txn,
                                                  redis_url=redis_url, cluster_url=cluster_url))
    if reminders:
        gc.collect()
        merge_figures(figures, await measure_reminders(
            backends, count=reminders, redis_url=redis_url, cluster_url=cluster_url))
    if remote:
        gc.collect()
        merge_figures(figures, await measure_remote(quick=quick))
    if relocation:
        gc.collect()
        merge_figures(figures, await measure_relocation(backends, moves=moves,
                                                        redis_url=redis_url, quick=quick))
    shared = [b for b in backends if b in SHARED]
    if scale and shared:
        gc.collect()
        merge_figures(figures, await measure_scale(
            shared, processes=(1, 2) if quick else PROCESSES,
            per_process=200 if quick else PER_PROCESS, redis_url=redis_url))
    if growth:
        merge_figures(figures,
                      await measure_growth_process((2_000, 10_000) if quick else SIZES))
    return figures


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table (or ``--json``); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object, on the last line of stdout")
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help="store backends for the cold-activation and relocation figures "
                             "(default: all)")
    parser.add_argument("--redis", default=DEFAULT_REDIS_URL, help="the Redis to measure")
    parser.add_argument("--redis-cluster", default=os.environ.get("ZLINK_BENCH_REDIS_CLUSTER", ""),
                        help="a redis+cluster:// URL: adds the redis_cluster backend to the "
                             "cold-activation figures (default: env ZLINK_BENCH_REDIS_CLUSTER)")
    parser.add_argument("--no-remote", action="store_true",
                        help="skip the two-process remote request figures")
    parser.add_argument("--no-scale", action="store_true",
                        help="skip the 1/2/4 node-process figures")
    parser.add_argument("--no-growth", action="store_true",
                        help="skip the 10k/100k/1M resident-Spot figures (several minutes)")
    parser.add_argument("--no-relocation", action="store_true",
                        help="skip the relocation and Message Follow figures")
    parser.add_argument("--no-reminders", action="store_true",
                        help="skip the durable reminder figures (10,000 reminders per "
                             "backend)")
    args = parser.parse_args(argv)
    sizes: dict[str, int] = ({"requests": 1_000, "cold": 100, "idle": 100, "txn": 200,
                              "moves": 6, "idle_rss": 2_000, "reminders": 500}
                             if args.quick else {})
    if args.no_reminders:
        sizes["reminders"] = 0
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    figures = trio.run(lambda: run(**sizes, backends=backends, redis_url=args.redis,
                                   remote=not args.no_remote,
                                   relocation=not args.no_relocation, quick=args.quick,
                                   cluster_url=args.redis_cluster, scale=not args.no_scale,
                                   growth=not args.no_growth))
    print_figures(figures, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

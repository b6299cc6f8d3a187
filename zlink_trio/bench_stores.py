"""``python -m zlink_trio.bench_stores`` — store transaction figures per backend.

Theory of operation
-------------------
:func:`sqlite_figures` measures the SQLite backend's two dispatch modes on a
fresh file in a temporary directory: ``thread`` (every transaction whole in a
worker thread) and ``inline`` (on the Trio thread with busy timeout 0,
falling back to the thread on SQLITE_BUSY). For each mode it times Reserve
and CommitReady one at a time (p50/p99 latency, milliseconds) and the store
part of a cold activation (Reserve + CommitReady) with ``in_flight``
concurrent tasks (activations per second). Nothing else touches the file, so
the inline mode never falls back: these are the uncontended figures.

Nothing here is a test: no figure is asserted. ``--json`` prints one JSON
object; the figures are recorded in ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from zlink_trio.core.descriptor import NodeDescriptor
from zlink_trio.core.identity import NodeRid, SpotKind, new_entry_spot_id
from zlink_trio.core.placement import Role
from zlink_trio.store import open_store

if TYPE_CHECKING:
    from zlink_trio.core.records import OwnerFence
    from zlink_trio.store import Store

__all__ = ("main", "sqlite_figures")

_MESH = "bench"


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered) * 1e3, 4), "p99": round(p99 * 1e3, 4)}


async def _owner(store: Store, count: int) -> OwnerFence:
    descriptor = NodeDescriptor(
        mesh=_MESH, node_rid=NodeRid.generate(), node_id="bench-node", endpoint="ws://h:1/",
        roles=[Role.OBJECT_SERVER], served_types={"b": SpotKind.INSTANCE}, capacity=count,
        entry_spot_id=new_entry_spot_id("bench"),
    )
    claim = await store.location.new_claim(descriptor, now=0.0, lease=1e9)
    return claim.owner()


async def _mode(url: str, count: int, in_flight: int) -> dict[str, object]:
    async with open_store(url) as store:
        owner = await _owner(store, 2 * count + 1)
        reserve: list[float] = []
        commit: list[float] = []
        for i in range(count):
            t0 = time.perf_counter()
            fence = await store.location.reserve(f"s-{i}", kind=SpotKind.INSTANCE,
                                                 stable_type="b", mesh=_MESH, owner=owner,
                                                 now=1.0)
            t1 = time.perf_counter()
            await store.location.commit_ready(fence, now=1.0)
            reserve.append(t1 - t0)
            commit.append(time.perf_counter() - t1)

        async def activate(i: int) -> None:
            fence = await store.location.reserve(f"c-{i}", kind=SpotKind.INSTANCE,
                                                 stable_type="b", mesh=_MESH, owner=owner,
                                                 now=1.0)
            await store.location.commit_ready(fence, now=1.0)

        pending = iter(range(count))

        async def worker() -> None:
            for i in pending:
                await activate(i)

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(in_flight):
                nursery.start_soon(worker)
        elapsed = time.perf_counter() - start
    return {"reserve_ms": _ms(reserve), "commit_ready_ms": _ms(commit),
            "activations_per_s": round(count / elapsed, 1)}


async def sqlite_figures(*, count: int = 2_000, in_flight: int = 100,
                         synchronous: str = "normal",
                         directory: str | None = None) -> dict[str, dict[str, object]]:
    """Thread vs inline dispatch on one fresh SQLite file each: latencies and throughput.

    Returns ``{"thread": {...}, "inline": {...}}``; each holds ``reserve_ms`` and
    ``commit_ready_ms`` (``{"p50", "p99"}``, sequential) and
    ``activations_per_s`` (Reserve + CommitReady, ``in_flight`` concurrent).
    """
    figures: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        for mode in ("thread", "inline"):
            path = Path(tmp) / f"{mode}.db"
            url = f"sqlite://{path}?dispatch={mode}&synchronous={synchronous}"
            figures[mode] = await _mode(url, count, in_flight)
    return figures


def main(argv: list[str] | None = None) -> int:
    """Print :func:`sqlite_figures` (``--json`` for one JSON object)."""
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.bench_stores")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--count", type=int, default=2_000)
    parser.add_argument("--synchronous", choices=("normal", "full"), default="normal")
    args = parser.parse_args(argv)
    figures = trio.run(lambda: sqlite_figures(count=args.count, synchronous=args.synchronous))
    if args.json:
        json.dump({"sqlite": figures}, sys.stdout)
        sys.stdout.write("\n")
    else:
        for mode, values in figures.items():
            print(f"sqlite {mode:6} " + "  ".join(f"{k}={v}" for k, v in values.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

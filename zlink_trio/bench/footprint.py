"""The footprint figure: resident memory per idle Ready Instance Spot, RSS delta / N.

Theory of operation
-------------------
``memory_per_idle_spot_bytes`` (:mod:`zlink_trio.bench.local`) counts the
Python objects tracemalloc traces. What a deployment pays is resident memory,
which also holds the allocator's slack, the interpreter's own structures and
everything tracemalloc does not see; other actor runtimes report it as the
growth of the process's resident set size over N idle actors, divided by N.
:func:`measure_footprint` reports that figure, ``idle_spot_rss_bytes``.

It runs in a fresh process (``python -m zlink_trio.bench.footprint --count
N``), so neither the heap the other figures leave behind (freed memory the
allocator reuses would hide growth) nor tracemalloc's own bookkeeping is in
it. That process opens one node on ``memory://``, activates a few Spots to
warm every lazily built structure, collects garbage and reads its RSS; then it
activates N more :class:`~zlink_trio.bench.local.Echo` Instance Spots (a first
message with Instance intent each, :data:`WORKERS` at a time), waits until the
last one has answered, so every Spot is Ready and idle, each still its own
Trio task, collects garbage and reads its RSS again. It prints one JSON line,
``{"idle_spot_rss_bytes": ..., "count": N, "tasks_added": ...}``
(``tasks_added``: Trio tasks the N Spots added, a check that each has one).

RSS is read from ``/proc/self/statm`` (Linux). Elsewhere the figure is
``null``, with the reason under ``unavailable``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from pathlib import Path
from typing import Final

import trio

import zlink_trio as zl
from zlink_trio.bench.child import child_figures
from zlink_trio.bench.local import Echo, Ping, Pong

__all__ = ("RSS_MISSING", "STATM", "WORKERS", "activate_idle", "main", "measure_footprint",
           "rss_bytes")

#: Activations in flight while the Spots are created.
WORKERS: Final = 100
#: Spots activated before the first reading, so lazily built structures are not counted.
WARM: Final = 200
#: Deadline of the whole child process (100,000 Spots take ~1 minute on a loaded machine).
CHILD_TIMEOUT: Final = 600.0
#: Where Linux reports a process's memory.
STATM: Final = Path("/proc/self/statm")

#: Why the figure cannot be measured on this system.
RSS_MISSING: Final = ("/proc/self/statm is not readable here (not Linux), so the resident "
                      "set size per idle Spot cannot be measured; run the benchmark on Linux")


def rss_bytes() -> int:
    """This process's resident set size in bytes (Linux: ``/proc/self/statm``)."""
    return int(STATM.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _task_count() -> int:
    count = 0
    root = trio.lowlevel.current_root_task()
    stack = [root] if root is not None else []
    while stack:
        task = stack.pop()
        count += 1
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return count


async def activate_idle(node: zl.Node, prefix: str, count: int) -> None:
    """Activate ``<prefix>-0`` .. ``<prefix>-<count - 1>``, :data:`WORKERS` at a time."""
    async def worker(first: int) -> None:
        for i in range(first, count, WORKERS):
            await node.client.request(f"{prefix}-{i}", Ping(i), reply=Pong).instance_spot(
                "bench-echo").timeout(60)

    async with trio.open_nursery() as nursery:
        for w in range(min(WORKERS, count)):
            nursery.start_soon(worker, w)


async def _measure_here(count: int) -> dict[str, int]:
    async with zl.open_node(
        "bench-footprint", store="memory://", mesh="bench-footprint", spots=[Echo],
        listen=None, instance_idle_timeout=0, active_object_ceiling=WARM + count + 10,
    ) as node:
        await activate_idle(node, "bench-warm", WARM)
        gc.collect()
        tasks_before, before = _task_count(), rss_bytes()
        await activate_idle(node, "bench-idle", count)
        gc.collect()
        tasks_after, after = _task_count(), rss_bytes()
    return {"idle_spot_rss_bytes": round((after - before) / count), "count": count,
            "tasks_added": tasks_after - tasks_before}


async def measure_footprint(count: int) -> dict[str, object]:
    """``idle_spot_rss_bytes`` over ``count`` idle Spots, measured in a fresh process.

    ``null``, with ``unavailable`` saying why, where RSS cannot be read. Raises
    :class:`~zlink_trio.Unavailable` if the child process fails.
    """
    if not STATM.exists():
        return {"idle_spot_rss_bytes": None, "unavailable": {"idle_spot_rss_bytes": RSS_MISSING}}
    with trio.fail_after(CHILD_TIMEOUT):
        found = await child_figures("zlink_trio.bench.footprint", "--count", str(count))
    return {"idle_spot_rss_bytes": found["idle_spot_rss_bytes"]}


def main(argv: list[str] | None = None) -> int:
    """``python -m zlink_trio.bench.footprint --count N``: print the JSON line."""
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.bench.footprint",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100_000, help="idle Spots (100,000)")
    args = parser.parse_args(argv)
    figures = trio.run(_measure_here, max(1, args.count))
    print(json.dumps(figures, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

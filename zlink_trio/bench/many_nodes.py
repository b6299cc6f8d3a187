"""Many nodes at rest: ``python -m zlink_trio.bench.many_nodes``.

Theory of operation
-------------------
What a node costs the store and itself while it does nothing, as the Mesh grows. For
each count of :data:`NODES` (2, 20 and 200 by default), one fresh process runs that many
nodes on one in-process ``memory://`` store (without links: a node at rest opens none),
with the store clock on Trio's, on ``trio.testing.MockClock(autojump_threshold=0)``:
time jumps whenever every node waits,
so :data:`WINDOW` seconds of rest take only the CPU the nodes spend. After the nodes
started and settled, it counts, over the window:

- ``store_ops_per_node_per_s``: every store call of every node (lease renewals,
  descriptor reads, the reminder scans), per node and per second of the window, and
  ``store_ops_by_method`` the same by store method;
- ``cpu_ms_per_node_per_s``: the process's CPU time per node and per second of the window
  (one process runs them all, so this is what one node at rest costs its own process);
- ``start_s``: the wall time to start every node.

A flat row means each node costs the same whatever the Mesh's size. Nothing here is a
test: no figure is asserted. (The rest of issue #32's item 6 -- placement, warm calls and
membership changes with 200 candidates -- is not measured yet.)
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import AsyncExitStack
from typing import Final

import trio
import trio.testing

import zlink_trio as zl
from zlink_trio.bench.child import child_figures
from zlink_trio.bench.local import Echo
from zlink_trio.bench.output import print_figures
from zlink_trio.bench.stores import count_store_calls
from zlink_trio.store import open_store

__all__ = ("NODES", "WINDOW", "main", "measure_at_rest", "measure_at_rest_process")

#: The Mesh sizes measured by default.
NODES: Final = (2, 20, 200)
#: Seconds of rest counted (mock time).
WINDOW: Final = 10.0
#: Seconds of rest before counting: every node past its startup reads.
SETTLE: Final = 5.0
#: Deadline of the whole child process.
CHILD_TIMEOUT: Final = 1_200.0


async def measure_at_rest(nodes: int, window: float = WINDOW) -> dict[str, object]:
    """The figures above for ``nodes`` nodes; call it in a run on ``MockClock``."""
    url = f"memory://bench-many-{nodes}"
    injected = zl.InjectedOptions(clock=trio.current_time)
    started = time.perf_counter()
    async with AsyncExitStack() as stack:
        view = await stack.enter_async_context(open_store(url))
        for i in range(nodes):
            await stack.enter_async_context(zl.open_node(
                f"bench-many-{i}", store=url, mesh="bench-many", spots=[Echo], listen=None,
                injected=injected))
        start_s = time.perf_counter() - started
        await trio.sleep(SETTLE)
        with count_store_calls(view, background=True) as calls:
            cpu = time.process_time()
            await trio.sleep(window)
            cpu = time.process_time() - cpu
    per = nodes * window
    return {"store_ops_per_node_per_s": round(sum(calls.values()) / per, 3),
            "store_ops_by_method": {name: round(n / per, 3)
                                    for name, n in sorted(calls.items())},
            "cpu_ms_per_node_per_s": round(cpu * 1e3 / per, 3),
            "start_s": round(start_s, 2)}


def _run(nodes: tuple[int, ...], window: float) -> dict[str, object]:
    figures: dict[str, object] = {}
    for count in nodes:
        figures[str(count)] = trio.run(measure_at_rest, count, window,
                                       clock=trio.testing.MockClock(autojump_threshold=0))
    return {"many_nodes_at_rest": figures}


async def measure_at_rest_process(nodes: tuple[int, ...] = NODES,
                                  window: float = WINDOW) -> dict[str, object]:
    """:func:`measure_at_rest` for each count, in a fresh process (its nodes and their
    mock clock stay out of the caller). Raises :class:`~zlink_trio.Unavailable` if the
    child process fails."""
    with trio.fail_after(CHILD_TIMEOUT):
        return await child_figures("zlink_trio.bench.many_nodes", "--json", "--nodes",
                                   ",".join(str(n) for n in nodes), "--window", str(window))


def main(argv: list[str] | None = None) -> int:
    """``python -m zlink_trio.bench.many_nodes [--nodes N,N,...] [--window S] [--json]``."""
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.bench.many_nodes",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default=",".join(str(n) for n in NODES),
                        help="Mesh sizes, comma-separated (2,20,200)")
    parser.add_argument("--window", type=float, default=WINDOW,
                        help="seconds of rest counted, in mock time (10)")
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args(argv)
    try:
        nodes = tuple(int(n) for n in args.nodes.split(",") if n.strip())
    except ValueError:
        parser.error(f"--nodes takes comma-separated counts, got {args.nodes!r}")
    if not nodes or min(nodes) < 1:
        parser.error("--nodes takes positive counts")
    if not args.window > 0:
        parser.error("--window takes a positive number of seconds")
    print_figures(_run(nodes, args.window), as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

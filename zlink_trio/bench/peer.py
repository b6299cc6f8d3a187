"""The other process of :mod:`zlink_trio.bench.remote`: a raw echo server and a zlink node.

Run by the benchmark as ``python -m zlink_trio.bench.peer --store URL``; not meant to
be run by hand. It serves, on 127.0.0.1 (any free ports):

* a raw trio-websocket echo server (:func:`zlink_trio.bench.raw_ws.serve_echo`): every
  message is sent back unchanged, one at a time per connection (the physical baseline;
  not with ``--no-raw``, which the benchmark passes when trio-websocket is missing),
* a raw Trio TCP echo server (:func:`zlink_trio.bench.raw_tcp.serve_echo`): every
  length-prefixed frame sent back unchanged (the floor: no websocket; always served), and
* a zlink node ``bench-peer`` in mesh ``bench-remote`` on the store ``URL``, owning the
  :class:`~zlink_trio.bench.remote.RemoteEcho` Spots (placement weight 1; the measuring
  node has weight 0, so every cold activation lands here).

When all listen, it prints one JSON line on stdout, ``{"raw": "ws://...", "tcp": PORT}``
(``"raw"`` is ``null`` with ``--no-raw``), and runs until its stdin reaches end of file
(the parent closes it, or dies), then closes the node and exits 0. ``--lifetime`` (600 s)
bounds it in case nothing ever closes stdin. ``--profile PATH`` writes a cProfile of the
whole serving time to ``PATH``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import sys
import time
from contextlib import nullcontext
from functools import partial
from pathlib import Path

import trio

import zlink_trio as zl
from zlink_trio.bench import raw_tcp
from zlink_trio.bench.remote import MESH, RemoteEcho

__all__ = ("main",)


async def _stdin_closed() -> None:
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with stdin:
        while await stdin.receive_some(4096):
            pass


async def serve(store_url: str, lifetime: float, *, raw: bool = True) -> None:
    """Serve until stdin closes (or ``lifetime`` seconds pass); see the module docstring."""
    with trio.move_on_after(lifetime):
        async with trio.open_nursery() as nursery, zl.open_node(
            "bench-peer", store=store_url, mesh=MESH, spots=[RemoteEcho],
            instance_idle_timeout=0,
        ):
            url = None
            if raw:
                from zlink_trio.bench import raw_ws  # the bench extra (trio-websocket)

                url = await raw_ws.serve_echo(nursery)
            tcp_port = await raw_tcp.serve_echo(nursery)
            print(json.dumps({"raw": url, "tcp": tcp_port}), flush=True)
            await _stdin_closed()
            nursery.cancel_scope.cancel()


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and serve; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.bench.peer")
    parser.add_argument("--store", required=True, help="the shared store URL")
    parser.add_argument("--lifetime", type=float, default=600.0,
                        help="exit after this many seconds at the latest")
    parser.add_argument("--profile", type=Path, default=None, help="write cProfile stats here")
    parser.add_argument("--no-raw", action="store_true",
                        help="serve no raw websocket echo (trio-websocket is not installed)")
    args = parser.parse_args(argv)
    # CPU time, not wall time: on a shared machine wall time is mostly waiting for a core.
    profiler = cProfile.Profile(time.process_time) if args.profile is not None else None
    with profiler or nullcontext():
        trio.run(partial(serve, args.store, args.lifetime, raw=not args.no_raw))
    if profiler is not None:
        profiler.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Cold activations with 1, 2 and 4 node processes sharing one store: ``python -m
zlink_trio.bench.scale``.

Theory of operation
-------------------
For each shared backend (a SQLite file, a Redis database under a fresh key prefix;
``memory://`` cannot be shared between processes) and each process count in
:data:`PROCESSES`, :func:`measure_scale` starts that many node processes
(``python -m zlink_trio.bench.scale --worker URL NAME COUNT``) on the one store. Each
opens its own node (NodeId ``bench-scale-<i>``, one Mesh) and prints ``ready``; once
all are ready the parent writes ``go`` to each, and each sends first messages with
Instance intent to :data:`PER_PROCESS` new IDs of its own, 100 in flight, then prints
its start and end (wall clock, the same machine) and how many it activated. The figure
is the aggregate rate, every activation of every process over the span from the first
start to the last end: ``scale_cold_activations_per_s`` = ``{backend: {"1": ..., "2":
..., "4": ...}}``. Every process is on this machine's cores, so past the core count
the processes share CPU: the figure shows what one store sustains under more nodes,
bounded by the machine, and ``scale_cpu_count`` says how many cores there were.
Nothing here is a test: no figure is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from functools import partial
from typing import TYPE_CHECKING, Final

import trio

import zlink_trio as zl
from zlink_trio.bench.local import IN_FLIGHT, Echo, Ping, Pong
from zlink_trio.bench.output import print_figures
from zlink_trio.bench.stores import DEFAULT_REDIS_URL, bench_store_url

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ("PER_PROCESS", "PROCESSES", "main", "measure_scale")

#: Node process counts measured.
PROCESSES: Final = (1, 2, 4)
#: Cold activations each process makes.
PER_PROCESS: Final = 3_000
#: Deadline of one measurement (all processes, start to end).
ROUND_TIMEOUT: Final = 300.0
#: The mesh secret of the benchmark's nodes (loopback only, thrown away after the run).
_SECRET: Final = "zlink-bench-scale-loopback-secret"
#: Every node can hold what all of them activate (placement may put them anywhere).
_MAX_PROCESSES: Final = 8
#: The backends that can be shared between processes.
SHARED: Final = ("sqlite", "redis")


async def _worker(url: str, name: str, count: int) -> None:
    # Listening, with one secret: placement may start a first message's Spot on any of
    # the nodes (the runtime's own choice), as in a deployment.
    ceiling = count * _MAX_PROCESSES + 100
    async with zl.open_node(name, store=url, mesh="bench-scale", spots=[Echo],
                            secret=_SECRET, instance_idle_timeout=0,
                            active_object_ceiling=ceiling) as node:
        print("ready", flush=True)
        line = await trio.to_thread.run_sync(sys.stdin.readline)
        if line.strip() != "go":
            return

        async def one(first: int) -> None:
            for i in range(first, count, IN_FLIGHT):
                await node.client.request(f"{name}-{i}", Ping(i), reply=Pong).instance_spot(
                    "bench-echo").timeout(60)

        start = time.time()
        async with trio.open_nursery() as nursery:
            for w in range(min(IN_FLIGHT, count)):
                nursery.start_soon(one, w)
        end = time.time()
        print(json.dumps({"start": start, "end": end, "count": count}), flush=True)
        # Stay up until every node is done: the others may still place Spots here.
        await trio.to_thread.run_sync(sys.stdin.readline)


async def _round(url: str, processes: int, count: int) -> float:
    """The aggregate cold activations/s of ``processes`` nodes on ``url``."""
    async with trio.open_nursery() as nursery:
        procs: list[trio.Process] = []
        for i in range(processes):
            command = [sys.executable, "-m", "zlink_trio.bench.scale", "--worker", url,
                       f"bench-scale-{i}", str(count)]
            procs.append(await nursery.start(partial(
                trio.run_process, command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                check=True)))
        lines = [_Lines(proc.stdout) for proc in procs]
        for reader in lines:
            assert await reader.next() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            await proc.stdin.send_all(b"go\n")
        done = [json.loads(await reader.next()) for reader in lines]
        for proc in procs:
            assert proc.stdin is not None
            await proc.stdin.aclose()
    span: float = max(d["end"] for d in done) - min(d["start"] for d in done)
    total: int = sum(d["count"] for d in done)
    return total / span


class _Lines:
    """Lines from a child's stdout."""

    def __init__(self, stream: trio.abc.ReceiveStream | None) -> None:
        assert stream is not None
        self._stream = stream
        self._buffer = b""

    async def next(self) -> str:
        while b"\n" not in self._buffer:
            data = await self._stream.receive_some()
            if not data:
                raise zl.Unavailable("a benchmark node process ended before it answered; "
                                     "its error is on stderr above")
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()


async def measure_scale(backends: Sequence[str] = SHARED, *,
                        processes: Sequence[int] = PROCESSES, per_process: int = PER_PROCESS,
                        redis_url: str = DEFAULT_REDIS_URL) -> dict[str, object]:
    """The figures above; a backend that cannot be opened is ``null`` with its reason."""
    figures: dict[str, object] = {}
    unavailable: dict[str, str] = {}
    for backend in backends:
        per_count: dict[str, int] = {}
        try:
            for n in processes:
                async with bench_store_url(backend, redis_url=redis_url) as url:
                    with trio.fail_after(ROUND_TIMEOUT):
                        per_count[str(n)] = round(await _round(url, n, per_process))
        except (zl.ZLinkError, OSError, trio.TooSlowError) as exc:
            unavailable[backend] = f"{type(exc).__name__}: {exc}"
            figures[backend] = None
            continue
        figures[backend] = per_count
    result: dict[str, object] = {"scale_cold_activations_per_s": figures,
                                 "scale_cpu_count": os.cpu_count()}
    if unavailable:
        result["unavailable"] = unavailable
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m zlink_trio.bench.scale [--json]`` (``--worker``: one node process)."""
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.bench.scale",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="one JSON line")
    parser.add_argument("--backends", default=",".join(SHARED), help="sqlite,redis")
    parser.add_argument("--redis", default=DEFAULT_REDIS_URL, help="the Redis to measure")
    parser.add_argument("--per-process", type=int, default=PER_PROCESS,
                        help="cold activations per process (3000)")
    parser.add_argument("--worker", nargs=3, metavar=("URL", "NAME", "COUNT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        url, name, count = args.worker
        trio.run(_worker, url, name, int(count))
        return 0
    backends = [b for b in args.backends.split(",") if b]
    unknown = sorted(set(backends) - set(SHARED))
    if unknown:
        parser.error(f"--backends takes {', '.join(SHARED)}, got {', '.join(unknown)}")
    figures = trio.run(lambda: measure_scale(backends, per_process=args.per_process,
                                             redis_url=args.redis))
    print_figures(figures, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Running the chaos cluster: server and caller node processes, a relay per server.

:func:`open_cluster` starts ``servers`` server processes (``s0``, ``s1``, ...) each behind
its own :class:`~relay.Relay` (the server publishes the relay's port as its endpoint, so
every link to it crosses the relay) and ``callers`` caller processes (``c0``, ...),
waits until each printed its first ``open`` line, and yields a :class:`Cluster`. When
the block ends -- normally, by a failure or by cancellation -- every process still
running is SIGCONTed, killed and reaped, shielded and bounded.

A reader task per process reads its stdout lines (``open``, ``lease_lost``, ``exit``):
an ``open`` of a server points its relay at the freshly bound port. The driver records
its own timeline (``fault``, ``heal``, ``restart``, ...) in :attr:`Cluster.events`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio
from checker import read_lines
from relay import Relay

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

WORKER = Path(__file__).resolve().with_name("node_worker.py")
READY_TIMEOUT = 30.0
#: A worker exits on its own after this long, whatever happens to the driver.
LIFETIME = 300.0


@attrs.define(eq=False)
class Proc:
    """One worker process and what its stdout told so far."""

    name: str
    role: str
    proc: trio.Process
    err_path: Path
    lines: list[dict[str, Any]] = attrs.Factory(list)
    changed: trio.Event = attrs.Factory(trio.Event)
    exited: trio.Event = attrs.Factory(trio.Event)

    def opens(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("event") == "open"]

    def count(self, event: str) -> int:
        return sum(1 for line in self.lines if line.get("event") == event)

    async def wait_for(self, event: str, count: int, within: float) -> dict[str, Any]:
        """The ``count``-th ``event`` line of this process (bounded by ``within``)."""
        with trio.fail_after(within):
            while self.count(event) < count:
                if self.exited.is_set():
                    raise AssertionError(f"{self.name} exited ({self.proc.returncode}) "
                                         f"before its {event} #{count}:\n{self.stderr()}")
                await self.changed.wait()
        return [line for line in self.lines if line.get("event") == event][count - 1]

    async def send(self, **cmd: Any) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.proc.stdin.send_all(json.dumps(cmd).encode() + b"\n")  # unless it exited

    def signal(self, signum: int) -> None:
        if self.proc.returncode is None:
            self.proc.send_signal(signum)

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")[-4000:] if self.err_path.exists() else ""


@attrs.define(eq=False)
class Cluster:
    store: str
    logs: Path
    nursery: trio.Nursery
    lease: float
    deadline: float
    spots: int
    worker_options: dict[str, Any]
    servers: dict[str, Proc] = attrs.Factory(dict)
    callers: list[Proc] = attrs.Factory(list)
    relays: dict[str, Relay] = attrs.Factory(dict)
    retired: list[Proc] = attrs.Factory(list)
    events: list[dict[str, Any]] = attrs.Factory(list)

    def mark(self, event: str, **fields: Any) -> float:
        """Record one driver event now; returns its wall time."""
        now = time.time()
        self.events.append({"event": event, "t": now, **fields})
        return now

    async def launch(self, name: str, role: str, deadline: float | None = None) -> Proc:
        err_path = self.logs / f"{name}-{os.urandom(3).hex()}.err"
        argv = [sys.executable, str(WORKER), "--role", role, "--node", name,
                "--store", self.store, "--logs", str(self.logs), "--lease", str(self.lease),
                "--deadline", str(deadline or self.deadline), "--spots", str(self.spots),
                "--lifetime", str(LIFETIME)]
        for key, value in self.worker_options.items():
            argv += [f"--{key}", str(value)]
        if role == "server":
            argv += ["--endpoint", f"ws://127.0.0.1:{self.relays[name].port}"]
        with err_path.open("ab") as err:
            proc = await trio.lowlevel.open_process(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        handle = Proc(name, role, proc, err_path)
        self.nursery.start_soon(self._read, handle)
        return handle

    async def _read(self, handle: Proc) -> None:
        assert handle.proc.stdout is not None
        buffer = b""
        try:
            while True:
                try:
                    chunk = await handle.proc.stdout.receive_some(65536)
                except trio.ClosedResourceError:  # reaped (``_reap``) before its end was read
                    break
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    raw, _, buffer = buffer.partition(b"\n")
                    line = dict(json.loads(raw))
                    handle.lines.append(line)
                    if line.get("event") == "open" and handle.role == "server":
                        self.relays[handle.name].upstream = int(line["bound"])
                    handle.changed.set()
                    handle.changed = trio.Event()
        finally:
            handle.exited.set()
            handle.changed.set()

    async def start_server(self, name: str) -> Proc:
        """Launch server ``name`` (again: the same NodeId) and wait for its open line."""
        old = self.servers.get(name)
        if old is not None:
            self.retired.append(old)
        self.servers[name] = proc = await self.launch(name, "server")
        return proc

    def kill(self, name: str) -> Proc:
        proc = self.servers[name]
        proc.signal(signal.SIGKILL)
        return proc

    def owners(self) -> dict[str, str]:
        """Spot ID -> the server NodeId that last answered it ok (from the call logs)."""
        owners: dict[str, str] = {}
        for line in self.calls():
            if line["outcome"] == "ok":
                owners[line["spot"]] = line["owner"]
        return owners

    def calls(self) -> list[dict[str, Any]]:
        """The call lines so far (a line being written right now is skipped)."""
        return read_lines(sorted(self.logs.glob("calls-*.jsonl")))

    def served_since(self, since: float) -> set[str]:
        """The Spots with an ok call started at or after ``since``."""
        return {line["spot"] for line in self.calls()
                if line["outcome"] == "ok" and line["start"] >= since}

    async def wait_served(self, since: float, within: float) -> bool:
        """Poll the call logs until every Spot has an ok call started since ``since``."""
        want = {f"chaos-{i}" for i in range(self.spots)}
        with trio.move_on_after(within):
            # Other processes' files: no event crosses processes, so poll.
            while not want <= self.served_since(since):  # noqa: ASYNC110
                await trio.sleep(0.1)
            return True
        return False

    async def stop_callers(self, within: float) -> None:
        """Stop the callers' calls: each logs its last one and says ``calls_done``. Every
        process is then killed when the cluster block ends: nothing of theirs is pending."""
        with trio.move_on_after(within):
            for proc in self.callers:
                await proc.send(op="stop")
            for proc in self.callers:
                await proc.wait_for("calls_done", 1, within)


async def _reap(proc: Proc) -> None:
    with trio.CancelScope(shield=True), trio.move_on_after(10):
        proc.signal(signal.SIGCONT)
        proc.signal(signal.SIGKILL)
        await proc.proc.wait()
        for stream in (proc.proc.stdin, proc.proc.stdout):
            if stream is not None:
                await stream.aclose()


@asynccontextmanager
async def open_cluster(store: str, logs: Path, *, servers: int = 3, callers: int = 2,
                       lease: float = 1.5, deadline: float = 2.0, spots: int = 12,
                       caller_deadlines: tuple[float, ...] = (),
                       **worker_options: Any) -> AsyncIterator[Cluster]:
    """Run the cluster (see the module doc); every process is reaped when it ends.

    Caller ``i`` calls with ``caller_deadlines[i]`` when given, else ``deadline``.
    """
    async with trio.open_nursery() as nursery:
        cluster = Cluster(store, logs, nursery, lease, deadline, spots, worker_options)
        try:
            for i in range(servers):
                relay = cluster.relays[f"s{i}"] = Relay(upstream=0)
                await nursery.start(relay.serve)
            for name in cluster.relays:  # all at once: start-up is most of a row's time
                await cluster.start_server(name)
            for i in range(callers):
                own = caller_deadlines[i] if i < len(caller_deadlines) else None
                cluster.callers.append(await cluster.launch(f"c{i}", "caller", own))
            for proc in [*cluster.servers.values(), *cluster.callers]:
                await proc.wait_for("open", 1, READY_TIMEOUT)
            for proc in cluster.callers:
                await proc.send(op="go")
            cluster.mark("started")
            yield cluster
        finally:
            for proc in [*cluster.callers, *cluster.servers.values(), *cluster.retired]:
                await _reap(proc)
            nursery.cancel_scope.cancel()

"""Starting, driving and always stopping ``mesh_node_worker.py`` processes.

:func:`start_nodes` starts one worker per node name (concurrently), waits for each
ready line and yields :class:`NodeProc` handles; when the block ends -- normally, by
a failure or by cancellation -- every process still running is killed and reaped.
``together=True`` lets every worker load its imports first and then releases all of
their node opens with one line each, so their store opens race.
:meth:`NodeProc.call` sends one JSON command and reads its one-line answer under a
deadline. :func:`factory_runs` parses the shared side-effect log, :func:`handled_steps`
the log of the relocation tests' ``Step`` messages and :func:`handled_operations` the
operation IDs their turns carried.

:func:`open_mesh` starts the nodes of a relocation test: one process each (with its own
environment, e.g. ``ZLINK_CRASH_AT``) on a SQLite or Redis URL, or -- on ``memory://``,
which cannot be shared between processes -- every node in this process over real
loopback links (:class:`InProcNode`: the same commands, answered by the same
``mesh_node_worker.Session`` code).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import mesh_node_worker
import trio

from zlink_trio.store import open_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

WORKER = Path(__file__).resolve().with_name("mesh_node_worker.py")
#: Bounds: a worker's start-up (imports, node claim) and one command's answer.
READY_TIMEOUT = 30.0
CALL_TIMEOUT = 30.0
#: A worker process exits on its own after this long, whatever happens to the test.
WORKER_LIFETIME = 120.0


@attrs.define
class NodeProc:
    """One running node process: its NodeId, OS process and ready-line facts."""

    name: str
    proc: trio.Process
    err_path: Path
    info: dict[str, Any] = attrs.field(factory=dict)
    buffer: bytes = b""

    @property
    def node_rid(self) -> str:
        return str(self.info["node_rid"])

    @property
    def endpoint(self) -> str:
        return str(self.info["endpoint"])

    async def read_line(self, within: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        with trio.fail_after(within):
            while b"\n" not in self.buffer:
                chunk = await self.proc.stdout.receive_some(65536)
                if not chunk:
                    raise AssertionError(f"node {self.name} exited ({self.proc.returncode}) "
                                         f"without answering; stderr:\n{self.stderr()}")
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return dict(json.loads(line))

    async def call(self, answer_within: float = CALL_TIMEOUT, **cmd: Any) -> dict[str, Any]:
        """Send one command, return its answer (the worker answers in order).

        ``timeout=`` in ``cmd`` is the call's own deadline inside the worker.
        """
        assert self.proc.stdin is not None
        await self.proc.stdin.send_all(json.dumps(cmd).encode() + b"\n")
        return await self.read_line(answer_within)

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")[-4000:] if self.err_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the process (no cleanup runs in it: its store authority stays)."""
        if self.proc.returncode is None:
            self.proc.kill()

    async def quit(self) -> int:
        """Ask the node to close cleanly; returns the exit status."""
        assert self.proc.stdin is not None
        await self.proc.stdin.send_all(b'{"op": "quit"}\n')
        with trio.fail_after(READY_TIMEOUT):
            return await self.proc.wait()


async def launch(name: str, url: str, tmp_path: Path, *, env: dict[str, str] | None = None,
                 **options: object) -> NodeProc:
    """Start one worker (not yet ready: call :func:`wait_ready`)."""
    err_path = tmp_path / f"{name}-{os.urandom(3).hex()}.err"
    argv = [sys.executable, str(WORKER), "--node", name, "--store", url,
            "--log", str(tmp_path / "factory.log"), "--timeout", str(WORKER_LIFETIME)]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    full_env = dict(os.environ)
    full_env.pop("ZLINK_CRASH_AT", None)
    full_env.update(env or {})
    with err_path.open("ab") as err:
        proc = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, stderr=err, env=full_env)
    return NodeProc(name, proc, err_path)


async def wait_ready(node: NodeProc) -> NodeProc:
    node.info = await node.read_line(READY_TIMEOUT)
    assert node.info.get("ready"), (node.info, node.stderr())
    return node


async def stop(node: NodeProc) -> None:
    """Kill if still running, reap, close the pipes; shielded and bounded."""
    with trio.CancelScope(shield=True), trio.move_on_after(10):
        node.kill()
        await node.proc.wait()
        for stream in (node.proc.stdin, node.proc.stdout):
            if stream is not None:
                await stream.aclose()


async def wait_loaded(node: NodeProc) -> None:
    """Until a ``--wait-go`` worker has imported everything (before it opens its node)."""
    line = await node.read_line(READY_TIMEOUT)
    assert line.get("loaded"), (line, node.stderr())


@asynccontextmanager
async def start_nodes(names: list[str], url: str, tmp_path: Path, *, together: bool = False,
                      **options: object) -> AsyncIterator[list[NodeProc]]:
    """Run one node process per name on ``url``; all are killed when the block ends.

    ``together``: every process first loads its imports, then all are told to open their
    nodes at once, so their store opens (a fresh SQLite file's creation) race.
    """
    nodes: list[NodeProc] = []
    if together:
        options["wait_go"] = 1
    try:
        for name in names:
            nodes.append(await launch(name, url, tmp_path, **options))
        if together:
            async with trio.open_nursery() as nursery:
                for node in nodes:
                    nursery.start_soon(wait_loaded, node)
            for node in nodes:  # one write each: the opens start within a millisecond
                assert node.proc.stdin is not None
                await node.proc.stdin.send_all(b'{"op": "go"}\n')
        async with trio.open_nursery() as nursery:
            for node in nodes:
                nursery.start_soon(wait_ready, node)
        yield nodes
    finally:
        for node in nodes:
            await stop(node)


@asynccontextmanager
async def running(node: NodeProc) -> AsyncIterator[NodeProc]:
    """Own one extra process started with :func:`launch`: killed when the block ends."""
    try:
        yield await wait_ready(node)
    finally:
        await stop(node)


def factory_runs(tmp_path: Path) -> list[tuple[str, int, str]]:
    """``(spot_id, generation, node)`` for every factory run any process logged."""
    log = tmp_path / "factory.log"
    if not log.exists():
        return []
    runs = []
    for line in log.read_text().splitlines():
        _, spot_id, generation, node, _pid = line.split(" ")
        runs.append((spot_id, int(generation), node))
    return runs


def runs_per_id(tmp_path: Path) -> dict[str, list[tuple[int, str]]]:
    by_id: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
    for spot_id, generation, node in factory_runs(tmp_path):
        by_id[spot_id].append((generation, node))
    return dict(by_id)


def handled_steps(tmp_path: Path) -> list[tuple[str, int, str]]:
    """``(spot_id, seq, node)`` for every ``Step`` any node handled, in log order."""
    log = tmp_path / "factory.log.handled"
    if not log.exists():
        return []
    steps = []
    for line in log.read_text().splitlines():
        _, spot_id, seq, node, _pid, _operation = line.split(" ")
        steps.append((spot_id, int(seq), node))
    return steps


def handled_operations(tmp_path: Path) -> dict[int, list[int]]:
    """seq -> the operation ID of each turn that handled that ``Step``, in log order."""
    log = tmp_path / "factory.log.handled"
    by_seq: dict[int, list[int]] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        _, _spot_id, seq, _node, _pid, operation = line.split(" ")
        by_seq.setdefault(int(seq), []).append(int(operation))
    return by_seq


@attrs.define
class InProcNode:
    """A node of this process driven like a :class:`NodeProc` (``memory://`` runs)."""

    name: str
    session: Any
    info: dict[str, Any] = attrs.field(factory=dict)

    @property
    def node_rid(self) -> str:
        return str(self.info["node_rid"])

    async def call(self, answer_within: float = CALL_TIMEOUT, **cmd: Any) -> dict[str, Any]:
        with trio.fail_after(answer_within):
            return dict(await self.session.call(cmd))


#: ``open_mesh`` option names -> ``open_node`` keywords (in-process nodes).
_IN_PROCESS_OPTIONS = {"weight": "placement_weight", "lease": "lease",
                       "default_timeout": "default_timeout", "lane_items": "lane_items"}


@asynccontextmanager
async def in_process(name: str, url: str, tmp_path: Path, **options: Any
                     ) -> AsyncIterator[InProcNode]:
    """Node ``name`` in this process (``open_mesh`` options), closed when the block ends."""
    kwargs = {_IN_PROCESS_OPTIONS[key]: value for key, value in options.items()}
    async with mesh_node_worker.open_session(name, url, str(tmp_path / "factory.log"),
                                             **kwargs) as session:
        node = session.node
        yield InProcNode(name, session, {"ready": True, "node_rid": str(node.node_rid),
                                         "entry_spot_id": node.entry_spot_id})


@asynccontextmanager
async def open_mesh(url: str, tmp_path: Path, specs: list[dict[str, Any]]
                    ) -> AsyncIterator[list[Any]]:
    """The nodes ``specs`` names (``{"name": ..., "env": {...}, **worker options}``).

    Processes on a shared store URL (killed and reaped when the block ends); on
    ``memory://`` the nodes run in this process and ``env`` must be empty.
    """
    if url.startswith("memory://"):
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(open_store(url))  # the named store lives
            nodes = []
            for spec in specs:
                options = dict(spec)
                name = options.pop("name")
                assert not options.pop("env", None), "a crash step needs a process"
                nodes.append(await stack.enter_async_context(
                    in_process(name, url, tmp_path, **options)))
            yield nodes
        return
    procs: list[NodeProc] = []
    try:
        for spec in specs:
            options = dict(spec)
            name = options.pop("name")
            env = options.pop("env", None)
            procs.append(await launch(name, url, tmp_path, env=env, **options))
        async with trio.open_nursery() as nursery:
            for proc in procs:
                nursery.start_soon(wait_ready, proc)
        yield procs
    finally:
        for proc in procs:
            await stop(proc)

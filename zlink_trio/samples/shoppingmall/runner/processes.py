"""Start the node processes, report them, and stop them all.

Four in ``serve``; the smoke adds its fixture node (``topology.FIXTURE_NODE``).

:func:`open_deployment` is the entry point ``serve`` and the smoke runner
share: it writes the deployment file, starts ``python -m
zlink_trio.samples.shoppingmall node <NodeId> --deployment FILE`` once per node
with its standard output and error appended to ``<logs>/<NodeId>.log``, says
one line per process (``api-a http://127.0.0.1:PORT pid N``, ``workflow-a pid
N``), and yields the running :class:`NodeProcess` es. Leaving it stops them
all: SIGTERM, up to :data:`STOP_GRACE` seconds for a clean exit, then SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs
import trio

import zlink_trio
from zlink_trio.samples.shoppingmall.runner.node_main import SECRET_ENV

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from zlink_trio.samples.shoppingmall.runner.topology import Deployment, NodeSpec

__all__ = ("STOP_GRACE", "NodeProcess", "child_env", "describe", "open_deployment",
           "write_deployment")

#: Seconds every node gets to leave cleanly after SIGTERM before it is killed.
STOP_GRACE: Final = 10.0
_MODULE: Final = "zlink_trio.samples.shoppingmall"


@attrs.define
class NodeProcess:
    """One running node: its spec, its process and its log file."""

    spec: NodeSpec
    process: trio.Process
    log_path: Path

    def is_alive(self) -> bool:
        """Whether the process has not exited yet."""
        return self.process.poll() is None

    def read_log(self) -> str:
        """The node's log so far."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""


def describe(node: NodeProcess) -> str:
    """The line ``serve`` prints for ``node``."""
    if node.spec.role == "api":
        return f"{node.spec.node_id} {node.spec.base_url} pid {node.process.pid}"
    return f"{node.spec.node_id} pid {node.process.pid}"


def child_env(secret: str | None) -> dict[str, str]:
    """The node processes' environment: this one, the secret, and this checkout on the path."""
    env = dict(os.environ)
    env.pop(SECRET_ENV, None)
    if secret is not None:
        env[SECRET_ENV] = secret
    root = str(Path(zlink_trio.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def _start(spec: NodeSpec, deployment_file: Path, log_dir: Path,
                 env: dict[str, str]) -> NodeProcess:
    log_path = log_dir / f"{spec.node_id}.log"
    with log_path.open("ab") as log:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", _MODULE, "node", spec.node_id, "--deployment",
             str(deployment_file)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            # A terminal's Ctrl-C reaches only the launcher, which then stops the nodes.
            start_new_session=True)
    return NodeProcess(spec=spec, process=process, log_path=log_path)


async def stop_all(nodes: list[NodeProcess], *, grace: float = STOP_GRACE) -> None:
    """SIGTERM every live node, wait up to ``grace`` s for all, then SIGKILL the rest."""
    for node in nodes:
        if node.is_alive():
            node.process.send_signal(signal.SIGTERM)
    with trio.move_on_after(grace):
        for node in nodes:
            await node.process.wait()
    for node in nodes:
        if node.is_alive():
            node.process.kill()
            await node.process.wait()


def write_deployment(deployment: Deployment, work_dir: Path) -> tuple[Path, Path]:
    """Write ``<work_dir>/deployment.json`` and make ``<work_dir>/logs``; both paths."""
    work_dir.mkdir(parents=True, exist_ok=True)
    deployment_file = work_dir / "deployment.json"
    deployment_file.write_text(deployment.to_json(), encoding="utf-8")
    log_dir = work_dir / "logs"
    log_dir.mkdir(exist_ok=True)
    return deployment_file, log_dir


@asynccontextmanager
async def open_deployment(deployment: Deployment, work_dir: Path, *, secret: str,
                          say: Callable[[str], None] = print,
                          ) -> AsyncIterator[list[NodeProcess]]:
    """Start the deployment's nodes (module docstring); stop them all on the way out."""
    deployment_file, log_dir = write_deployment(deployment, work_dir)
    env = child_env(secret)
    nodes: list[NodeProcess] = []
    try:
        for spec in deployment.nodes:
            nodes.append(await _start(spec, deployment_file, log_dir, env))
            say(describe(nodes[-1]))
        yield nodes
    finally:
        with trio.CancelScope(shield=True):
            await stop_all(nodes)

"""``python -m zlink_trio.samples.shoppingmall smoke [--store URL]``: the self-check as one command.

``docs/shoppingmall.md``, "The smoke", tells the same in three phases; step by step:

1. Plan the deployment (stores, ports; ``topology``) in a fresh work directory;
   the Location and Relocation Stores in separate keyspaces; the stores are
   created before any process starts.
2. Start the four nodes through the same launcher as ``serve`` (``processes``),
   in runner mode (fixture controls and ``/self-check/*`` hooks on the Workflow
   nodes), plus the runner's fixture node (``topology.FIXTURE_NODE``).
3. Wait, bounded (100 ms x 300), for both readiness lines of each API node
   (``shoppingmall-ready kind=http`` and ``kind=object-route`` once per
   sample Workflow node) and for each Workflow node's hooks line.
4. Seed this run's carts and arm the fixtures by cart (hooks), prepare the
   orders the Client needs a runner step for (``prepare``), then run the Client
   self-check as its own process, with those OrderIds in its configuration. The
   runner does nothing while the Client runs: fixtures are prepared before it
   starts and evidence is read after it finishes.
5. Confirm ``shoppingmall=completed`` in the Client's output; then mark the
   Workflow logs and wait for the marks (``verify.settle``), observe the event
   streams and external effects (``verify.verify_items``, ``verify_rebuilt``)
   and poll the evidence rows per node log (``verify.verify_rows``).
6. Print ``shoppingmall-placement=completed`` only when all of that passed;
   otherwise the cause and the last confirmed state. Exit 0 only on success.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final

import httpx
import trio

from zlink_trio.samples.shoppingmall.client.api import OrderApi
from zlink_trio.samples.shoppingmall.client.config import ClientConfig
from zlink_trio.samples.shoppingmall.client.program import COMPLETED
from zlink_trio.samples.shoppingmall.client.reports import PASSED_PREFIX, parse_fields
from zlink_trio.samples.shoppingmall.runner import evidence as ev
from zlink_trio.samples.shoppingmall.runner.hooks_client import HookError, Hooks
from zlink_trio.samples.shoppingmall.runner.log_wait import LogWaitTimeout, wait_for_count
from zlink_trio.samples.shoppingmall.runner.node_main import HOOKS_READY
from zlink_trio.samples.shoppingmall.runner.prepare import PrepareError, prepare_fixtures
from zlink_trio.samples.shoppingmall.runner.processes import child_env, open_deployment
from zlink_trio.samples.shoppingmall.runner.seeding import prepare_stores
from zlink_trio.samples.shoppingmall.runner.serve import new_run_id
from zlink_trio.samples.shoppingmall.runner.topology import (
    API_NODES,
    FIXTURE_NODE,
    WORKFLOW_NODES,
    plan_deployment,
    store_urls,
)
from zlink_trio.samples.shoppingmall.runner.verify import (
    settle,
    verify_items,
    verify_rebuilt,
    verify_rows,
)

if TYPE_CHECKING:
    from zlink_trio.samples.shoppingmall.runner.processes import NodeProcess

__all__ = ("PLACEMENT_COMPLETED", "SmokeFailure", "cart_ids", "smoke")

PLACEMENT_COMPLETED: Final = "shoppingmall-placement=completed"
#: Seconds the Client self-check may take in all.
CLIENT_BUDGET: Final = 240.0
CONCURRENT_ORDERS: Final = 8
#: The fixtures armed by cart before anything starts (the prepared orders' too).
_FIXTURES: Final = {"resume": "stop-at-reserved", "failureBoundary": "stop-at-reserved",
                    "terminalProjection": "skip-terminal-projection",
                    "relocation": "gate-after-reserved"}
_PREFIX: Final = {"noStock": "cart-no-stock-", "released": "cart-no-stock-",
                  "payReject": "cart-pay-reject-"}


class SmokeFailure(Exception):
    """A step of the smoke failed; ``last`` is the last state it confirmed."""

    def __init__(self, cause: str, last: str) -> None:
        super().__init__(cause)
        self.last = last


def _say(line: str) -> None:
    print(line, flush=True)


def cart_ids(run_id: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """This run's cart per Client role, and its concurrent carts (IDs no other run uses)."""
    roles = ("success", "noStock", "payReject", "duplicate", "resume", "terminalProjection",
             "rebuild", "released", "relocation", "failureBoundary")
    carts = {role: f"{_PREFIX.get(role, 'cart-ok-')}{run_id}-{role}" for role in roles}
    return carts, tuple(f"cart-ok-{run_id}-c{i}" for i in range(CONCURRENT_ORDERS))


def _tail(node: NodeProcess, lines: int = 3) -> str:
    return " | ".join(node.read_log().strip().splitlines()[-lines:])


async def _wait_ready(nodes: dict[str, NodeProcess]) -> None:
    for api in API_NODES:
        node = nodes[api]
        await wait_for_count(node.read_log, ev.READY_HTTP, alive=node.is_alive,
                             values={"NodeId": api})
        for target in WORKFLOW_NODES:
            await wait_for_count(node.read_log, ev.READY_ROUTE, alive=node.is_alive,
                                 values={"NodeId": api, "WorkflowNodeId": target})
        _say(f"shoppingmall-runner ready node={api} kind=http,object-route")
    for workflow in (*WORKFLOW_NODES, FIXTURE_NODE):
        node = nodes[workflow]
        await wait_for_count(node.read_log, HOOKS_READY, alive=node.is_alive,
                             values={"NodeId": workflow})


async def _run_client(config_file: Path, log_dir: Path, lines: list[str]) -> None:
    """Run the Client process to its end, keeping its lines; the runner only listens."""
    env = child_env(None)  # the Client is no mesh node: no secret
    with (log_dir / "client.stderr.log").open("ab") as stderr:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "zlink_trio.samples.shoppingmall", "client", "--config",
             str(config_file)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=stderr, env=env)
    assert process.stdout is not None
    buffer = b""
    try:
        with trio.fail_after(CLIENT_BUDGET):
            async for chunk in process.stdout:
                buffer += chunk
                while b"\n" in buffer:
                    raw, buffer = buffer.split(b"\n", 1)
                    line = raw.decode("utf-8", "replace").rstrip("\r")
                    lines.append(line)
                    _say(line)
            await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _smoke(store: str | None, work_dir: Path, run_id: str) -> str:
    """Run the smoke (module docstring); the last confirmed state. Raises :class:`SmokeFailure`."""
    urls = store_urls(store, work_dir / "stores", run_id)
    await prepare_stores(urls)  # the stores exist before the processes start
    deployment = plan_deployment(run_id=run_id, stores=urls, base_port=0, runner_mode=True)
    last = "nothing started"
    async with open_deployment(deployment, work_dir, secret=secrets.token_hex(32),
                               say=_say) as started:
        nodes = {n.spec.node_id: n for n in started}
        try:
            await _wait_ready(nodes)
        except LogWaitTimeout as exc:
            dead = [f"{n} exited; its log ends: {_tail(node)!r}"
                    for n, node in nodes.items() if not node.is_alive()]
            raise SmokeFailure("; ".join([f"readiness: {exc}", *dead]), last) from exc
        last = "every node ready"
        carts, concurrent = cart_ids(run_id)
        async with httpx.AsyncClient(timeout=30.0) as http:
            hooks = Hooks(http, {w: deployment.node(w).hooks_url
                                 for w in (*WORKFLOW_NODES, FIXTURE_NODE)})
            try:
                await hooks.seed([*carts.values(), *concurrent])
                for role, fixture in _FIXTURES.items():
                    await hooks.arm(fixture, carts[role])
            except (HookError, httpx.HTTPError) as exc:
                raise SmokeFailure(f"seeding or arming fixtures: {exc}", last) from exc
            last = "seeds and fixtures armed"
            apis = [OrderApi(http, deployment.node(a).base_url) for a in API_NODES]
            try:
                prepared = await prepare_fixtures(hooks, nodes, apis, carts, _say)
            except (PrepareError, httpx.HTTPError) as exc:
                raise SmokeFailure(f"preparing fixtures: {exc}", last) from exc
            last = "fixtures prepared before the client"
            config = ClientConfig(apis=tuple(api.base_url for api in apis), carts=carts,
                                  concurrent_carts=concurrent, orders=prepared.orders)
            config_file = work_dir / "client.json"
            config_file.write_text(config.to_json(), encoding="utf-8")
            lines: list[str] = []
            try:
                await _run_client(config_file, work_dir / "logs", lines)
            except trio.TooSlowError as exc:
                raise SmokeFailure(f"the client ran over {CLIENT_BUDGET} s", last) from exc
            if COMPLETED not in lines:
                client_last = [ln for ln in lines if "last-confirmed" in ln or "failed" in ln]
                raise SmokeFailure(f"the client did not print {COMPLETED}: {client_last}", last)
            last = "the client self-check passed"
            reports = [parse_fields(ln) for ln in lines if ln.startswith(PASSED_PREFIX)]
            reads = {n: node.read_log for n, node in nodes.items()}
            try:
                marks, logs = await settle(hooks, reads, _say)
            except (HookError, httpx.HTTPError, LogWaitTimeout) as exc:
                raise SmokeFailure(f"marking the workflow logs: {exc}", last) from exc
            facts = prepared.facts
            problems = await verify_items(reports, hooks, facts, logs, _say)
            problems += await verify_rebuilt(apis[0], facts, _say)
            problems += await verify_rows(reads, facts, _say, marks=marks)
            if problems:
                raise SmokeFailure("; ".join(problems), last)
            return "every evidence row passed"


def smoke(store: str | None, work_dir: str | None = None, run_id: str | None = None,
          keep: bool = False) -> int:
    """The ``smoke`` subcommand; 0 only when both markers were printed."""
    run_id = run_id or new_run_id()
    directory = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="shoppingmall-"))
    _say(f"shoppingmall-runner run={run_id} work={directory}")
    try:
        trio.run(_smoke, store, directory, run_id)
    except SmokeFailure as exc:
        _say(f"shoppingmall-runner failed cause={exc}")
        _say(f"shoppingmall-runner last-confirmed {exc.last}")
        _say(f"shoppingmall-runner logs {directory / 'logs'}")
        return 1
    _say(PLACEMENT_COMPLETED)
    if not keep and not work_dir:
        shutil.rmtree(directory, ignore_errors=True)
    return 0

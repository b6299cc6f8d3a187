"""``python -m zlink_trio.samples.shoppingmall serve``: the four nodes until SIGINT or SIGTERM.

Options: ``[--store URL] [--base-port N] [--work-dir DIR] [--lease S]``.

Seeds the default set (``seeds``: a few carts of each prefix, the stock and
the payment methods), starts the four nodes through ``processes`` (one line
each, ``api-a http://HOST:PORT pid N`` and ``workflow-a pid N``; other tools
read the address from the first two words), waits (bounded) for the API
nodes' readiness lines and says how to try it, and runs until SIGINT or
SIGTERM; then it stops the nodes still running and exits 0 (1 when the nodes
never became ready). The stores are SQLite files in a fresh work directory
(or ``--store redis://...``); the work directory holds the deployment file
and one log per node, and its path is printed first. ``--lease`` sets every
node's lease (default: the framework's, 10 s).

**A node that dies does not stop the others.** The sample exists to show the
failure boundary, so when a node process exits by itself ``serve`` prints
:func:`death_line` -- ``shoppingmall-died node=<NodeId> code=<N>`` (or
``signal=<NAME>``) ``pid=<pid> log=<path>; ...`` -- and keeps the rest
serving. For a dead Workflow node: a command (continue, rebuild) for an order
it still owned answers HTTP 503 ``Unavailable`` and nothing re-creates that
order elsewhere; a lookup still reads it; every other order keeps working;
and once the dead node's lease runs out new orders go to the live Workflow
nodes (until then a new order placed on it is a 503 too, and may be sent
again with the same idempotency key). Only SIGINT or SIGTERM stops
everything.
"""

from __future__ import annotations

import secrets
import signal
import sys
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Final

import trio

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.runner.evidence import READY_HTTP, READY_ROUTE
from zlink_trio.samples.shoppingmall.runner.log_wait import LogWaitTimeout, wait_for_count
from zlink_trio.samples.shoppingmall.runner.processes import open_deployment
from zlink_trio.samples.shoppingmall.runner.seeding import apply_seed_plan, prepare_stores
from zlink_trio.samples.shoppingmall.runner.topology import plan_deployment, store_urls
from zlink_trio.samples.shoppingmall.seeds import PAYMENT_METHODS, PREFIXES, seed_plan

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from zlink_trio.samples.shoppingmall.runner.processes import NodeProcess
    from zlink_trio.samples.shoppingmall.runner.topology import NodeSpec

__all__ = ("DEFAULT_BASE_PORT", "DEMO_CARTS", "death_line", "exit_description", "new_run_id",
           "serve", "wait_ready")

DEFAULT_BASE_PORT: Final = 8080
#: The carts ``serve`` seeds: ``<prefix>1`` .. ``<prefix>9`` of each prefix.
DEMO_CARTS: Final = tuple(f"{prefix}{n}" for prefix in PREFIXES for n in range(1, 10))


def new_run_id() -> str:
    """A short ID naming one deployment's keys and directory."""
    return f"sm-{uuid.uuid4().hex[:10]}"


async def wait_ready(nodes: list[NodeProcess]) -> bool:
    """Wait (bounded) for each API node's readiness lines; whether all came."""
    try:
        for node in nodes:
            if node.spec.role == "api":
                await wait_for_count(node.read_log, READY_HTTP, alive=node.is_alive,
                                     values={"NodeId": node.spec.node_id})
                await wait_for_count(node.read_log, READY_ROUTE, alive=node.is_alive,
                                     at_least=2, values={"NodeId": node.spec.node_id})
    except LogWaitTimeout as exc:
        print(f"shoppingmall not ready: {exc}", flush=True)
        return False
    return True


def exit_description(returncode: int) -> str:
    """How a process ended, from its return code: ``code=N`` or ``signal=SIGKILL``."""
    if returncode < 0:
        try:
            return f"signal={signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal={-returncode}"
    return f"code={returncode}"


def death_line(dead: NodeProcess, returncode: int, serving: Sequence[NodeSpec]) -> str:
    """The line ``serve`` prints when ``dead`` exited by itself; ``serving``: the live nodes.

    ``shoppingmall-died node=<NodeId> code=<N>|signal=<NAME> pid=<pid> log=<path>; ...``,
    then which nodes keep serving and what the death means for a caller, by role.
    """
    spec = dead.spec
    head = (f"shoppingmall-died node={spec.node_id} {exit_description(returncode)} "
            f"pid={dead.process.pid} log={dead.log_path}")
    if not serving:
        return f"{head}; no node is left serving (Ctrl-C stops)"
    same_role = [n for n in serving if n.role == spec.role]
    if spec.role == "api":
        meaning = f"{spec.base_url} no longer answers; " + (
            f"use {', '.join(n.base_url for n in same_role)}" if same_role
            else "no API node is left")
    else:
        meaning = (f"commands for the orders {spec.node_id} owned answer 503 Unavailable "
                   "(nothing re-creates them elsewhere); " + (
                       f"new orders go to {', '.join(n.node_id for n in same_role)} once its "
                       "lease runs out" if same_role else
                       "no Workflow node is left, so every order command answers 503"))
    names = ", ".join(n.node_id for n in serving)
    return f"{head}; {names} keep serving: {meaning} (Ctrl-C stops)"


async def _watch(nodes: list[NodeProcess], signals: AsyncIterator[int]) -> None:
    """Until SIGINT or SIGTERM; a node that exits by itself is reported and the rest go on."""
    dead: set[str] = set()
    async with trio.open_nursery() as nursery:
        async def on_signal() -> None:
            async for _ in signals:
                nursery.cancel_scope.cancel()
                return

        async def on_exit(node: NodeProcess) -> None:
            code = await node.process.wait()
            dead.add(node.spec.node_id)
            serving = [n.spec for n in nodes if n.spec.node_id not in dead]
            print(death_line(node, code, serving), flush=True)

        nursery.start_soon(on_signal)
        for node in nodes:
            nursery.start_soon(on_exit, node)


async def _run(store: str | None, base_port: int, work_dir: Path, lease: float | None) -> int:
    run_id = new_run_id()
    urls = store_urls(store, work_dir / "stores", run_id)
    await prepare_stores(urls)
    await apply_seed_plan(urls.commerce, seed_plan(DEMO_CARTS))
    deployment = plan_deployment(run_id=run_id, stores=urls, base_port=base_port,
                                 runner_mode=False, lease=lease)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_deployment(deployment, work_dir,
                                   secret=secrets.token_hex(32)) as nodes:
            if await wait_ready(nodes):
                api = deployment.node("api-a").base_url
                print(f"shoppingmall ready; logs in {work_dir / 'logs'}; carts "
                      f"{', '.join(p + '<anything>' for p in PREFIXES)} (succeeds, fails "
                      "at inventory, fails at payment), payment methods "
                      f"{', '.join(PAYMENT_METHODS)}. Try: curl -s -XPOST {api}/orders -H "
                      "'content-type: application/json' -d '{\"cartId\":\"cart-ok-1\","
                      "\"shippingAddressId\":\"addr-1\",\"paymentMethodId\":\"pm-ok\","
                      "\"idempotencyKey\":\"k-1\"}'  (Ctrl-C stops)", flush=True)
                await _watch(nodes, signals)
                outcome = 0
            else:
                outcome = 1
    print("shoppingmall stopped", flush=True)
    return outcome


def serve(store: str | None, base_port: int = DEFAULT_BASE_PORT,
          work_dir: str | None = None, lease: float | None = None) -> int:
    """The ``serve`` subcommand; its exit code (2: a bad ``lease``)."""
    if lease is not None:
        try:
            zl.TimingOptions(lease=lease)
        except zl.InvalidConfiguration as exc:
            print(f"shoppingmall serve --lease: {exc.message}", file=sys.stderr, flush=True)
            return 2
    directory = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="shoppingmall-"))
    print(f"shoppingmall work directory {directory}", flush=True)
    return trio.run(_run, store, base_port, directory, lease)

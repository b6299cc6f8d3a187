"""One node process: ``python -m zlink_trio.samples.shoppingmall node <NodeId> --deployment FILE``.

The launcher (``processes``) starts four of these (five in runner mode: the
fixture node, ``topology.FIXTURE_NODE``, with its placement weight). Each reads the deployment
file (``topology``), runs its role through the role's entry point
(``parts``) until SIGINT or SIGTERM, and then leaves every ``async with`` in
order, so the node removes its claim from the Location Store:

- an API node runs ``run_api_node`` on its HTTP port;
- a Workflow node runs ``run_workflow_node`` with ``stop_on=(SIGINT, SIGTERM)``: the
  signal stops the node itself, which first moves its orders to the other Workflow
  nodes that serve them (``zl.open_node``'s stop is a drain); in runner mode it also gets a
  fixture control and serves the runner-only hooks (``hooks_app``) on its
  hooks port, and prints ``shoppingmall-runner hooks node=<NodeId>`` once they
  listen (a line of the runner's own, not an evidence row).

The mesh secret comes from the environment (:data:`SECRET_ENV`), never argv.
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

import trio

from zlink_trio.samples.shoppingmall.runner import parts
from zlink_trio.samples.shoppingmall.runner.topology import HOST, Deployment
from zlink_trio.samples.shoppingmall.seeds import derived_cart_document

if TYPE_CHECKING:
    from zlink_trio.samples.shoppingmall.runner.topology import NodeSpec

__all__ = ("HOOKS_READY", "SECRET_ENV", "main", "run_node")

SECRET_ENV: Final = "SHOPPINGMALL_MESH_SECRET"
#: Printed by a Workflow node once its runner-only hooks listen.
HOOKS_READY: Final = "shoppingmall-runner hooks node=<NodeId>"


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _serve_hooks(spec: NodeSpec, deployment: Deployment, node: Any,
                       fixtures: Any) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from zlink_trio.samples.shoppingmall.runner.hooks_app import HookContext, build_hooks_app
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_store import (
        open_order_event_store,
    )
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.inventory import (
        open_inventory,
    )
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.payment import (
        open_payment,
    )
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (  # noqa: E501
        open_order_read_model_store,
    )

    urls = deployment.stores
    async with AsyncExitStack() as stack:
        ctx = HookContext(
            node=node, node_id=spec.node_id, fixtures=fixtures, commerce_url=urls.commerce,
            events=await stack.enter_async_context(open_order_event_store(urls.events)),
            read_models=await stack.enter_async_context(
                open_order_read_model_store(urls.read_model)),
            inventory=await stack.enter_async_context(open_inventory(urls.commerce)),
            payment=await stack.enter_async_context(open_payment(urls.commerce)))
        config = Config()
        config.bind = [f"{HOST}:{spec.hooks_port}"]
        config.accesslog = None
        async with trio.open_nursery() as nursery:
            await nursery.start(partial(serve, cast("Any", build_hooks_app(ctx)), config))
            _say(HOOKS_READY.replace("<NodeId>", spec.node_id))


async def run_node(deployment: Deployment, node_id: str, secret: str | None) -> None:
    """Run node ``node_id`` of ``deployment`` until cancelled (module docstring)."""
    spec = deployment.node(node_id)
    urls = deployment.stores
    if spec.role == "api":
        run_api_node = parts.load(parts.API_PROCESS)
        await run_api_node(node_id, http_port=spec.http_port, store_url=urls.location,
                           app_store_url=urls.commerce, read_model_url=urls.read_model,
                           relocation_store_url=urls.relocation, secret=secret,
                           # serve: any cart ID with a seed prefix; the smoke seeds its own
                           derive_cart=None if deployment.runner_mode else derived_cart_document,
                           lease=deployment.lease)
        return
    run_workflow_node = parts.load(parts.WORKFLOW_PROCESS)
    fixtures = parts.new_fixture_control() if deployment.runner_mode else None
    weight = {} if spec.placement_weight is None else {"placement_weight": spec.placement_weight}
    lease = {} if deployment.lease is None else {"lease": deployment.lease}
    async with trio.open_nursery() as nursery:
        async def workflow(task_status: trio.TaskStatus[Any]) -> None:
            # SIGINT / SIGTERM stop the node (``stop_on``): its orders move to the other
            # Workflow nodes that serve them, then it closes; the hooks go with it.
            await run_workflow_node(
                node_id, store_url=urls.location, events_url=urls.events,
                read_model_url=urls.read_model, commerce_url=urls.commerce, fixtures=fixtures,
                relocation_store=urls.relocation, secret=secret,
                stop_on=(signal.SIGINT, signal.SIGTERM), task_status=task_status,
                **weight, **lease)
            nursery.cancel_scope.cancel()

        node = await nursery.start(workflow)
        if deployment.runner_mode and spec.hooks_port:
            await _serve_hooks(spec, deployment, node, fixtures)


async def _until_signalled(deployment: Deployment, node_id: str, secret: str | None) -> None:
    if deployment.node(node_id).role != "api":
        await run_node(deployment, node_id, secret)  # the node itself stops on the signals
        return
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            async def stop_on_signal() -> None:
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    return
            nursery.start_soon(stop_on_signal)
            await run_node(deployment, node_id, secret)
            nursery.cancel_scope.cancel()


def main(node_id: str, deployment_file: str) -> int:
    """The ``node`` subcommand; the process's exit code."""
    deployment = Deployment.from_json(Path(deployment_file).read_text(encoding="utf-8"))
    secret = os.environ.get(SECRET_ENV) or None
    trio.run(_until_signalled, deployment, node_id, secret)
    return 0

"""One CommerceApi node: an object client of the workflow Mesh, its stores, Hypercorn on Trio.

Theory of operation
-------------------
:func:`run_api_node` is what a CommerceApi process runs (a deployment has two of
them, ``api-a`` and ``api-b``). Inside one Trio program it opens, in order:

1. ``zl.open_node(node_id, mesh="shoppingmall.workflow", spots=[])`` -- the node
   joins the RouteMesh as an object client: it serves no Spot type, so the
   framework never places an order on it, and its ``node.client`` reaches
   every OrderWorkflowSpot by OrderId wherever it lives;
2. the Location Store once more, read-only, for the object-route readiness
   watcher (``readiness``);
3. the CommerceStateStore and the OrderReadModelStore, by URL;
4. Hypercorn's Trio worker (``hypercorn.trio.serve``) serving the Starlette app
   (``app``) on ``127.0.0.1:<http_port>``.

When Hypercorn listens it prints ``shoppingmall-ready kind=http node=<NodeId>``;
the watcher then prints ``shoppingmall-ready kind=object-route node=<NodeId>
target=<WorkflowNodeId>`` once for each Workflow node it sees (the evidence rows of
``docs/shoppingmall.md``). The
function runs until it is cancelled; leaving closes everything in reverse
order (Hypercorn stops accepting, the stores close, the node drains and
removes its claim).

Nothing in the configuration names a Workflow node, NodeRid or endpoint (a
caller never chooses the owner): the API node finds the owners through the
Location Store it shares with them.
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from functools import partial
from typing import TYPE_CHECKING, cast

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.commerce_api.app import build_app
from zlink_trio.samples.shoppingmall.server.commerce_api.markers import (
    http_ready_line,
    print_line,
)
from zlink_trio.samples.shoppingmall.server.commerce_api.orders import OrderService
from zlink_trio.samples.shoppingmall.server.commerce_api.readiness import watch_object_routes
from zlink_trio.samples.shoppingmall.server.commerce_api.workflow_calls import (
    DEFAULT_WORKFLOW_TIMEOUT,
    OrderWorkflowCalls,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (
    open_order_read_model_store,
)
from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
    open_commerce_state_store,
)
from zlink_trio.samples.shoppingmall.shared.contracts import WORKFLOW_MESH

if TYPE_CHECKING:
    from collections.abc import Callable

    from hypercorn.typing import ASGIFramework

    from zlink_trio.samples.shoppingmall.server.commerce_api.markers import LogLine

__all__ = ("HTTP_HOST", "run_api_node", "store_clock")

#: The HTTP edge listens on loopback only.
HTTP_HOST = "127.0.0.1"


def store_clock(store_url: str) -> Callable[[], float]:
    """The clock a store's leases are stamped with, as ``zl.open_node`` chooses it.

    Trio's clock for an in-process ``memory://`` store, wall-clock time for a
    store other processes share.
    """
    return trio.current_time if store_url.lower().startswith("memory://") else time.time


async def run_api_node(
    node_id: str,
    *,
    http_port: int,
    store_url: str,
    app_store_url: str,
    read_model_url: str | None = None,
    relocation_store_url: str | None = None,
    secret: bytes | str | None = None,
    listen: str | None = "127.0.0.1:0",
    workflow_timeout: float = DEFAULT_WORKFLOW_TIMEOUT,
    log: LogLine = print_line,
    clock: Callable[[], float] | None = None,
    derive_cart: Callable[[str], str | None] | None = None,
    lease: float | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run CommerceApi node ``node_id`` until cancelled (module docstring).

    ``store_url`` is the framework's Location Store (``relocation_store_url``
    its Relocation Store, default: the same backend), shared with the
    Workflow nodes; ``app_store_url`` the CommerceStateStore and
    ``read_model_url`` the OrderReadModelStore (default: ``app_store_url``;
    the stores keep their own tables or key namespaces, so they may share a
    file or a prefix). ``secret`` authenticates the mesh links (the same on
    every node); ``listen`` is the node's mesh address. ``http_port`` is the
    HTTP port on 127.0.0.1 (0: any free port). ``workflow_timeout`` bounds each
    workflow request; ``log`` receives the evidence lines (default: standard
    output); ``clock`` is the store clock (default :func:`store_clock`).
    ``derive_cart`` builds the snapshot of a cart the store lacks (``serve``
    passes its seed rule, so any ``cart-ok-…`` ID works; ``None``: such a cart
    is a ValidationError). ``lease`` is the node's lease in seconds (``zl.open_node``'s
    ``lease``; ``None``: its default).

    ``task_status`` (for ``nursery.start``) is started with the HTTP base URL
    (``http://127.0.0.1:<port>``) once the edge listens and the ready line is
    printed. Raises :class:`zlink_trio.InvalidConfiguration` for a bad option
    or URL and :class:`zlink_trio.StoreUnavailable` when a store cannot be
    reached, before the HTTP edge opens.
    """
    if isinstance(http_port, bool) or not isinstance(http_port, int) or \
            not 0 <= http_port <= 65535:
        raise zl.InvalidConfiguration(f"http_port must be an int in 0..65535, got {http_port!r}")
    read_clock = store_clock(store_url) if clock is None else clock
    async with AsyncExitStack() as stack:
        node = await stack.enter_async_context(zl.open_node(
            node_id, store=store_url, relocation_store=relocation_store_url,
            mesh=WORKFLOW_MESH, spots=[], listen=listen, secret=secret,
            injected=zl.InjectedOptions(clock=read_clock),
            timing=None if lease is None else zl.TimingOptions(lease=lease)))
        directory = await stack.enter_async_context(zl.open_store(store_url))
        commerce = await stack.enter_async_context(open_commerce_state_store(app_store_url))
        read_model = await stack.enter_async_context(open_order_read_model_store(
            app_store_url if read_model_url is None else read_model_url))
        service = OrderService(
            workflow=OrderWorkflowCalls(node.client, timeout=workflow_timeout),
            commerce=commerce, read_model=read_model, log=log, derive_cart=derive_cart)
        # Starlette's and Hypercorn's ASGI type declarations differ; both follow ASGI 3.
        app = cast("ASGIFramework", build_app(service))
        config = Config()
        config.bind = [f"{HTTP_HOST}:{http_port}"]
        async with trio.open_nursery() as nursery:
            binds: list[str] = await nursery.start(partial(serve, app, config))
            log(http_ready_line(node.node_id))
            await nursery.start(partial(watch_object_routes, directory.location, node.node_id,
                                        log, clock=read_clock))
            task_status.started(binds[0])

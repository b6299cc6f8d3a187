"""One OrderWorkflow node (two per deployment): the stores, the Spot, the node, until cancelled.

The process runner calls :func:`run_workflow_node` (directly, or as
``await nursery.start(run_workflow_node, ...)`` to learn when the node
serves). It opens the application stores by URL
(``infrastructure.services``), builds the OrderWorkflowSpot for them, and
runs ``zl.open_node(node_id, mesh="shoppingmall.workflow", store=store_url,
spots=[OrderWorkflowSpot])`` until it is cancelled. Evidence lines go to
standard output (``infrastructure.evidence``).

``fixtures`` is for runner mode only: the runner passes a
``FixtureControl`` (``infrastructure.fixture_control``) and drives it
through its own hooks; without it the node runs no fixture at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.order_workflow_spot import (  # noqa: E501
    order_workflow_spot,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.services import (
    open_workflow_services,
)
from zlink_trio.samples.shoppingmall.shared.contracts import WORKFLOW_MESH

if TYPE_CHECKING:
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.evidence import (
        Evidence,
    )
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.fixture_control import (  # noqa: E501
        FixtureControl,
    )

__all__ = ("run_workflow_node",)


async def run_workflow_node(
    node_id: str, *, store_url: str, events_url: str, read_model_url: str, commerce_url: str,
    fixtures: FixtureControl | None = None, evidence: Evidence | None = None,
    task_status: trio.TaskStatus[zl.Node] = trio.TASK_STATUS_IGNORED, **node_options: Any,
) -> None:
    """Serve OrderWorkflowSpot on node ``node_id`` until cancelled.

    ``store_url``: the framework's Location Store (``zl.open_node(store=...)``,
    shared by every CommerceApi and Workflow node); ``events_url``,
    ``read_model_url``, ``commerce_url``: the OrderEventStore, the
    OrderReadModelStore and the CommerceStateStore (with the Inventory and
    Payment modules), each ``sqlite:///path.db`` or ``redis://...``.
    ``fixtures``: the runner's FixtureControl (runner mode only);
    ``evidence``: where the evidence lines go (default stdout).
    ``node_options`` go to ``zl.open_node`` as they are (``secret``,
    ``listen``, ``relocation_store``, ``placement_weight``, ...).
    ``task_status.started`` gets the open :class:`zl.Node`. Raises what
    opening a store or the node raises (``zl.InvalidConfiguration``,
    ``zl.StoreUnavailable``).
    """
    async with open_workflow_services(node_id, events_url=events_url,
                                      read_model_url=read_model_url,
                                      commerce_url=commerce_url, evidence=evidence,
                                      control=fixtures) as services:
        spot = order_workflow_spot(services)
        async with zl.open_node(node_id, store=store_url, mesh=WORKFLOW_MESH, spots=[spot],
                                **node_options) as node:
            task_status.started(node)
            await trio.sleep_forever()

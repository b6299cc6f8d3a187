"""Everything one Workflow node's order Spots share: the ports, the evidence, the control.

:func:`open_workflow_services` opens the three application resources
(``docs/shoppingmall.md``, "Topology") by URL -- the OrderEventStore, the
OrderReadModelStore and the CommerceStateStore (which also holds the Inventory
and Payment modules' seeds and first results) -- and adapts them to the
application's ports.
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

import attrs

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.application import (
    RUN_FREELY,
    ContinuationControl,
    OrderPorts,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.commerce_adapter import (
    CommerceIdempotency,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.effects_adapter import (
    ModuleEffects,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_store import (
    open_order_event_store,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.evidence import (
    Evidence,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.inventory import (
    open_inventory,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.payment import (
    open_payment,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.projection_adapter import (  # noqa: E501
    ReadModelProjection,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (
    open_order_read_model_store,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.stream_adapter import (
    EventStoreStream,
)
from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
    open_commerce_state_store,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ("WorkflowServices", "open_workflow_services", "wall_clock_ms")


def wall_clock_ms() -> int:
    """Milliseconds since the Unix epoch (the envelopes' and terminal events' stamps)."""
    return time.time_ns() // 1_000_000


@attrs.frozen(kw_only=True)
class WorkflowServices:
    """What the node's OrderWorkflow Spots use; ``node_id`` names the node in the evidence."""

    node_id: str
    ports: OrderPorts
    evidence: Evidence
    control: ContinuationControl = RUN_FREELY


@asynccontextmanager
async def open_workflow_services(
    node_id: str, *, events_url: str, read_model_url: str, commerce_url: str,
    evidence: Evidence | None = None, control: ContinuationControl | None = None,
) -> AsyncIterator[WorkflowServices]:
    """Open the stores and modules by URL and yield the node's :class:`WorkflowServices`.

    ``events_url``: the OrderEventStore; ``read_model_url``: the
    OrderReadModelStore; ``commerce_url``: the CommerceStateStore, the
    Inventory and the Payment module (the sample keeps their results there). Each is
    ``sqlite:///path.db`` or ``redis://...`` (``storage.store_url``). ``evidence``
    defaults to standard output, ``control`` to ``RUN_FREELY`` (no fixtures).
    Raises :class:`zlink_trio.InvalidConfiguration` for a malformed URL and
    :class:`zlink_trio.StoreUnavailable` when a store cannot be reached.
    """
    evidence = evidence or Evidence()
    codec = zl.MessageCodec()
    async with AsyncExitStack() as stack:
        events = await stack.enter_async_context(open_order_event_store(events_url))
        read_models = await stack.enter_async_context(
            open_order_read_model_store(read_model_url))
        commerce = await stack.enter_async_context(open_commerce_state_store(commerce_url))
        inventory = await stack.enter_async_context(open_inventory(commerce_url))
        payment = await stack.enter_async_context(open_payment(commerce_url))
        ports = OrderPorts(
            stream=EventStoreStream(events, codec),
            projection=ReadModelProjection(read_models, codec),
            effects=ModuleEffects(inventory=inventory, payment=payment, commerce=commerce,
                                  node_id=node_id, evidence=evidence),
            idempotency=CommerceIdempotency(commerce),
            clock=wall_clock_ms,
        )
        yield WorkflowServices(node_id=node_id, ports=ports, evidence=evidence,
                               control=control or RUN_FREELY)

"""How a caller (CommerceApi, a recovery or maintenance trigger) reaches OrderWorkflowSpot.

Every call is a Spot request to the global Spot ID = the OrderId with
Instance intent for ``shoppingmall.order-workflow``: the framework finds the
current owner, or cold-activates the order on an eligible node; the caller
never names a node or an endpoint (§5, §9.3-4). The calling node must be
opened in Mesh ``shoppingmall.workflow`` (``order_workflow_spot.MESH``).

``seconds`` is the call's one end-to-end deadline (resolve, activation,
dispatch and reply: the builder's ``.timeout``). A timeout, a
cancellation, a route error or an ``Unavailable`` owner is raised as the
framework's error, never turned into a reply (§6.2), and no
call is resent. One outcome is an answer: a continue or a rebuild of an
order that has no stream returns ``None`` (nothing was created, §9.3-3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.order_workflow_spot import (  # noqa: E501
    STABLE_TYPE,
)
from zlink_trio.samples.shoppingmall.shared.contracts import (
    ContinueOrderWorkflowReq,
    ContinueOrderWorkflowRes,
    OrderState,
    RebuildOrderProjectionReq,
    RebuildOrderProjectionRes,
    StartOrderWorkflowReq,
    StartOrderWorkflowRes,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable

__all__ = ("continue_order_workflow", "is_unknown_order", "rebuild_order_projection",
           "start_order_workflow")

_UNKNOWN: Final = "UnknownOrder"


def is_unknown_order(error: zl.HandlerError) -> bool:
    """Whether ``error`` is the Spot's refusal of an order with no stream.

    On the owner's node ``error_type`` says it; across nodes only the message
    does (``error_type`` does not cross the wire), so both are read.
    """
    return error.error_type == _UNKNOWN or f"raised {_UNKNOWN}:" in error.message


async def _unless_unknown(call: Awaitable[OrderState]) -> OrderState | None:
    try:
        return await call
    except zl.HandlerError as error:
        if is_unknown_order(error):
            return None
        raise


async def start_order_workflow(client: zl.SpotClient, msg: StartOrderWorkflowReq, *,
                               seconds: float) -> OrderState:
    """StartOrderWorkflowReq: the state once Created is recorded and projected (§6.2)."""
    res = await client.request(msg.order_id, msg, reply=StartOrderWorkflowRes) \
        .instance_spot(STABLE_TYPE).timeout(seconds)
    return res.state


async def continue_order_workflow(client: zl.SpotClient, msg: ContinueOrderWorkflowReq, *,
                                  seconds: float) -> OrderState | None:
    """ContinueOrderWorkflowReq: the state after the steps it ran; ``None``: no such order."""
    async def call() -> OrderState:
        res = await client.request(msg.order_id, msg, reply=ContinueOrderWorkflowRes) \
            .instance_spot(STABLE_TYPE).timeout(seconds)
        return res.state
    return await _unless_unknown(call())


async def rebuild_order_projection(client: zl.SpotClient, msg: RebuildOrderProjectionReq, *,
                                   seconds: float) -> OrderState | None:
    """RebuildOrderProjectionReq: the state the replay produced; ``None``: no such order."""
    async def call() -> OrderState:
        res = await client.request(msg.order_id, msg, reply=RebuildOrderProjectionRes) \
            .instance_spot(STABLE_TYPE).timeout(seconds)
        return res.state
    return await _unless_unknown(call())

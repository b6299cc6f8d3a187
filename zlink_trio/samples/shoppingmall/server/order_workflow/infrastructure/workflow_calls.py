"""How a caller (CommerceApi, a recovery or maintenance trigger) reaches OrderWorkflowSpot.

Every call is a Spot request to the global Spot ID = the OrderId with
Instance intent for ``shoppingmall.order-workflow``: the framework finds the
current owner, or cold-activates the order on an eligible node; the caller
never names a node or an endpoint. The calling node must be
opened in Mesh ``shoppingmall.workflow`` (``contracts.WORKFLOW_MESH``).

``seconds`` is the call's one end-to-end deadline (resolve, activation,
dispatch and reply: the builder's ``.timeout``). A timeout, a
cancellation, a route error or an ``Unavailable`` owner is raised as the
framework's error, never turned into a reply, and no
call that may have run is resent. The one exception is ``zl.StaleRoute``
("the message was not run"): the owner a route named had just closed (an
order's owner closes itself at termination), so the call is sent again --
the framework resolves afresh and activates the next generation -- at most
:data:`STALE_ROUTE_RETRIES` times, within the same deadline. One outcome is
an answer: a continue or a rebuild of an
order that has no stream returns ``None`` (nothing was created).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeVar

import trio

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.shared.contracts import (
    ORDER_WORKFLOW_TYPE,
    ContinueOrderWorkflowReq,
    ContinueOrderWorkflowRes,
    OrderState,
    RebuildOrderProjectionReq,
    RebuildOrderProjectionRes,
    StartOrderWorkflowReq,
    StartOrderWorkflowRes,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    R = TypeVar("R")

__all__ = ("STALE_ROUTE_RETRIES", "continue_order_workflow", "is_unknown_order",
           "rebuild_order_projection", "start_order_workflow")

_UNKNOWN: Final = "UnknownOrder"
#: How often a call refused with StaleRoute (not run) is sent again.
STALE_ROUTE_RETRIES: Final = 3


def is_unknown_order(error: zl.HandlerError) -> bool:
    """Whether ``error`` is the Spot's refusal of an order with no stream."""
    return error.error_type == _UNKNOWN


async def _request(client: zl.SpotClient, order_id: str, msg: object, reply: type[R],
                   seconds: float) -> R:
    deadline = trio.current_time() + seconds
    for attempt in range(STALE_ROUTE_RETRIES + 1):
        left = max(deadline - trio.current_time(), 0.001)
        try:
            return await client.request(order_id, msg, reply=reply) \
                .instance_spot(ORDER_WORKFLOW_TYPE).timeout(left)
        except zl.StaleRoute:
            if attempt == STALE_ROUTE_RETRIES:
                raise
    raise AssertionError("unreachable")


async def _unless_unknown(call: Callable[[], Awaitable[OrderState]]) -> OrderState | None:
    try:
        return await call()
    except zl.HandlerError as error:
        if is_unknown_order(error):
            return None
        raise


async def start_order_workflow(client: zl.SpotClient, msg: StartOrderWorkflowReq, *,
                               seconds: float) -> OrderState:
    """StartOrderWorkflowReq: the state once Created is recorded and projected."""
    res = await _request(client, msg.order_id, msg, StartOrderWorkflowRes, seconds)
    return res.state


async def continue_order_workflow(client: zl.SpotClient, msg: ContinueOrderWorkflowReq, *,
                                  seconds: float) -> OrderState | None:
    """ContinueOrderWorkflowReq: the state after the steps it ran; ``None``: no such order."""
    async def call() -> OrderState:
        res = await _request(client, msg.order_id, msg, ContinueOrderWorkflowRes, seconds)
        return res.state
    return await _unless_unknown(call)


async def rebuild_order_projection(client: zl.SpotClient, msg: RebuildOrderProjectionReq, *,
                                   seconds: float) -> OrderState | None:
    """RebuildOrderProjectionReq: the state the replay produced; ``None``: no such order."""
    async def call() -> OrderState:
        res = await _request(client, msg.order_id, msg, RebuildOrderProjectionRes, seconds)
        return res.state
    return await _unless_unknown(call)

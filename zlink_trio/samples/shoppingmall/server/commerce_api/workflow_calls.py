"""CommerceApi's three requests to OrderWorkflowSpot, as Spot requests by OrderId.

Theory of operation
-------------------
Each call is ``client.request(order_id, msg, reply=...)`` with Instance intent
for the stable type :data:`ORDER_WORKFLOW_TYPE`, placed in the Mesh
:data:`WORKFLOW_MESH` (``.instance_spot(...).in_mesh(...)``), under one
end-to-end deadline (``.timeout(...)``). The OrderId is the global Spot ID: the
framework resolves the current Ready owner, or -- when the order's Spot is
Missing -- cold-activates it on a node that serves the type. Nothing here names
an owner NodeRid, an endpoint or a node (a caller never chooses the owner); the
API node is an object client of the Mesh and serves no Spot type itself.

Instance intent on every call, not only the start: a continue or a rebuild must
reach an order whose Spot was evicted or whose Workflow process restarted
(self-check items 9.2-2 to 9.2-4); the Spot then replays the stream. For an
OrderId with no stream the workflow records nothing and refuses (item 9.3-3).

Nothing that may have run is retried: the sample never resubmits a failed
operation to a different owner on its own (``docs/shoppingmall.md``, "Who sends
what, and when it completes"). The one resend is a call refused with
:class:`zlink_trio.StaleRoute` -- the framework's word that the message was *not
run* (the owner a route named had just closed, or had not yet registered an
activation it committed): it is sent again, which resolves afresh, at most
:data:`STALE_ROUTE_RESENDS` times within the same deadline (the framework fails
the call and only the next one resolves afresh, ``docs/mesh.md``, "Calls to
another node" -- this resend is that next call). A call ends with the reply's
state or a typed error: :class:`zlink_trio.Unavailable` when the Ready owner
cannot be reached (its process died: a Ready owner is never re-created
elsewhere), :class:`zlink_trio.DeadlineExceeded` when the deadline passed,
:class:`zlink_trio.HandlerError` when the workflow's handler raised (its
``error_type`` names what it raised).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeVar

import trio

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.shared.contracts import (
    ORDER_WORKFLOW_TYPE,
    WORKFLOW_MESH,
    ContinueOrderWorkflowReq,
    ContinueOrderWorkflowRes,
    RebuildOrderProjectionReq,
    RebuildOrderProjectionRes,
    StartOrderWorkflowReq,
    StartOrderWorkflowRes,
)

if TYPE_CHECKING:
    from zlink_trio.samples.shoppingmall.shared.contracts import OrderState

__all__ = ("DEFAULT_WORKFLOW_TIMEOUT", "STALE_ROUTE_RESENDS", "OrderWorkflowCalls")

R = TypeVar("R")

#: How often a request refused with StaleRoute (not run) is sent again.
STALE_ROUTE_RESENDS: Final = 3

#: Seconds each workflow request may take, end to end, by default.
DEFAULT_WORKFLOW_TIMEOUT: Final = 10.0


class OrderWorkflowCalls:
    """The Spot requests CommerceApi sends; ``client`` is the API node's ``node.client``.

    ``timeout`` bounds each call end to end (resolve, cold activation,
    dispatch, reply); ``mesh`` is where a Missing order's Spot is placed.
    """

    def __init__(self, client: zl.SpotClient, *, timeout: float = DEFAULT_WORKFLOW_TIMEOUT,
                 mesh: str = WORKFLOW_MESH) -> None:
        if not timeout > 0:
            raise zl.InvalidConfiguration(f"timeout must be > 0 seconds, got {timeout!r}")
        self._client = client
        self._timeout = timeout
        self._mesh = mesh

    async def start(self, req: StartOrderWorkflowReq) -> OrderState:
        """StartOrderWorkflowReq: the state once Created is recorded and projected."""
        res = await self._request(req.order_id, req, StartOrderWorkflowRes)
        return res.state

    async def continue_order(self, order_id: str, source_command_id: str) -> OrderState:
        """ContinueOrderWorkflowReq: the state after the next possible steps ran."""
        res = await self._request(
            order_id, ContinueOrderWorkflowReq(order_id, source_command_id),
            ContinueOrderWorkflowRes)
        return res.state

    async def rebuild_projection(self, order_id: str, source_command_id: str) -> OrderState:
        """RebuildOrderProjectionReq: the state replayed from the stream alone."""
        res = await self._request(
            order_id, RebuildOrderProjectionReq(order_id, source_command_id),
            RebuildOrderProjectionRes)
        return res.state

    async def _request(self, order_id: str, msg: object, reply: type[R]) -> R:
        deadline = trio.current_time() + self._timeout
        for resend in range(STALE_ROUTE_RESENDS + 1):
            left = deadline - trio.current_time()
            if left <= 0:
                break
            try:
                return await (self._client.request(order_id, msg, reply=reply)
                              .instance_spot(ORDER_WORKFLOW_TYPE).in_mesh(self._mesh)
                              .timeout(left))
            except zl.StaleRoute:
                if resend == STALE_ROUTE_RESENDS:
                    raise
        raise zl.DeadlineExceeded(
            f"the request to order {order_id!r} found only stale routes before its deadline "
            f"({self._timeout} s); it was not run. Retry it")

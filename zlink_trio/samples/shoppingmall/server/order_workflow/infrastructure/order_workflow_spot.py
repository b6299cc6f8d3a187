"""OrderWorkflowSpot: the framework adapter, one Instance Spot per OrderId.

Theory of operation
-------------------
Stable type ``shoppingmall.order-workflow`` (``contracts.ORDER_WORKFLOW_TYPE``) in Mesh
``shoppingmall.workflow`` (``contracts.WORKFLOW_MESH``); the Spot ID is the OrderId. It
declares ``zl.RecreateOnRelocation()``: no application state travels with a
move -- the target's factory replays the order's stream (``on_activate``),
under the same ObjectGeneration, and goes on from the fold's next step.

:func:`order_workflow_spot` builds the Spot class for one node's
:class:`~.services.WorkflowServices` (the stores travel by closure: the
framework constructs a Spot as ``cls(ctx)``). Its handlers, typed with the
JSON contracts (``shared.contracts``):

``StartOrderWorkflowReq``
    records OrderStartedEvent once, projects Created, marks the mapping
    started, and replies at the Created boundary. Before replying it arms a
    timer (delay 0): the **background continuation** then runs reserve ->
    authorize -> confirm (or compensation) as the Spot's own later turns, one
    step per turn, so the reply never waits for it and other messages
    (a continue, a relocation's seal) fit between the steps.
``ContinueOrderWorkflowReq``
    runs every step the fold allows and replies with the state, the
    projection written last.
``RebuildOrderProjectionReq``
    folds the stream afresh and rewrites the read model.

A continue or a rebuild that cold-activated an order with no stream records
and projects nothing, closes the incarnation it activated (so no runtime
instance is left either) and fails with ``UnknownOrder``, which the
caller sees as a ``zl.HandlerError`` with ``error_type == "UnknownOrder"``.
**Termination closes the owner.** When the background continuation finds the
order terminal it closes its incarnation (``ctx.close()``): the authority is
released, and the next command for the OrderId -- a duplicate start, a continue,
a rebuild -- activates a new generation, which replays the stream
(``docs/shoppingmall.md``, "Lifecycle and the failure boundary"). An order a
continue drove to its end stays until idle eviction. There is no GetOrderState
handler: lookups read the read model (``projection_adapter.read_order_state``)
and activate nothing.

A continuation turn that finds a store unavailable tries again
:data:`STORE_RETRY` s later; any other error ends the continuation (the
framework logs it) and a ContinueOrderWorkflowReq resumes the order.

**Relocation evidence.** A continuation tick that runs in an incarnation
that never armed a timer itself can only be a timer moved by a planned
relocation (the factory arms none, and timers do not survive a close). That
tick writes ``shoppingmall-order replayed order=<id> generation=<N>`` once,
as it resumes at the next step.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.application import (
    OrderWorkflow,
    Pace,
    UnknownOrder,
    order_state_of,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.domain import (
    Finished,
    NotStarted,
    OrderLine,
    StartOrder,
    next_step,
)
from zlink_trio.samples.shoppingmall.shared.contracts import (
    ORDER_WORKFLOW_TYPE,
    ContinueOrderWorkflowReq,
    ContinueOrderWorkflowRes,
    RebuildOrderProjectionReq,
    RebuildOrderProjectionRes,
    StartOrderWorkflowReq,
    StartOrderWorkflowRes,
)

if TYPE_CHECKING:
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.services import (
        WorkflowServices,
    )

__all__ = ("STORE_RETRY", "order_workflow_spot")

#: Seconds the continuation waits before it tries again when a store is unavailable.
STORE_RETRY: Final = 1.0

LOGGER: Final = logging.getLogger(__name__)


def _start_command(msg: StartOrderWorkflowReq) -> StartOrder:
    return StartOrder(order_id=msg.order_id, cart_id=msg.cart_id,
                      shipping_address_id=msg.shipping_address_id,
                      lines=tuple(OrderLine(line.sku, line.quantity) for line in msg.lines),
                      amount=msg.amount, currency=msg.currency,
                      source_command_id=msg.source_command_id)


def order_workflow_spot(services: WorkflowServices) -> type[object]:
    """The OrderWorkflowSpot class for a node whose Spots use ``services``."""

    @zl.instance_spot(ORDER_WORKFLOW_TYPE, relocation=zl.RecreateOnRelocation())
    class OrderWorkflowSpot:
        """One order's owner (module docstring)."""

        def __init__(self, ctx: zl.SpotContext) -> None:
            self._ctx = ctx
            self._workflow = OrderWorkflow(ctx.spot_id, services.ports)
            self._arms = 0  # timers this incarnation armed itself
            self._pending = False  # a continuation tick is armed and has not run
            self._moved = False  # this incarnation runs a relocated continuation
            self._replay_reported = False

        async def on_activate(self) -> None:
            state = await self._workflow.replay()
            services.evidence.activated(state.order_id, self._ctx.generation,
                                        services.node_id, state.version)

        def _check(self, order_id: str) -> None:
            if order_id != self._ctx.spot_id:
                raise zl.InvalidOperation(f"a command for order {order_id!r} reached the "
                                          f"owner of order {self._ctx.spot_id!r}")

        def _arm(self, delay: float) -> None:
            if self._pending:
                return
            try:
                self._ctx.start_timer(delay, self._continuation)
            except zl.InvalidOperation:
                return  # the incarnation is closing: a later continue resumes the order
            self._arms += 1
            self._pending = True

        def _unknown(self, order_id: str) -> UnknownOrder:
            if not self._pending:
                self._ctx.close()  # leave no runtime instance for an order that does not exist
            return UnknownOrder(order_id)

        @zl.handler
        async def start(self, msg: StartOrderWorkflowReq) -> StartOrderWorkflowRes:
            self._check(msg.order_id)
            outcome = await self._workflow.start(
                _start_command(msg), idempotency_key=msg.idempotency_key,
                payment_method_id=msg.payment_method_id)
            if outcome.recorded:
                services.evidence.started(msg.order_id, self._ctx.spot_id)
            if not outcome.state.terminal:
                self._arm(0)
            return StartOrderWorkflowRes(order_state_of(outcome.state))

        @zl.handler
        async def continue_order(self, msg: ContinueOrderWorkflowReq,
                                 ) -> ContinueOrderWorkflowRes:
            self._check(msg.order_id)
            try:
                state = await self._workflow.continue_order()
            except UnknownOrder:
                raise self._unknown(msg.order_id) from None
            return ContinueOrderWorkflowRes(order_state_of(state))

        @zl.handler
        async def rebuild(self, msg: RebuildOrderProjectionReq) -> RebuildOrderProjectionRes:
            self._check(msg.order_id)
            try:
                state = await self._workflow.rebuild()
            except UnknownOrder:
                raise self._unknown(msg.order_id) from None
            return RebuildOrderProjectionRes(order_state_of(state))

        async def _continuation(self) -> None:
            """One turn of the background continuation: pace, run one step, arm the next."""
            self._pending = False
            if self._arms == 0:
                self._moved = True
            try:
                await self._continue_once()
            except zl.StoreUnavailable as error:
                LOGGER.warning("order %r: the continuation waits %s s for a store: %s",
                               self._ctx.spot_id, STORE_RETRY, error.message)
                self._arm(STORE_RETRY)

        async def _continue_once(self) -> None:
            state = await self._workflow.replay()
            step = next_step(state)
            if isinstance(step, Finished):
                self._ctx.close()  # the order's work is done: release its authority
                return
            if isinstance(step, NotStarted):
                return
            control = services.control
            pace = control.pace(state)
            if pace is Pace.STOP:
                return
            if pace is Pace.PARK:
                self._arm(control.park_poll)
                return
            if self._moved and not self._replay_reported:
                self._replay_reported = True
                services.evidence.replayed(state.order_id, self._ctx.generation)
            outcome = await self._workflow.step(skip_projection=control.skip_projection)
            if outcome.recorded:
                self._arm(0)

    return OrderWorkflowSpot

"""CommerceApi's order operations, without HTTP: validate, map the key, ask the workflow, read.

Theory of operation
-------------------
:class:`OrderService` is the whole of CommerceApi's behaviour; the
Starlette routes (``app``) only read bodies and write JSON around it. It
owns no order state: the mapping lives in the CommerceStateStore, the order in
OrderWorkflowSpot, the lookup document in the OrderReadModelStore.

**Start** (``docs/shoppingmall.md``, "Start and success" and "Duplicate start, resume,
planned relocation"), in this order:

1. Check every field (:func:`~.inputs.check_id`) and read the cart
   (:func:`~.cart.load_cart`). A refusal here has read at most the cart and
   written nothing.
2. Reserve the IdempotencyKey with a fresh candidate OrderId
   (``reserve_order``), storing the request itself as the mapping's snapshot.
   The first reservation of a key wins, on any API process; every other
   caller -- concurrent or a retry -- gets the winner's OrderId and discards
   its candidate. A key whose snapshot is another request (another cart,
   address or payment method) is refused with :class:`zlink_trio.AlreadyExists`:
   one key, one order.
3. A mapping already ``started`` whose read model exists answers with that
   lookup state (a duplicate start may answer the order's current lookup state).
   Otherwise -- ``pending``, or started with the projection lost -- send
   StartOrderWorkflowReq to the mapped OrderId with Instance intent
   (``workflow_calls``). Its SourceCommandId is ``start:<IdempotencyKey>``
   (the domain's ``start_command_id``): every duplicate sends the same one, so
   the workflow records one OrderStartedEvent whichever arrives first and
   answers the others with its fold. A pending mapping is never a success by
   itself: the caller resumes the same OrderId's workflow.
4. The reply confirms that OrderStartedEvent and the Created projection are
   recorded, so the mapping moves ``pending -> started``
   (``mark_started``, a no-op when another caller -- or the workflow -- moved
   it first). The response carries the reply's state: Created for a new
   order, whatever the background continuation has reached for a duplicate.

If step 3 fails (the owner is down, the deadline passed) the mapping stays
pending and the error is the answer; a retry with the same key resumes it.

**Lookup** reads the OrderReadModelStore and nothing else (a lookup has no side
effect and never progresses an order); an order without a document is
:class:`zlink_trio.NotFound`. A lookup that returns a terminal state prints the
``api-evidence`` line, with the number of events the projection folded.

**Continue / rebuild** check the OrderId and SourceCommandId and send
ContinueOrderWorkflowReq / RebuildOrderProjectionReq with Instance intent;
the API writes nothing for them.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.commerce_api.cart import load_cart
from zlink_trio.samples.shoppingmall.server.commerce_api.inputs import check_id
from zlink_trio.samples.shoppingmall.server.commerce_api.markers import evidence_line
from zlink_trio.samples.shoppingmall.server.order_workflow.domain.ids import start_command_id
from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import IdempotencyStatus
from zlink_trio.samples.shoppingmall.shared.contracts import (
    ContinueOrderWorkflowRes,
    GetOrderStateRes,
    OrderState,
    OrderStatus,
    RebuildOrderProjectionRes,
    StartOrderReq,
    StartOrderRes,
    StartOrderWorkflowReq,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.samples.shoppingmall.server.commerce_api.markers import LogLine
    from zlink_trio.samples.shoppingmall.server.commerce_api.workflow_calls import (
        OrderWorkflowCalls,
    )
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (  # noqa: E501
        OrderReadModelStore,
    )
    from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
        CommerceStateStore,
        IdempotencyMapping,
    )

__all__ = ("OrderService", "new_order_id")

_TERMINAL = frozenset({OrderStatus.CONFIRMED, OrderStatus.FAILED})


def new_order_id() -> str:
    """A fresh candidate OrderId: ``order-<uuid4>`` (the key's first reservation keeps it)."""
    return f"order-{uuid.uuid4()}"


def _no_line(line: str) -> None:
    return None


class OrderService:
    """CommerceApi's operations (module docstring); one per API node, shared by its routes.

    ``log`` receives the evidence lines; ``new_id`` draws candidate
    OrderIds. Every method raises :class:`~.inputs.ValidationError` for bad
    input before its first store call, :class:`zlink_trio.StoreUnavailable`
    when a store cannot be asked, and passes on the typed errors of the
    workflow request (``workflow_calls``).
    """

    def __init__(self, *, workflow: OrderWorkflowCalls, commerce: CommerceStateStore,
                 read_model: OrderReadModelStore, codec: zl.MessageCodec | None = None,
                 log: LogLine = _no_line, new_id: Callable[[], str] = new_order_id,
                 derive_cart: Callable[[str], str | None] | None = None) -> None:
        self._workflow = workflow
        self._derive_cart = derive_cart
        self._commerce = commerce
        self._read_model = read_model
        self._codec = zl.MessageCodec() if codec is None else codec
        self._log = log
        self._new_id = new_id

    @property
    def codec(self) -> zl.MessageCodec:
        """The typed JSON codec the service and its routes use."""
        return self._codec

    async def start_order(self, req: StartOrderReq) -> StartOrderRes:
        """Start the order ``req`` asks for, once per IdempotencyKey (module docstring).

        Raises :class:`zlink_trio.AlreadyExists` when the key was first used for
        another request (nothing written).
        """
        for field, value in (("cartId", req.cart_id),
                             ("shippingAddressId", req.shipping_address_id),
                             ("paymentMethodId", req.payment_method_id),
                             ("idempotencyKey", req.idempotency_key)):
            check_id(field, value)
        cart = await load_cart(self._commerce, self._codec, req.cart_id,
                               derive=self._derive_cart)
        snapshot = self._codec.to_json(req).decode("utf-8")
        reserved = await self._commerce.reserve_order(req.idempotency_key, self._new_id(),
                                                      snapshot)
        mapping = reserved.mapping
        if not reserved.reserved:
            self._check_same_request(mapping, req)
        order_id = mapping.order_id
        if mapping.status is IdempotencyStatus.STARTED:
            stored = await self._read_state(order_id)
            if stored is not None:
                return StartOrderRes(order_id, stored[0])
        state = await self._workflow.start(StartOrderWorkflowReq(
            order_id=order_id, cart_id=req.cart_id,
            shipping_address_id=req.shipping_address_id,
            payment_method_id=req.payment_method_id, idempotency_key=req.idempotency_key,
            source_command_id=start_command_id(req.idempotency_key), lines=cart.lines,
            amount=cart.amount, currency=cart.currency))
        await self._commerce.mark_started(req.idempotency_key, order_id)
        return StartOrderRes(order_id, state)

    def _check_same_request(self, mapping: IdempotencyMapping, req: StartOrderReq) -> None:
        try:
            first = self._codec.from_json(mapping.snapshot.encode("utf-8"), StartOrderReq)
        except zl.RemoteProtocolError:
            return  # not a request this API stored (a runner's fixture): nothing to compare
        if first != req:
            raise zl.AlreadyExists(
                f"idempotency key {req.idempotency_key!r} already started order "
                f"{mapping.order_id!r} for another request; nothing was written. Use a new "
                "key for a new order, or resend the first request unchanged")

    async def get_order_state(self, order_id: str) -> GetOrderStateRes:
        """The read model's state of ``order_id``; reads only (module docstring).

        Raises :class:`zlink_trio.NotFound` when the read model has no document
        for it, and :class:`zlink_trio.RemoteProtocolError` when the document
        is not an OrderState.
        """
        check_id("orderId", order_id)
        stored = await self._read_state(order_id)
        if stored is None:
            raise zl.NotFound(f"order {order_id!r} is not known (no lookup state); check the "
                              "orderId a StartOrderRes returned")
        state, events = stored
        if state.status in _TERMINAL:
            self._log(evidence_line(order_id, events))
        return GetOrderStateRes(state)

    async def continue_order(self, order_id: str,
                             source_command_id: str) -> ContinueOrderWorkflowRes:
        """Ask the order's workflow to run its next possible steps; its state after them."""
        check_id("orderId", order_id)
        check_id("sourceCommandId", source_command_id)
        return ContinueOrderWorkflowRes(
            await self._workflow.continue_order(order_id, source_command_id))

    async def rebuild_projection(self, order_id: str,
                                 source_command_id: str) -> RebuildOrderProjectionRes:
        """Ask the order's workflow to rebuild its read model from the stream; that state."""
        check_id("orderId", order_id)
        check_id("sourceCommandId", source_command_id)
        return RebuildOrderProjectionRes(
            await self._workflow.rebuild_projection(order_id, source_command_id))

    async def _read_state(self, order_id: str) -> tuple[OrderState, int] | None:
        document = await self._read_model.get(order_id)
        if document is None:
            return None
        state = self._codec.from_json(document.document.encode("utf-8"), OrderState)
        return state, document.version

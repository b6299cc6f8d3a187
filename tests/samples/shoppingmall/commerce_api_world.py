"""What the CommerceApi tests run against: a stand-in OrderWorkflow Spot and store doubles.

``StandInWorkflow`` is a tiny Instance Spot of the real stable type
(``shoppingmall.order-workflow``) that answers the three workflow contracts the way
docs/shoppingmall.md says the real one does, on a toy "stream" kept in :data:`WORLD` (a module
global, so it outlives any one incarnation, as the OrderEventStore does):

- StartOrderWorkflowReq records ``OrderStartedEvent`` once per order (a repeat with
  the same SourceCommandId answers the fold), projects Created, replies;
- ContinueOrderWorkflowReq runs the order to Confirmed and projects it;
- RebuildOrderProjectionReq projects the fold again;
- continue / rebuild on an order without a stream raise ``zl.NotFound`` and record
  nothing (item 9.3-3).

A request for an order listed in ``WORLD.hold`` (``"*"``: every order) waits for
``WORLD.release`` before it is handled (the deadline tests). Every message
and every factory run is journaled in ``WORLD``.

``MemoryCommerceStore`` / ``MemoryReadModel`` are in-memory doubles of the two store
protocols that record every call, so a test can say "nothing was written" exactly and
run on the autojump clock (the SQLite stores' worker threads would let it jump mid
call). The tests that need the real stores' atomicity open them on SQLite.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import httpx
import trio

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.commerce_api.app import build_app
from zlink_trio.samples.shoppingmall.server.commerce_api.cart import CartSnapshot, encode_cart
from zlink_trio.samples.shoppingmall.server.commerce_api.orders import OrderService
from zlink_trio.samples.shoppingmall.server.commerce_api.workflow_calls import (
    OrderWorkflowCalls,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (
    PutResult,
    ReadModel,
)
from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
    IdempotencyMapping,
    IdempotencyStatus,
    ReserveResult,
    StartResult,
)
from zlink_trio.samples.shoppingmall.shared.contracts import (
    ORDER_WORKFLOW_TYPE,
    WORKFLOW_MESH,
    ContinueOrderWorkflowReq,
    ContinueOrderWorkflowRes,
    OrderLine,
    OrderState,
    OrderStatus,
    RebuildOrderProjectionReq,
    RebuildOrderProjectionRes,
    StartOrderWorkflowReq,
    StartOrderWorkflowRes,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

CODEC = zl.MessageCodec()

#: The bound of every I/O test (``trio.fail_after``), in seconds.
TIMEOUT = 30

CART = CartSnapshot(lines=(OrderLine("sku-1", 2), OrderLine("sku-2", 1)), amount=30.0,
                    currency="EUR")

#: The events a continue appends after the start, in the success order.
SUCCESS_EVENTS = ("InventoryReservedEvent", "PaymentAuthorizedEvent", "OrderConfirmedEvent")
_STATUS = {
    "OrderStartedEvent": OrderStatus.CREATED,
    "InventoryReservedEvent": OrderStatus.INVENTORY_RESERVED,
    "PaymentAuthorizedEvent": OrderStatus.PAYMENT_AUTHORIZED,
    "OrderConfirmedEvent": OrderStatus.CONFIRMED,
}


def start_body(key: str = "key-1", cart: str = "cart-1", **override: Any) -> dict[str, Any]:
    """A StartOrderReq as JSON (camelCase); ``override`` replaces or adds keys."""
    body: dict[str, Any] = {"cartId": cart, "shippingAddressId": "addr-1",
                            "paymentMethodId": "pm-1", "idempotencyKey": key}
    body.update(override)
    return body


@attrs.define
class World:
    """The stand-in workflow's durable state and journal, and its read model."""

    read_model: Any = None
    streams: dict[str, list[str]] = attrs.Factory(dict)
    starts: dict[str, StartOrderWorkflowReq] = attrs.Factory(dict)
    #: (message class name, order id), in arrival order.
    calls: list[tuple[str, str]] = attrs.Factory(list)
    #: Order ids a StandInWorkflow factory ran for.
    activations: list[str] = attrs.Factory(list)
    hold: set[str] = attrs.Factory(set)
    release: trio.Event = attrs.Factory(trio.Event)

    def state(self, order_id: str) -> OrderState:
        start = self.starts[order_id]
        stream = self.streams[order_id]
        confirmed = stream[-1] == "OrderConfirmedEvent"
        return OrderState(
            order_id=order_id, status=_STATUS[stream[-1]],
            shipping_address_id=start.shipping_address_id,
            reservation_id=f"{order_id}:reservation" if len(stream) > 1 else None,
            payment_id=f"{order_id}:payment" if len(stream) > 2 else None,
            amount=start.amount if confirmed else None,
            currency=start.currency if confirmed else None,
            updated_at_unix_ms=len(stream))

    async def project(self, order_id: str) -> OrderState:
        state = self.state(order_id)
        await self.read_model.put(order_id, len(self.streams[order_id]),
                                  CODEC.to_json(state).decode())
        return state


WORLD = World()


def reset_world(read_model: Any) -> World:
    """A fresh :data:`WORLD` projecting into ``read_model``."""
    global WORLD
    WORLD = World(read_model=read_model)
    return WORLD


@zl.instance_spot(ORDER_WORKFLOW_TYPE, relocation=zl.RecreateOnRelocation())
class StandInWorkflow:
    """The stand-in OrderWorkflowSpot (module docstring)."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.order_id = ctx.spot_id
        WORLD.activations.append(ctx.spot_id)

    async def _arrive(self, msg: object, order_id: str) -> None:
        WORLD.calls.append((type(msg).__name__, order_id))
        if order_id in WORLD.hold or "*" in WORLD.hold:
            await WORLD.release.wait()

    def _known(self, order_id: str) -> None:
        if order_id not in WORLD.streams:
            raise zl.NotFound(f"order {order_id!r} has no stream; nothing recorded")

    @zl.handler
    async def start(self, msg: StartOrderWorkflowReq) -> StartOrderWorkflowRes:
        await self._arrive(msg, msg.order_id)
        if msg.order_id not in WORLD.streams:
            WORLD.streams[msg.order_id] = ["OrderStartedEvent"]
            WORLD.starts[msg.order_id] = msg
            return StartOrderWorkflowRes(await WORLD.project(msg.order_id))
        if WORLD.starts[msg.order_id].source_command_id != msg.source_command_id:
            raise zl.AlreadyExists(f"order {msg.order_id!r} was started by another command")
        return StartOrderWorkflowRes(WORLD.state(msg.order_id))

    @zl.handler
    async def resume(self, msg: ContinueOrderWorkflowReq) -> ContinueOrderWorkflowRes:
        await self._arrive(msg, msg.order_id)
        self._known(msg.order_id)
        stream = WORLD.streams[msg.order_id]
        stream.extend(SUCCESS_EVENTS[len(stream) - 1:])
        return ContinueOrderWorkflowRes(await WORLD.project(msg.order_id))

    @zl.handler
    async def rebuild(self, msg: RebuildOrderProjectionReq) -> RebuildOrderProjectionRes:
        await self._arrive(msg, msg.order_id)
        self._known(msg.order_id)
        return RebuildOrderProjectionRes(await WORLD.project(msg.order_id))


# -- store doubles ------------------------------------------------------------------------


@attrs.define(slots=False)  # a test may replace a method to make it fail
class MemoryCommerceStore:
    """The CommerceStateStore protocol over dicts; ``calls`` names every call made."""

    mappings: dict[str, IdempotencyMapping] = attrs.Factory(dict)
    carts: dict[str, str] = attrs.Factory(dict)
    calls: list[str] = attrs.Factory(list)

    @property
    def writes(self) -> list[str]:
        return [c for c in self.calls if c in ("reserve_order", "mark_started", "put_cart")]

    async def reserve_order(self, idempotency_key: str, candidate_order_id: str,
                            snapshot: str = "{}") -> ReserveResult:
        self.calls.append("reserve_order")
        mapping = self.mappings.get(idempotency_key)
        if mapping is not None:
            return ReserveResult(mapping=mapping, reserved=False)
        mapping = IdempotencyMapping(idempotency_key=idempotency_key,
                                     order_id=candidate_order_id,
                                     status=IdempotencyStatus.PENDING, snapshot=snapshot)
        self.mappings[idempotency_key] = mapping
        return ReserveResult(mapping=mapping, reserved=True)

    async def mark_started(self, idempotency_key: str, order_id: str) -> StartResult:
        self.calls.append("mark_started")
        mapping = self.mappings[idempotency_key]
        assert mapping.order_id == order_id
        changed = mapping.status is IdempotencyStatus.PENDING
        mapping = attrs.evolve(mapping, status=IdempotencyStatus.STARTED)
        self.mappings[idempotency_key] = mapping
        return StartResult(mapping=mapping, changed=changed)

    async def get_mapping(self, idempotency_key: str) -> IdempotencyMapping | None:
        self.calls.append("get_mapping")
        return self.mappings.get(idempotency_key)

    async def put_cart(self, cart_id: str, snapshot: str) -> None:
        self.calls.append("put_cart")
        self.carts[cart_id] = snapshot

    async def get_cart(self, cart_id: str) -> str | None:
        self.calls.append("get_cart")
        return self.carts.get(cart_id)


@attrs.define(slots=False)
class MemoryReadModel:
    """The OrderReadModelStore protocol over a dict; ``calls`` names every call made."""

    documents: dict[str, ReadModel] = attrs.Factory(dict)
    calls: list[str] = attrs.Factory(list)

    async def put(self, order_id: str, version: int, document: str) -> PutResult:
        self.calls.append("put")
        current = self.documents.get(order_id)
        if current is not None and current.version > version:
            return PutResult(written=False, current=current)
        self.documents[order_id] = ReadModel(order_id=order_id, version=version,
                                             document=document)
        return PutResult(written=True, current=self.documents[order_id])

    async def get(self, order_id: str) -> ReadModel | None:
        self.calls.append("get")
        return self.documents.get(order_id)

    async def delete(self, order_id: str) -> bool:
        self.calls.append("delete")
        return self.documents.pop(order_id, None) is not None


# -- apps and nodes -----------------------------------------------------------------------


class Chunks(httpx.AsyncByteStream):
    """A request body: ``head``, then ``count`` chunks of 1 KiB (``None``: forever).

    ``pulled`` counts the parts read. An iterator object, not an async generator: the
    app stops pulling early, and an abandoned generator is a ResourceWarning.
    """

    def __init__(self, head: bytes, count: int | None) -> None:
        self.head = head
        self.count = count
        self.pulled = 0

    def __aiter__(self) -> Chunks:
        return self

    async def __anext__(self) -> bytes:
        if self.count is not None and self.pulled > self.count:
            raise StopAsyncIteration
        self.pulled += 1
        return self.head if self.pulled == 1 else b" " * 1024


def asgi_client(service: OrderService) -> httpx.AsyncClient:
    """An httpx client that drives the app over ``service`` in-process (no socket)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(service)),
                             base_url="http://api.test")


def service_on(node: zl.Node, commerce: Any, read_model: Any, *,
               timeout: float = 10.0, log: Any = None) -> OrderService:
    """An OrderService calling the workflow through ``node.client``."""
    return OrderService(workflow=OrderWorkflowCalls(node.client, timeout=timeout),
                        commerce=commerce, read_model=read_model, codec=CODEC,
                        log=log if log is not None else (lambda line: None))


@attrs.frozen
class OneNode:
    """One node (no links) hosting the stand-in, and an app whose service calls through it."""

    node: zl.Node
    commerce: MemoryCommerceStore
    read_model: MemoryReadModel
    world: World
    http: httpx.AsyncClient
    lines: list[str]


@asynccontextmanager
async def one_node(*, workflow_timeout: float = 10.0) -> AsyncIterator[OneNode]:
    """:class:`OneNode` on the store doubles; the cart ``cart-1`` is seeded."""
    commerce, read_model, lines = MemoryCommerceStore(), MemoryReadModel(), []
    await commerce.put_cart("cart-1", encode_cart(CODEC, CART))
    commerce.calls.clear()
    world = reset_world(read_model)
    async with zl.open_node("workflow-a", mesh=WORKFLOW_MESH, spots=[StandInWorkflow],
                            listen=None) as node:
        service = service_on(node, commerce, read_model, timeout=workflow_timeout,
                             log=lines.append)
        async with asgi_client(service) as http:
            yield OneNode(node, commerce, read_model, world, http, lines)

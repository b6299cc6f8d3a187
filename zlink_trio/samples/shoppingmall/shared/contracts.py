"""ShoppingMall's JSON contracts: every message and event, as frozen attrs classes.

Theory of operation
-------------------
The sample fixes each message's JSON fields and types for every language
(``docs/shoppingmall.md``, "JSON contracts"); these classes are that
declaration in Python. Attributes are snake_case; every class
declares ``__zlink_json_names__ = "camelCase"``, so the framework's typed JSON
codec spells them exactly as the declaration does (``order_id`` <-> ``"orderId"``,
``updated_at_unix_ms`` <-> ``"updatedAtUnixMs"``). Nothing is registered per
message: the codec reads both class attributes (plain strings, so this module
imports nothing of the framework) when it first meets a class.
Every class pins ``__zlink_type__`` to ``"shoppingmall.<MessageName>"`` so its
wire name survives moving this module.

Types follow the declaration: ``string`` is ``str``, ``int32``/``int64`` are ``int``,
``number`` is ``float`` (a JSON integer decodes as one), ``bool`` is ``bool``,
``T[]`` is ``tuple[T, ...]`` (a JSON array; a tuple keeps the classes
hashable), ``status`` is :class:`OrderStatus`. An optional field (``x?: T`` or
``x?: T | null``) is ``T | None`` with default ``None``: an absent key and
``null`` both decode to ``None``, and ``None`` is written as ``null``.

These are shapes, not rules: they carry no validators, so any well-typed value
decodes, and the CommerceApi validates input, the workflow's domain its own
invariants. The classes hold no behaviour and import only ``attrs`` and the
standard library: the client, the CommerceApi and the OrderWorkflow share them.

Who sends what, and what a reply means, is "Who sends what, and when it
completes" in ``docs/shoppingmall.md``; each class's docstring says it
in one line. The event classes are the payloads the OrderEventStore records in
its envelope (eventId, orderId, eventType, version, sourceCommandId?,
createdAtUnixMs); ``eventType`` is the class name (:data:`EVENT_TYPES`).

The two names every part addresses the workflow by -- its stable type
:data:`ORDER_WORKFLOW_TYPE` and its Mesh :data:`WORKFLOW_MESH` -- are here too, once.
"""

from __future__ import annotations

import enum
from typing import ClassVar, Final

import attrs

__all__ = (
    "EVENT_TYPES", "MESSAGE_TYPES", "ORDER_WORKFLOW_TYPE", "WORKFLOW_MESH", "AuthorizePaymentReq",
    "AuthorizePaymentRes",
    "ContinueOrderWorkflowReq", "ContinueOrderWorkflowRes", "GetOrderStateReq", "GetOrderStateRes",
    "InventoryReleasedEvent", "InventoryReservationFailedEvent", "InventoryReservedEvent",
    "OrderConfirmedEvent", "OrderFailedEvent", "OrderLine", "OrderStartedEvent", "OrderState",
    "OrderStatus", "PaymentAuthorizedEvent", "PaymentFailedEvent", "RebuildOrderProjectionReq",
    "RebuildOrderProjectionRes", "ReleaseInventoryReq", "ReleaseInventoryRes",
    "ReserveInventoryReq", "ReserveInventoryRes", "StartOrderReq", "StartOrderRes",
    "StartOrderWorkflowReq", "StartOrderWorkflowRes",
)

#: The OrderWorkflowSpot's stable type: an Instance Spot whose Spot ID is the OrderId.
ORDER_WORKFLOW_TYPE: Final = "shoppingmall.order-workflow"

#: The RouteMesh CommerceApi and OrderWorkflow share: the Workflow nodes serve
#: :data:`ORDER_WORKFLOW_TYPE` in it, the API nodes join it as object clients.
WORKFLOW_MESH: Final = "shoppingmall.workflow"


class OrderStatus(enum.StrEnum):
    """``OrderState.status``; Confirmed and Failed are terminal."""

    CREATED = "Created"
    INVENTORY_RESERVED = "InventoryReserved"
    PAYMENT_AUTHORIZED = "PaymentAuthorized"
    CONFIRMED = "Confirmed"
    FAILED = "Failed"


@attrs.frozen
class OrderLine:
    """One cart line: a SKU and how many of it."""

    __zlink_type__: ClassVar[str] = "shoppingmall.OrderLine"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    sku: str
    quantity: int


@attrs.frozen(kw_only=True)
class OrderState:
    """The read model of one order: what lookups and every workflow reply return."""

    __zlink_type__: ClassVar[str] = "shoppingmall.OrderState"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    order_id: str
    status: OrderStatus
    shipping_address_id: str | None = None
    reservation_id: str | None = None
    payment_id: str | None = None
    amount: float | None = None
    currency: str | None = None
    reason: str | None = None
    updated_at_unix_ms: int


# --------------------------------------------------------------------------- client -> CommerceApi


@attrs.frozen(kw_only=True)
class StartOrderReq:
    """Client -> CommerceApi (HTTP): start an order for a built cart, once per idempotency key."""

    __zlink_type__: ClassVar[str] = "shoppingmall.StartOrderReq"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    cart_id: str
    shipping_address_id: str
    payment_method_id: str
    idempotency_key: str


@attrs.frozen
class StartOrderRes:
    """Reply once the mapping and Created are recorded; later steps run in the background."""

    __zlink_type__: ClassVar[str] = "shoppingmall.StartOrderRes"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    order_id: str
    state: OrderState


@attrs.frozen
class GetOrderStateReq:
    """Client -> CommerceApi (HTTP): read the read model; progresses nothing, records nothing."""

    __zlink_type__: ClassVar[str] = "shoppingmall.GetOrderStateReq"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    order_id: str


@attrs.frozen
class GetOrderStateRes:
    """The read model's current state of the order."""

    __zlink_type__: ClassVar[str] = "shoppingmall.GetOrderStateRes"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    state: OrderState


# --------------------------------------------------------------------------- -> OrderWorkflowSpot


@attrs.frozen(kw_only=True)
class StartOrderWorkflowReq:
    """CommerceApi -> OrderWorkflowSpot (Spot request): record up to Created, project, reply."""

    __zlink_type__: ClassVar[str] = "shoppingmall.StartOrderWorkflowReq"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    order_id: str
    cart_id: str
    shipping_address_id: str
    payment_method_id: str
    idempotency_key: str
    source_command_id: str
    lines: tuple[OrderLine, ...]
    amount: float
    currency: str


@attrs.frozen
class StartOrderWorkflowRes:
    """The state once Created is recorded and projected."""

    __zlink_type__: ClassVar[str] = "shoppingmall.StartOrderWorkflowRes"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    state: OrderState


@attrs.frozen
class ContinueOrderWorkflowReq:
    """Recovery trigger -> OrderWorkflowSpot: run the next possible step from the fold."""

    __zlink_type__: ClassVar[str] = "shoppingmall.ContinueOrderWorkflowReq"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    order_id: str
    source_command_id: str


@attrs.frozen
class ContinueOrderWorkflowRes:
    """The current state after the steps the continue could run."""

    __zlink_type__: ClassVar[str] = "shoppingmall.ContinueOrderWorkflowRes"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    state: OrderState


@attrs.frozen
class RebuildOrderProjectionReq:
    """Maintenance trigger -> OrderWorkflowSpot: rebuild the read model from the stream alone."""

    __zlink_type__: ClassVar[str] = "shoppingmall.RebuildOrderProjectionReq"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    order_id: str
    source_command_id: str


@attrs.frozen
class RebuildOrderProjectionRes:
    """The state the replay produced (and the read model now holds)."""

    __zlink_type__: ClassVar[str] = "shoppingmall.RebuildOrderProjectionRes"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    state: OrderState


# --------------------------------------------------------------------------- Workflow -> modules


@attrs.frozen(kw_only=True)
class ReserveInventoryReq:
    """Workflow -> Inventory: reserve; the same reservationId always gets the first result."""

    __zlink_type__: ClassVar[str] = "shoppingmall.ReserveInventoryReq"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    order_id: str
    reservation_id: str
    lines: tuple[OrderLine, ...]


@attrs.frozen
class ReserveInventoryRes:
    """Whether the reservation was accepted; ``reason`` says why not."""

    __zlink_type__: ClassVar[str] = "shoppingmall.ReserveInventoryRes"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    accepted: bool
    reason: str | None = None


@attrs.frozen(kw_only=True)
class ReleaseInventoryReq:
    """Workflow -> Inventory: release (compensate) the reservation ``reservation_id``."""

    __zlink_type__: ClassVar[str] = "shoppingmall.ReleaseInventoryReq"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    order_id: str
    reservation_id: str
    reason: str


@attrs.frozen
class ReleaseInventoryRes:
    """Whether the reservation is released; ``reason`` says why not."""

    __zlink_type__: ClassVar[str] = "shoppingmall.ReleaseInventoryRes"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    released: bool
    reason: str | None = None


@attrs.frozen(kw_only=True)
class AuthorizePaymentReq:
    """Workflow -> Payment: authorize; the same paymentId always gets the first result."""

    __zlink_type__: ClassVar[str] = "shoppingmall.AuthorizePaymentReq"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    order_id: str
    payment_id: str
    payment_method_id: str
    amount: float
    currency: str


@attrs.frozen
class AuthorizePaymentRes:
    """Whether the payment was authorized; ``reason`` says why not."""

    __zlink_type__: ClassVar[str] = "shoppingmall.AuthorizePaymentRes"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    accepted: bool
    reason: str | None = None


# ----------------------------------------------------- events (in the order a stream may hold them)


@attrs.frozen(kw_only=True)
class OrderStartedEvent:
    """The order exists: its cart, address, lines and total. Always the stream's first event."""

    __zlink_type__: ClassVar[str] = "shoppingmall.OrderStartedEvent"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    event_id: str
    order_id: str
    cart_id: str
    shipping_address_id: str
    lines: tuple[OrderLine, ...]
    amount: float
    currency: str
    source_command_id: str


@attrs.frozen(kw_only=True)
class InventoryReservedEvent:
    """The Inventory module accepted reservation ``reservation_id``."""

    __zlink_type__: ClassVar[str] = "shoppingmall.InventoryReservedEvent"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    event_id: str
    order_id: str
    reservation_id: str


@attrs.frozen(kw_only=True)
class InventoryReservationFailedEvent:
    """The Inventory module refused the reservation; payment is never called."""

    __zlink_type__: ClassVar[str] = "shoppingmall.InventoryReservationFailedEvent"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    event_id: str
    order_id: str
    reason: str


@attrs.frozen(kw_only=True)
class PaymentAuthorizedEvent:
    """The Payment module authorized payment ``payment_id``."""

    __zlink_type__: ClassVar[str] = "shoppingmall.PaymentAuthorizedEvent"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    event_id: str
    order_id: str
    payment_id: str


@attrs.frozen(kw_only=True)
class PaymentFailedEvent:
    """The Payment module refused; the reservation is released next."""

    __zlink_type__: ClassVar[str] = "shoppingmall.PaymentFailedEvent"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    event_id: str
    order_id: str
    reason: str


@attrs.frozen(kw_only=True)
class InventoryReleasedEvent:
    """The compensation: reservation ``reservation_id`` was released (the status stays)."""

    __zlink_type__: ClassVar[str] = "shoppingmall.InventoryReleasedEvent"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    event_id: str
    order_id: str
    reservation_id: str
    reason: str


@attrs.frozen(kw_only=True)
class OrderConfirmedEvent:
    """Terminal: the order is Confirmed."""

    __zlink_type__: ClassVar[str] = "shoppingmall.OrderConfirmedEvent"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    event_id: str
    order_id: str
    confirmed_at_unix_ms: int


@attrs.frozen(kw_only=True)
class OrderFailedEvent:
    """Terminal: the order is Failed, after any compensation."""

    __zlink_type__: ClassVar[str] = "shoppingmall.OrderFailedEvent"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    event_id: str
    order_id: str
    reason: str
    failed_at_unix_ms: int


#: The event classes, keyed by the envelope's ``eventType`` (the class name).
EVENT_TYPES: Final[dict[str, type[object]]] = {
    cl.__name__: cl
    for cl in (
        OrderStartedEvent,
        InventoryReservedEvent,
        InventoryReservationFailedEvent,
        PaymentAuthorizedEvent,
        PaymentFailedEvent,
        InventoryReleasedEvent,
        OrderConfirmedEvent,
        OrderFailedEvent,
    )
}

#: Every contract class, in the JSON declaration's order (events last).
MESSAGE_TYPES: Final[tuple[type[object], ...]] = (
    OrderLine,
    StartOrderReq,
    StartOrderRes,
    GetOrderStateReq,
    GetOrderStateRes,
    OrderState,
    StartOrderWorkflowReq,
    StartOrderWorkflowRes,
    ContinueOrderWorkflowReq,
    ContinueOrderWorkflowRes,
    RebuildOrderProjectionReq,
    RebuildOrderProjectionRes,
    ReserveInventoryReq,
    ReserveInventoryRes,
    ReleaseInventoryReq,
    ReleaseInventoryRes,
    AuthorizePaymentReq,
    AuthorizePaymentRes,
    *EVENT_TYPES.values(),
)

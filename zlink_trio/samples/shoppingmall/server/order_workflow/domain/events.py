"""The order's events and a recorded event's envelope facts.

Each event is a fact one step established; the fold (:mod:`.fold`) is the only
reader. Fields are the JSON contracts', snake_case; the contracts in ``shared.contracts``
carry the same names and are what the OrderEventStore stores (the application
maps one to the other by field name). A stream holds them in one of three orders
(``docs/shoppingmall.md``, "Events, their order, and deterministic IDs"):

============================  ===========================================================
branch                        events
============================  ===========================================================
success                       OrderStarted, InventoryReserved, PaymentAuthorized,
                              OrderConfirmed
inventory failure             OrderStarted, InventoryReservationFailed, OrderFailed
payment failure               OrderStarted, InventoryReserved, PaymentFailed,
                              InventoryReleased, OrderFailed
============================  ===========================================================
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

# At run time, not under TYPE_CHECKING: typing.get_type_hints (and so anything that
# structures these classes from their annotations) must find the name.
from .values import OrderLine  # noqa: TC001

__all__ = (
    "InventoryReleasedEvent",
    "InventoryReservationFailedEvent",
    "InventoryReservedEvent",
    "OrderConfirmedEvent",
    "OrderEvent",
    "OrderFailedEvent",
    "OrderStartedEvent",
    "PaymentAuthorizedEvent",
    "PaymentFailedEvent",
    "Recorded",
)


@attrs.frozen(kw_only=True)
class OrderStartedEvent:
    """The order exists, with its cart, address, lines and total; always version 1."""

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
    """Inventory accepted reservation ``reservation_id``."""

    event_id: str
    order_id: str
    reservation_id: str


@attrs.frozen(kw_only=True)
class InventoryReservationFailedEvent:
    """Inventory refused the reservation; payment is never called."""

    event_id: str
    order_id: str
    reason: str


@attrs.frozen(kw_only=True)
class PaymentAuthorizedEvent:
    """Payment authorized ``payment_id``."""

    event_id: str
    order_id: str
    payment_id: str


@attrs.frozen(kw_only=True)
class PaymentFailedEvent:
    """Payment refused; the reservation must be released before the order fails."""

    event_id: str
    order_id: str
    reason: str


@attrs.frozen(kw_only=True)
class InventoryReleasedEvent:
    """The compensation is done: ``reservation_id`` is released. The status does not revert."""

    event_id: str
    order_id: str
    reservation_id: str
    reason: str


@attrs.frozen(kw_only=True)
class OrderConfirmedEvent:
    """Terminal: Confirmed."""

    event_id: str
    order_id: str
    confirmed_at_unix_ms: int


@attrs.frozen(kw_only=True)
class OrderFailedEvent:
    """Terminal: Failed, after any compensation."""

    event_id: str
    order_id: str
    reason: str
    failed_at_unix_ms: int


#: Any of the eight events.
OrderEvent: TypeAlias = (
    OrderStartedEvent
    | InventoryReservedEvent
    | InventoryReservationFailedEvent
    | PaymentAuthorizedEvent
    | PaymentFailedEvent
    | InventoryReleasedEvent
    | OrderConfirmedEvent
    | OrderFailedEvent
)


@attrs.frozen(kw_only=True)
class Recorded:
    """One event as the stream holds it: the event and the envelope facts the fold reads.

    ``version`` is its 1-based position in the order's stream;
    ``source_command_id`` the SourceCommandId of the append that recorded it
    (``None`` if that append had none); ``created_at_unix_ms`` when it was
    recorded, which becomes the state's ``updated_at_unix_ms``.
    """

    version: int
    event: OrderEvent
    source_command_id: str | None
    created_at_unix_ms: int

"""The fold: replay an order's stream into its :class:`OrderAggregate`.

Theory of operation
-------------------
The stream is the record; the aggregate is only ever computed from it, so a
replay after a restart, a relocation or a lost projection gives the same
state. The rule for which event may follow which is one table,
:data:`TRANSITIONS`, keyed by the aggregate's :class:`Phase` and the event's
class; the three event orders (``events``) are its only paths from ``NEW`` to a
terminal phase, and an event the table does not allow is
:class:`CorruptStream`, never skipped.

A phase is finer than the status a reader sees: ``RESERVATION_FAILED``,
``PAYMENT_FAILED`` and ``RELEASED`` are the compensation's progress, and the
next step depends on it, but InventoryReleasedEvent records the compensation's
result without reverting the status, and Failed is terminal,
so the status stays at the last milestone reached (Created, InventoryReserved)
until ``OrderFailedEvent`` makes it Failed. A client polling for a terminal
status therefore never sees Failed while compensation is still running.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final

import attrs

from .errors import CorruptStream
from .events import (
    InventoryReleasedEvent,
    InventoryReservationFailedEvent,
    InventoryReservedEvent,
    OrderConfirmedEvent,
    OrderFailedEvent,
    OrderStartedEvent,
    PaymentAuthorizedEvent,
    PaymentFailedEvent,
    Recorded,
)
from .values import OrderLine, OrderStatus

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ("STATUS_OF", "TRANSITIONS", "OrderAggregate", "Phase", "apply", "fold")


class Phase(enum.StrEnum):
    """Where the order is in the three event orders (the name of the last event, roughly)."""

    NEW = "new"  #: no stream yet
    CREATED = "created"
    RESERVATION_FAILED = "reservation-failed"
    RESERVED = "reserved"
    PAYMENT_FAILED = "payment-failed"
    RELEASED = "released"
    PAYMENT_AUTHORIZED = "payment-authorized"
    CONFIRMED = "confirmed"
    FAILED = "failed"


#: (phase, event class) -> the phase after it. Everything else is a corrupt stream.
TRANSITIONS: Final[dict[tuple[Phase, type[object]], Phase]] = {
    (Phase.NEW, OrderStartedEvent): Phase.CREATED,
    (Phase.CREATED, InventoryReservedEvent): Phase.RESERVED,
    (Phase.CREATED, InventoryReservationFailedEvent): Phase.RESERVATION_FAILED,
    (Phase.RESERVATION_FAILED, OrderFailedEvent): Phase.FAILED,
    (Phase.RESERVED, PaymentAuthorizedEvent): Phase.PAYMENT_AUTHORIZED,
    (Phase.RESERVED, PaymentFailedEvent): Phase.PAYMENT_FAILED,
    (Phase.PAYMENT_FAILED, InventoryReleasedEvent): Phase.RELEASED,
    (Phase.RELEASED, OrderFailedEvent): Phase.FAILED,
    (Phase.PAYMENT_AUTHORIZED, OrderConfirmedEvent): Phase.CONFIRMED,
}

#: The status a reader sees in each phase; ``NEW`` has none (the order does not exist).
STATUS_OF: Final[dict[Phase, OrderStatus | None]] = {
    Phase.NEW: None,
    Phase.CREATED: OrderStatus.CREATED,
    Phase.RESERVATION_FAILED: OrderStatus.CREATED,
    Phase.RESERVED: OrderStatus.INVENTORY_RESERVED,
    Phase.PAYMENT_FAILED: OrderStatus.INVENTORY_RESERVED,
    Phase.RELEASED: OrderStatus.INVENTORY_RESERVED,
    Phase.PAYMENT_AUTHORIZED: OrderStatus.PAYMENT_AUTHORIZED,
    Phase.CONFIRMED: OrderStatus.CONFIRMED,
    Phase.FAILED: OrderStatus.FAILED,
}


@attrs.frozen(kw_only=True)
class OrderAggregate:
    """One order as its stream says it is. Build it with :meth:`empty` and :func:`fold`.

    The read-model fields (``order_id``, ``status``, ``shipping_address_id``,
    ``reservation_id``, ``payment_id``, ``amount``, ``currency``, ``reason``,
    ``updated_at_unix_ms``) have ``OrderState``'s names, so the application
    projects by name. ``version`` is the stream version folded so far (0: no
    stream), the expected version of the next append; ``source_command_ids``
    every SourceCommandId the stream holds (a duplicate command records nothing).
    """

    order_id: str
    version: int = 0
    phase: Phase = Phase.NEW
    cart_id: str | None = None
    shipping_address_id: str | None = None
    lines: tuple[OrderLine, ...] = ()
    amount: float | None = None
    currency: str | None = None
    reservation_id: str | None = None
    payment_id: str | None = None
    reason: str | None = None
    updated_at_unix_ms: int = 0
    source_command_ids: frozenset[str] = frozenset()

    @classmethod
    def empty(cls, order_id: str) -> OrderAggregate:
        """The order before its first event (``Phase.NEW``, version 0)."""
        return cls(order_id=order_id)

    @property
    def status(self) -> OrderStatus | None:
        """The status a reader sees, ``None`` while the order does not exist."""
        return STATUS_OF[self.phase]

    @property
    def started(self) -> bool:
        """Whether the stream holds the OrderStartedEvent."""
        return self.phase is not Phase.NEW

    @property
    def terminal(self) -> bool:
        """Whether the order is Confirmed or Failed (no event may follow)."""
        return self.phase in (Phase.CONFIRMED, Phase.FAILED)


def _facts(state: OrderAggregate, record: Recorded) -> dict[str, object]:
    """The fields the event itself sets, beyond version, phase and time."""
    event = record.event
    if isinstance(event, OrderStartedEvent):
        return {
            "cart_id": event.cart_id,
            "shipping_address_id": event.shipping_address_id,
            "lines": event.lines,
            "amount": event.amount,
            "currency": event.currency,
        }
    if isinstance(event, InventoryReservedEvent):
        return {"reservation_id": event.reservation_id}
    if isinstance(event, PaymentAuthorizedEvent):
        return {"payment_id": event.payment_id}
    if isinstance(event, InventoryReleasedEvent):
        # The compensation must release the reservation the stream recorded, not another.
        if event.reservation_id != state.reservation_id:
            raise CorruptStream(
                f"order {state.order_id!r} version {record.version}: released reservation "
                f"{event.reservation_id!r}, but the stream reserved {state.reservation_id!r}"
            )
        return {}
    if isinstance(event, (InventoryReservationFailedEvent, PaymentFailedEvent, OrderFailedEvent)):
        return {"reason": event.reason}
    return {}  # OrderConfirmedEvent: the phase says it all


def apply(state: OrderAggregate, record: Recorded) -> OrderAggregate:
    """Return ``state`` after ``record``; raises :class:`CorruptStream` if it cannot follow.

    It cannot follow when its version is not ``state.version + 1``, its event
    is of another order, or :data:`TRANSITIONS` has no entry for the phase and
    the event (including anything after a terminal event).
    """
    event = record.event
    where = f"order {state.order_id!r} version {record.version}"
    if record.version != state.version + 1:
        raise CorruptStream(f"{where}: expected version {state.version + 1} (a gap or a repeat)")
    if event.order_id != state.order_id:
        raise CorruptStream(f"{where}: the event belongs to order {event.order_id!r}")
    phase = TRANSITIONS.get((state.phase, type(event)))
    if phase is None:
        raise CorruptStream(
            f"{where}: {type(event).__name__} cannot follow phase {state.phase.value!r}"
        )
    seen = state.source_command_ids
    if record.source_command_id is not None:
        seen = seen | {record.source_command_id}
    return attrs.evolve(
        state,
        version=record.version,
        phase=phase,
        updated_at_unix_ms=record.created_at_unix_ms,
        source_command_ids=seen,
        **_facts(state, record),  # type: ignore[arg-type]
    )


def fold(order_id: str, records: Iterable[Recorded]) -> OrderAggregate:
    """Replay ``records`` (the whole stream, in version order) into the order's aggregate.

    An empty stream gives :meth:`OrderAggregate.empty`. Raises
    :class:`CorruptStream` at the first record that cannot follow.
    """
    state = OrderAggregate.empty(order_id)
    for record in records:
        state = apply(state, record)
    return state

"""The next step of an order, and what each step's outcome records.

Theory of operation
-------------------
The application drives the workflow as a loop; each turn is

1. ``state = fold(order_id, stream)`` (or the state the last turn left);
2. ``step = next_step(state)``;
3. for an external effect (:class:`ReserveInventory`, :class:`AuthorizePayment`,
   :class:`ReleaseInventory`), call the module with the step's deterministic ID
   and turn its answer into an :class:`EffectResult`;
4. ``outcome = record(state, step, result, now_unix_ms=...)``: an
   :class:`Append` to write with its expected version and SourceCommandId, or
   a :class:`Halt`;
5. append; then ``state = advance(state, append, recorded_at_unix_ms=...)``,
   or, on a version conflict or a deduplicated append, replay and go to 2;

until the step is :class:`Finished` or :class:`NotStarted`. Per phase:

==================  ================================  =======================================
phase               next step                         outcome -> event
==================  ================================  =======================================
NEW                 NotStarted                        (a continue never creates an order)
CREATED             ReserveInventory(reservation id)  InventoryReserved, or
                                                      InventoryReservationFailed
RESERVATION_FAILED  FailOrder                         OrderFailed (payment is never called)
RESERVED            AuthorizePayment(payment id)      PaymentAuthorized, or PaymentFailed
PAYMENT_FAILED      ReleaseInventory(reservation id)  InventoryReleased, or Halt if not released
RELEASED            FailOrder                         OrderFailed
PAYMENT_AUTHORIZED  ConfirmOrder                      OrderConfirmed
CONFIRMED, FAILED   Finished                          --
==================  ================================  =======================================

Why no effect repeats. A step is produced only by the phase before its
outcome; once the outcome is recorded the phase has moved on and the fold never
asks for it again, after a restart or a relocation as much as in one process.
The one repeat left is an interruption between the module call and the append:
then the same deterministic ID goes to the module again, and the module answers
with its first result, so the effect itself happens once. Every step's append
carries ``stage_command_id(order, stage)``, so a retried append whose first
attempt did commit is recorded once by the store, and :func:`record` refuses a
step that is not the current fold's next step (a stale decision).

The start is :mod:`.start`'s. Continue and rebuild commands record nothing
themselves: what a continue runs is recorded under the steps' own IDs, so
repeating a continue is harmless and a continue of a half-done step finishes
it.
"""

from __future__ import annotations

from typing import ClassVar, TypeAlias

import attrs

from .errors import InvalidCommand
from .events import (
    InventoryReleasedEvent,
    InventoryReservationFailedEvent,
    InventoryReservedEvent,
    OrderConfirmedEvent,
    OrderEvent,
    OrderFailedEvent,
    PaymentAuthorizedEvent,
    PaymentFailedEvent,
    Recorded,
)
from .fold import OrderAggregate, Phase, apply
from .ids import Stage, event_id, payment_id, reservation_id, stage_command_id
from .values import OrderLine, OrderStatus

__all__ = (
    "INVENTORY_REFUSED",
    "PAYMENT_REFUSED",
    "Append",
    "AuthorizePayment",
    "ConfirmOrder",
    "Effect",
    "EffectResult",
    "FailOrder",
    "Finished",
    "Halt",
    "NotStarted",
    "ReleaseInventory",
    "ReserveInventory",
    "Step",
    "advance",
    "next_step",
    "record",
)

#: Reasons recorded when a module refuses without saying why.
INVENTORY_REFUSED = "inventory-refused"
PAYMENT_REFUSED = "payment-refused"


# --------------------------------------------------------------------------- steps


@attrs.frozen
class NotStarted:
    """The stream is empty: there is no order to continue (and nothing is created)."""

    order_id: str


@attrs.frozen
class Finished:
    """The order is terminal (Confirmed or Failed): nothing is left to do."""

    order_id: str
    status: OrderStatus


@attrs.frozen(kw_only=True)
class ReserveInventory:
    """Ask Inventory to reserve ``lines`` under the order's deterministic ReservationId."""

    stage: ClassVar[Stage] = Stage.RESERVE_INVENTORY
    order_id: str
    reservation_id: str
    lines: tuple[OrderLine, ...]


@attrs.frozen(kw_only=True)
class AuthorizePayment:
    """Ask Payment to authorize ``amount`` under the order's deterministic PaymentId.

    The payment method is not in the stream (the contract's OrderStartedEvent has no
    paymentMethodId); the application reads it from the cart snapshot
    (``cart_id``) in the CommerceStateStore.
    """

    stage: ClassVar[Stage] = Stage.AUTHORIZE_PAYMENT
    order_id: str
    payment_id: str
    cart_id: str
    amount: float
    currency: str


@attrs.frozen(kw_only=True)
class ReleaseInventory:
    """Compensate: ask Inventory to release the reservation the stream recorded."""

    stage: ClassVar[Stage] = Stage.RELEASE_INVENTORY
    order_id: str
    reservation_id: str
    reason: str


@attrs.frozen
class ConfirmOrder:
    """Record the confirmation; no module is called."""

    stage: ClassVar[Stage] = Stage.CONFIRM
    order_id: str


@attrs.frozen
class FailOrder:
    """Record the failure (after any compensation); no module is called."""

    stage: ClassVar[Stage] = Stage.FAIL
    order_id: str
    reason: str


#: The steps that call an external module.
Effect: TypeAlias = ReserveInventory | AuthorizePayment | ReleaseInventory
#: Everything :func:`next_step` returns.
Step: TypeAlias = NotStarted | Finished | Effect | ConfirmOrder | FailOrder


@attrs.frozen
class EffectResult:
    """A module's answer: ``accepted`` (reserved, authorized, released) and why not."""

    accepted: bool
    reason: str | None = None


@attrs.frozen(kw_only=True)
class Append:
    """Events to append to the order's stream, if it is still at ``expected_version``.

    ``source_command_id`` is the append's SourceCommandId: the start command's,
    or the step's deterministic ``stage_command_id``.
    """

    order_id: str
    expected_version: int
    source_command_id: str
    events: tuple[OrderEvent, ...]


@attrs.frozen
class Halt:
    """The step's outcome cannot be recorded yet; a later continue runs the step again.

    Only a release that Inventory did not confirm halts: the order must not be
    recorded Failed while its reservation may still hold stock.
    """

    order_id: str
    reason: str


def next_step(state: OrderAggregate) -> Step:
    """The one step the order's fold asks for (the table in the module docstring)."""
    order_id = state.order_id
    phase = state.phase
    if phase is Phase.NEW:
        return NotStarted(order_id)
    if state.terminal:
        return Finished(order_id, OrderStatus.CONFIRMED if phase is Phase.CONFIRMED
                        else OrderStatus.FAILED)
    if phase is Phase.CREATED:
        return ReserveInventory(order_id=order_id, reservation_id=reservation_id(order_id),
                                lines=state.lines)
    if phase is Phase.RESERVED:
        assert state.cart_id is not None
        assert state.amount is not None
        assert state.currency is not None
        return AuthorizePayment(order_id=order_id, payment_id=payment_id(order_id),
                                cart_id=state.cart_id, amount=state.amount,
                                currency=state.currency)
    if phase is Phase.PAYMENT_FAILED:
        assert state.reservation_id is not None
        return ReleaseInventory(order_id=order_id, reservation_id=state.reservation_id,
                                reason=state.reason or PAYMENT_REFUSED)
    if phase is Phase.PAYMENT_AUTHORIZED:
        return ConfirmOrder(order_id)
    # RESERVATION_FAILED, RELEASED: the failure's reason is already in the fold.
    return FailOrder(order_id, state.reason or INVENTORY_REFUSED)


def _event(state: OrderAggregate, step: Step, result: EffectResult | None,
           now_unix_ms: int) -> OrderEvent | Halt:
    ids = {"event_id": event_id(state.order_id, state.version + 1), "order_id": state.order_id}
    if isinstance(step, ConfirmOrder):
        return OrderConfirmedEvent(**ids, confirmed_at_unix_ms=now_unix_ms)
    if isinstance(step, FailOrder):
        return OrderFailedEvent(**ids, reason=step.reason, failed_at_unix_ms=now_unix_ms)
    if result is None:
        raise InvalidCommand(f"{type(step).__name__} of order {state.order_id!r} needs the "
                             "module's result to record")
    if isinstance(step, ReserveInventory):
        if result.accepted:
            return InventoryReservedEvent(**ids, reservation_id=step.reservation_id)
        return InventoryReservationFailedEvent(**ids, reason=result.reason or INVENTORY_REFUSED)
    if isinstance(step, AuthorizePayment):
        if result.accepted:
            return PaymentAuthorizedEvent(**ids, payment_id=step.payment_id)
        return PaymentFailedEvent(**ids, reason=result.reason or PAYMENT_REFUSED)
    assert isinstance(step, ReleaseInventory)
    if not result.accepted:
        return Halt(state.order_id, f"reservation {step.reservation_id!r} was not released: "
                    f"{result.reason or 'no reason given'}; continue the order to retry")
    return InventoryReleasedEvent(**ids, reservation_id=step.reservation_id, reason=step.reason)


def record(state: OrderAggregate, step: Step, result: EffectResult | None = None, *,
           now_unix_ms: int) -> Append | Halt:
    """What to append for ``step``'s outcome: ``result`` for an effect step, ``None`` otherwise.

    Raises :class:`InvalidCommand` if ``step`` is not ``next_step(state)`` (a
    decision made on another fold: replay and decide again), if it is
    :class:`NotStarted` or :class:`Finished` (nothing to record), or if an
    effect step comes without its result. ``now_unix_ms`` stamps
    OrderConfirmed and OrderFailed; the domain reads no clock.
    """
    if step != next_step(state):
        raise InvalidCommand(
            f"{step!r} is not the next step of order {state.order_id!r} at version "
            f"{state.version} ({next_step(state)!r}); replay the stream and decide again"
        )
    if isinstance(step, (NotStarted, Finished)):
        raise InvalidCommand(f"order {state.order_id!r}: {type(step).__name__} records nothing")
    event = _event(state, step, result, now_unix_ms)
    if isinstance(event, Halt):
        return event
    return Append(order_id=state.order_id, expected_version=state.version,
                  source_command_id=stage_command_id(state.order_id, step.stage),
                  events=(event,))


def advance(state: OrderAggregate, append: Append, *, recorded_at_unix_ms: int) -> OrderAggregate:
    """The state once ``append`` is recorded: what a replay of the stream would give.

    Raises :class:`InvalidCommand` if ``append`` was not made for ``state``'s
    version, :class:`CorruptStream` if its events cannot follow.
    """
    if append.order_id != state.order_id or append.expected_version != state.version:
        raise InvalidCommand(
            f"the append for order {append.order_id!r} at version {append.expected_version} "
            f"does not follow order {state.order_id!r} at version {state.version}"
        )
    for offset, event in enumerate(append.events, start=1):
        state = apply(state, Recorded(version=append.expected_version + offset, event=event,
                                      source_command_id=append.source_command_id,
                                      created_at_unix_ms=recorded_at_unix_ms))
    return state

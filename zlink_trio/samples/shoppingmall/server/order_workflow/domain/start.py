"""The start of an order: recorded once, whichever duplicate arrives first.

:func:`start` records the OrderStartedEvent, with the command's
SourceCommandId, only on an empty stream. Otherwise nothing is recorded and
:class:`AlreadyStarted` carries the fold to reply with; ``duplicate`` says
whether the stream holds this very command (a retry, or the other CommerceApi
process sending the same ``start_command_id(idempotency_key)``) or another
start of the same OrderId. Either way the order is not started twice, and the
write itself is guarded too: the append expects version 0, so of two starts
racing on an empty stream only one is recorded.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs

from .errors import InvalidCommand
from .events import OrderStartedEvent
from .ids import event_id
from .steps import Append
from .values import OrderLine

if TYPE_CHECKING:
    from .fold import OrderAggregate

__all__ = ("AlreadyStarted", "StartOrder", "start")


def _text(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidCommand(f"start: {attribute.name} must be a non-empty string, got {value!r}")


def _lines(instance: object, attribute: attrs.Attribute[object], value: object) -> None:
    if not isinstance(value, tuple) or not value or not all(
            isinstance(line, OrderLine) for line in value):
        raise InvalidCommand(f"start: lines must be a non-empty tuple of OrderLine, got {value!r}")


def _amount(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value >= 0):
        raise InvalidCommand(f"start: amount must be a finite number >= 0, got {value!r}")


@attrs.frozen(kw_only=True)
class StartOrder:
    """The start command, as the domain needs it; invalid fields raise :class:`InvalidCommand`."""

    order_id: str = attrs.field(validator=_text)
    cart_id: str = attrs.field(validator=_text)
    shipping_address_id: str = attrs.field(validator=_text)
    lines: tuple[OrderLine, ...] = attrs.field(validator=_lines)
    amount: float = attrs.field(validator=_amount)
    currency: str = attrs.field(validator=_text)
    source_command_id: str = attrs.field(validator=_text)


@attrs.frozen
class AlreadyStarted:
    """The order exists; nothing is recorded and the reply is ``state``'s fold.

    ``duplicate``: the stream already holds this command's SourceCommandId.
    """

    state: OrderAggregate
    duplicate: bool


def start(state: OrderAggregate, command: StartOrder) -> Append | AlreadyStarted:
    """Record the OrderStartedEvent on an empty stream; otherwise :class:`AlreadyStarted`.

    Raises :class:`InvalidCommand` if ``command`` is for another order.
    """
    if command.order_id != state.order_id:
        raise InvalidCommand(f"a start of order {command.order_id!r} sent to order "
                             f"{state.order_id!r}")
    if state.started:
        return AlreadyStarted(state, command.source_command_id in state.source_command_ids)
    event = OrderStartedEvent(
        event_id=event_id(state.order_id, 1), order_id=state.order_id,
        cart_id=command.cart_id, shipping_address_id=command.shipping_address_id,
        lines=command.lines, amount=float(command.amount), currency=command.currency,
        source_command_id=command.source_command_id,
    )
    return Append(order_id=state.order_id, expected_version=0,
                  source_command_id=command.source_command_id, events=(event,))

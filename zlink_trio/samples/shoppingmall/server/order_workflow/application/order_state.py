"""The OrderState an order's fold shows: what the read model holds and every reply carries.

The aggregate's read-model fields have OrderState's names (``domain.fold``),
so this is a projection by name; only the status changes type (the domain's
enum to the contract's, same values). An order without a stream has no
OrderState: :class:`UnknownOrder`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....shared.contracts import OrderState, OrderStatus

if TYPE_CHECKING:
    from ..domain import OrderAggregate

__all__ = ("UnknownOrder", "order_state_of")


class UnknownOrder(Exception):
    """Raised by a continue or a rebuild of an OrderId whose stream is empty (item 9.3-3).

    Nothing was recorded or projected. Over the framework it reaches the
    caller as a ``zl.HandlerError`` whose ``error_type`` is ``"UnknownOrder"``
    (``infrastructure.workflow_calls`` turns that into ``None``).
    """

    def __init__(self, order_id: str) -> None:
        super().__init__(f"order {order_id!r} has no event stream: it was never started; "
                         "nothing was recorded or projected")
        self.order_id = order_id


def order_state_of(state: OrderAggregate) -> OrderState:
    """The OrderState of ``state``; raises :class:`UnknownOrder` when it has no stream."""
    status = state.status
    if status is None:
        raise UnknownOrder(state.order_id)
    return OrderState(
        order_id=state.order_id, status=OrderStatus(status.value),
        shipping_address_id=state.shipping_address_id, reservation_id=state.reservation_id,
        payment_id=state.payment_id, amount=state.amount, currency=state.currency,
        reason=state.reason, updated_at_unix_ms=state.updated_at_unix_ms,
    )

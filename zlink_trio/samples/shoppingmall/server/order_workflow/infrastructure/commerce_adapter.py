"""What the workflow reads and moves in the CommerceStateStore: the mapping and the payment method.

**Mapping.** Once the start is recorded and Created projected, the
workflow moves the IdempotencyKey's mapping pending -> started
(:class:`CommerceIdempotency`). A key with no mapping (a start that did not
come through CommerceApi) is left alone; a key mapped to another order is
``MappingConflict`` and fails the start's reply.

**Payment method (a decision of the sample).** The contract's OrderStartedEvent has
no paymentMethodId, so the stream cannot say which method to authorize. It
is, in this order, the top-level ``"paymentMethodId"`` of

1. the cart snapshot (``get_cart(cart_id)``): a cart built at checkout with
   its payment instrument (the seeds' carts are: ``cart-pay-reject-…`` pays
   with the rejecting method whatever the request names), then
2. the start command's, in the incarnation that ran the start, then
3. the idempotency mapping's snapshot (CommerceApi's StartOrderReq as the
   codec writes it), the key being the one of the start's SourceCommandId
   (``start:<key>``, ``domain.start_command_id``) -- the same value, read by
   any other incarnation (after a relocation, a close, an idle eviction).

Every incarnation so pays one order with one method. Found nowhere, the
authorization is refused without calling Payment (reason
:data:`UNKNOWN_PAYMENT_METHOD`) and the order compensates and fails.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

import zlink_trio as zl

if TYPE_CHECKING:
    from collections.abc import Iterable

    from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
        CommerceStateStore,
    )

__all__ = ("UNKNOWN_PAYMENT_METHOD", "CommerceIdempotency", "find_payment_method")

#: The PaymentFailed reason when no payment method can be found for the order.
UNKNOWN_PAYMENT_METHOD: Final = "payment-method-unknown"
_START_PREFIX: Final = "start:"


class CommerceIdempotency:
    """:class:`~..application.Idempotency` over the CommerceStateStore."""

    def __init__(self, store: CommerceStateStore) -> None:
        self._store = store

    async def mark_started(self, idempotency_key: str, order_id: str) -> None:
        """See :meth:`Idempotency.mark_started`; a missing mapping is left alone."""
        try:
            await self._store.mark_started(idempotency_key, order_id)
        except zl.NotFound:
            return


def _method_in(snapshot: str | None) -> str | None:
    if not snapshot:
        return None
    try:
        data = json.loads(snapshot)
    except ValueError:
        return None
    method = data.get("paymentMethodId") if isinstance(data, dict) else None
    return method if isinstance(method, str) and method else None


async def find_payment_method(store: CommerceStateStore, cart_id: str,
                              source_command_ids: Iterable[str], *,
                              requested: str | None = None) -> str | None:
    """The order's payment method: the cart's, ``requested`` (the start command's) or the
    mapping snapshot's, in that order (module docstring)."""
    method = _method_in(await store.get_cart(cart_id)) or requested
    if method is not None:
        return method
    for command_id in sorted(source_command_ids):
        if command_id.startswith(_START_PREFIX) and len(command_id) > len(_START_PREFIX):
            mapping = await store.get_mapping(command_id[len(_START_PREFIX):])
            method = _method_in(mapping.snapshot if mapping is not None else None)
            if method is not None:
                return method
    return None

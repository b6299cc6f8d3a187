"""The cart snapshot CommerceApi reads from the CommerceStateStore to start an order.

The cart is built before the sample starts (the sample does not build carts): the runner
seeds one
snapshot per cart with ``CommerceStateStore.put_cart(cart_id, text)``, and
CommerceApi reads it when it starts an order, to put the lines, amount and
currency into StartOrderWorkflowReq. The text is a :class:`CartSnapshot` in
the framework's typed JSON codec, camelCase like the JSON contracts::

    {"lines": [{"sku": "sku-1", "quantity": 2}], "amount": 25.0, "currency": "EUR"}

:func:`encode_cart` writes it (for the runner's seeds); :func:`load_cart` reads
and checks it. A cart that does not exist or cannot be ordered (no lines, a
quantity below 1, a negative amount, no currency) is the client's input
error (:class:`~.inputs.ValidationError`); a stored snapshot that does not
decode is the deployment's (:class:`zlink_trio.RemoteProtocolError`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

import attrs

from zlink_trio.samples.shoppingmall.server.commerce_api.inputs import ValidationError
from zlink_trio.samples.shoppingmall.shared.contracts import (
    OrderLine,  # noqa: TC001 -- the codec resolves CartSnapshot's annotations at run time
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import zlink_trio as zl
    from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
        CommerceStateStore,
    )

__all__ = ("CartSnapshot", "encode_cart", "load_cart")


@attrs.frozen(kw_only=True)
class CartSnapshot:
    """A built cart: its lines and their total (module docstring for the JSON)."""

    __zlink_type__: ClassVar[str] = "shoppingmall.CartSnapshot"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    lines: tuple[OrderLine, ...]
    amount: float
    currency: str


def encode_cart(codec: zl.MessageCodec, cart: CartSnapshot) -> str:
    """The snapshot text ``put_cart`` stores for ``cart``."""
    return codec.to_json(cart).decode("utf-8")


async def load_cart(store: CommerceStateStore, codec: zl.MessageCodec, cart_id: str, *,
                    derive: Callable[[str], str | None] | None = None) -> CartSnapshot:
    """The snapshot of ``cart_id``, checked; reads only, writes nothing -- except that a
    cart the store lacks and ``derive`` builds (``serve``'s seed set: any cart ID with a
    seed prefix) is stored first, so every node reads that one cart from then on.

    Raises :class:`ValidationError` when there is no such cart or it cannot be
    ordered, :class:`zlink_trio.RemoteProtocolError` when the stored text does
    not decode, and :class:`zlink_trio.StoreUnavailable` when the store cannot
    be asked.
    """
    text = await store.get_cart(cart_id)
    if text is None and derive is not None:
        text = derive(cart_id)
        if text is not None:
            await store.put_cart(cart_id, text)
    if text is None:
        raise ValidationError(f"cartId {cart_id!r} names no cart; build the cart first")
    cart = codec.from_json(text.encode("utf-8"), CartSnapshot)
    problem = _unorderable(cart)
    if problem:
        raise ValidationError(f"cart {cart_id!r} cannot be ordered: {problem}")
    return cart


def _unorderable(cart: CartSnapshot) -> str:
    if not cart.lines:
        return "it has no lines"
    for line in cart.lines:
        if not line.sku or line.quantity < 1:
            return f"line {line.sku!r} needs a SKU and a quantity of at least 1"
    if not math.isfinite(cart.amount) or cart.amount < 0:
        return f"its amount {cart.amount!r} is not a finite number >= 0"
    if not cart.currency:
        return "it has no currency"
    return ""

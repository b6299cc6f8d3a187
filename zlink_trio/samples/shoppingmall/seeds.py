"""The seed data: carts, stock and payment methods, derived from a cart ID's prefix.

Theory of operation
-------------------
The cart is built before an order starts (the sample does not build carts), and
the Inventory and Payment modules answer from seeds. One rule derives everything
a seed needs from the cart ID, so ``serve`` (a newcomer with curl), the smoke
runner (the self-check's per-run carts) and any other part that must read a cart
agree:

==========================  ==========================  ====================
cart ID prefix              lines                       payment method
==========================  ==========================  ====================
``cart-ok-…``               ``sku-ok`` (always stocked)  ``pm-ok`` (accepts)
``cart-no-stock-…``         ``sku-no-stock`` (stock 0)   ``pm-ok``
``cart-pay-reject-…``       ``sku-ok``                   ``pm-reject`` (rejects)
==========================  ==========================  ====================

Any suffix works; the quantity (1..3) and the unit price (5..24 EUR, whole
euros) come from the SHA-256 of the whole cart ID, so one cart ID always
means one cart. :func:`derive_cart` gives the cart (``None`` for an ID with
none of the prefixes); :func:`cart_document` is its snapshot text as the
CommerceStateStore keeps it (``put_cart``): the lines, amount and currency
CommerceApi reads (camelCase, as the JSON contracts) plus the
``paymentMethodId`` the workflow falls back to. :func:`seed_plan` lists the
whole seed set for some carts: the two SKUs' stock, the two methods, and each
cart's document.

The payment method of an order is the one its StartOrderReq names; the
runner's client sends :attr:`SeedCart.payment_method_id` for the cart it
uses. Nothing here touches a store: whoever seeds applies the plan
(``runner.seeding``).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Final

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ("CURRENCY", "PAYMENT_METHODS", "PREFIXES", "STOCK", "SeedCart", "SeedPlan",
           "cart_document", "derive_cart", "derived_cart_document", "seed_plan")

#: The branch (event order) each cart ID prefix leads to.
PREFIXES: Final = {"cart-ok-": "success", "cart-no-stock-": "inventory-failure",
                   "cart-pay-reject-": "payment-failure"}
#: The stock each SKU is seeded with: plenty, or none.
STOCK: Final = {"sku-ok": 1_000_000_000, "sku-no-stock": 0}
#: Each seeded payment method: accepts (True) or rejects (False).
PAYMENT_METHODS: Final = {"pm-ok": True, "pm-reject": False}
CURRENCY: Final = "EUR"


@attrs.frozen(kw_only=True)
class SeedCart:
    """One derived cart: what the order will contain and which method pays it."""

    cart_id: str
    sku: str
    quantity: int
    unit_price: int
    payment_method_id: str

    @property
    def amount(self) -> float:
        """The order total (what the read model shows once authorized)."""
        return float(self.quantity * self.unit_price)

    @property
    def branch(self) -> str:
        """``success``, ``inventory-failure`` or ``payment-failure``."""
        return next(b for p, b in PREFIXES.items() if self.cart_id.startswith(p))


@attrs.frozen(kw_only=True)
class SeedPlan:
    """A whole seed set: stock per SKU, accept per method, snapshot per cart."""

    stock: dict[str, int]
    payment_methods: dict[str, bool]
    carts: dict[str, str]


def derive_cart(cart_id: str) -> SeedCart | None:
    """The cart ``cart_id`` names by its prefix (module docstring), or ``None``."""
    prefix = next((p for p in PREFIXES if cart_id.startswith(p)), None)
    if prefix is None:
        return None
    digest = hashlib.sha256(cart_id.encode("utf-8")).digest()
    sku = "sku-no-stock" if prefix == "cart-no-stock-" else "sku-ok"
    method = "pm-reject" if prefix == "cart-pay-reject-" else "pm-ok"
    return SeedCart(cart_id=cart_id, sku=sku, quantity=1 + digest[0] % 3,
                    unit_price=5 + digest[1] % 20, payment_method_id=method)


def derived_cart_document(cart_id: str) -> str | None:
    """The snapshot text of the cart ``cart_id`` names by its prefix, or ``None``."""
    cart = derive_cart(cart_id)
    return None if cart is None else cart_document(cart)


def cart_document(cart: SeedCart) -> str:
    """The cart snapshot text ``CommerceStateStore.put_cart`` keeps for ``cart``."""
    return json.dumps({
        "lines": [{"sku": cart.sku, "quantity": cart.quantity}],
        "amount": cart.amount, "currency": CURRENCY,
        "paymentMethodId": cart.payment_method_id,
    }, separators=(",", ":"))


def seed_plan(cart_ids: Iterable[str]) -> SeedPlan:
    """The seed set for ``cart_ids``; ``ValueError`` for an ID with no known prefix."""
    carts: dict[str, str] = {}
    for cart_id in cart_ids:
        cart = derive_cart(cart_id)
        if cart is None:
            raise ValueError(f"cart ID {cart_id!r} has none of the prefixes {sorted(PREFIXES)}")
        carts[cart_id] = cart_document(cart)
    return SeedPlan(stock=dict(STOCK), payment_methods=dict(PAYMENT_METHODS), carts=carts)

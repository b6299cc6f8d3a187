"""``serve``'s carts: any cart ID with a seed prefix is a cart, and a cart pays with its own
payment method, so ``cart-pay-reject-…`` fails at payment whatever the request names."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.seeds import derive_cart, derived_cart_document
from zlink_trio.samples.shoppingmall.server.commerce_api.cart import load_cart
from zlink_trio.samples.shoppingmall.server.commerce_api.inputs import ValidationError
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.commerce_adapter import (
    find_payment_method,
)
from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
    open_commerce_state_store,
)

if TYPE_CHECKING:
    from pathlib import Path


async def test_a_derived_cart_is_stored_once_and_then_read_by_everyone(tmp_path: Path):
    codec = zl.MessageCodec()
    with trio.fail_after(10):
        async with open_commerce_state_store(f"sqlite://{tmp_path / 'c.db'}") as store:
            cart = await load_cart(store, codec, "cart-ok-anything", derive=derived_cart_document)
            seed = derive_cart("cart-ok-anything")
            assert seed is not None
            assert cart.amount == seed.amount
            assert await store.get_cart("cart-ok-anything") == derived_cart_document(
                "cart-ok-anything")
            # without the rule the stored cart is still there; an unknown prefix is refused
            assert (await load_cart(store, codec, "cart-ok-anything")).amount == seed.amount
            with pytest.raises(ValidationError, match="names no cart"):
                await load_cart(store, codec, "basket-1", derive=derived_cart_document)
            assert await store.get_cart("basket-1") is None


async def test_a_cart_pays_with_its_own_method_whatever_the_request_names(tmp_path: Path):
    with trio.fail_after(10):
        async with open_commerce_state_store(f"sqlite://{tmp_path / 'c.db'}") as store:
            document = derived_cart_document("cart-pay-reject-7")
            assert document is not None
            await store.put_cart("cart-pay-reject-7", document)
            assert await find_payment_method(store, "cart-pay-reject-7", (),
                                             requested="pm-ok") == "pm-reject"
            # a cart without a method of its own pays with the request's
            await store.put_cart("plain", '{"lines":[{"sku":"s","quantity":1}],'
                                          '"amount":1.0,"currency":"EUR"}')
            assert await find_payment_method(store, "plain", (), requested="pm-ok") == "pm-ok"

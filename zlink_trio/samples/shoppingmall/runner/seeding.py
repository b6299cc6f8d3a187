"""Prepare the stores (before any process starts) and apply a :class:`~..seeds.SeedPlan` to them.

:func:`prepare_stores` opens each of the five stores once, before any node starts, so
their files or key spaces and schemas exist when the four processes open them at once.
:func:`apply_seed_plan` writes a seed plan into the CommerceStateStore and the two
seeded modules.

``serve`` seeds its default set this way before the nodes start; in runner
mode the self-check's own seeds arrive through the ``/self-check/seed`` hook
(``hooks_app``), which calls the same function inside a Workflow process.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_store import (
    open_order_event_store,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.inventory import (
    open_inventory,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.payment import (
    open_payment,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (
    open_order_read_model_store,
)
from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
    open_commerce_state_store,
)

if TYPE_CHECKING:
    from zlink_trio.samples.shoppingmall.runner.topology import StoreUrls
    from zlink_trio.samples.shoppingmall.seeds import SeedPlan

__all__ = ("apply_seed_plan", "prepare_stores")


async def prepare_stores(urls: StoreUrls) -> None:
    """Open (and so create) every store of ``urls`` once, one after another."""
    async with zl.open_store(urls.location, relocation=urls.relocation):
        pass
    async with open_order_event_store(urls.events):
        pass
    async with open_order_read_model_store(urls.read_model):
        pass
    async with open_commerce_state_store(urls.commerce):
        pass


async def apply_seed_plan(commerce_url: str, plan: SeedPlan) -> None:
    """Write ``plan`` into the stores at ``commerce_url`` (carts, stock, payment methods)."""
    async with AsyncExitStack() as stack:
        commerce = await stack.enter_async_context(open_commerce_state_store(commerce_url))
        inventory = await stack.enter_async_context(open_inventory(commerce_url))
        payment = await stack.enter_async_context(open_payment(commerce_url))
        for sku, quantity in plan.stock.items():
            await inventory.seed_stock(sku, quantity)
        for method, accept in plan.payment_methods.items():
            await payment.seed_payment_method(method, accept=accept)
        for cart_id, document in plan.carts.items():
            await commerce.put_cart(cart_id, document)

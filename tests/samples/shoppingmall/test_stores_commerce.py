"""ShoppingMall's CommerceStateStore and the Inventory/Payment stand-ins, on both backends.

Every test taking ``url`` runs on SQLite and on Redis (``store_backends``).
Concurrency goes through two objects opened on the same URL -- two
connections, as two processes would have. Each test bounds itself with
``trio.fail_after``; nothing sleeps.
"""

from __future__ import annotations

import pytest
import trio
from store_backends import TIMEOUT, Line, url

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.effect_calls import (
    EffectResult,
    ModuleCall,
    repeated_effects,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.inventory import (
    INSUFFICIENT,
    NOT_RESERVED,
    open_inventory,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.payment import (
    REJECTED,
    UNKNOWN_METHOD,
    open_payment,
)
from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
    IdempotencyStatus,
    MappingConflict,
    open_commerce_state_store,
)

__all__ = ("url",)  # the fixture, imported for pytest


# -- CommerceStateStore -------------------------------------------------------------------


async def test_idempotency_50_concurrent_identical_starts_one_winner(url):
    results = []
    with trio.fail_after(TIMEOUT):
        async with (open_commerce_state_store(url) as a,
                    open_commerce_state_store(url) as b):
            async def start(i: int) -> None:
                results.append((i, await (a, b)[i % 2].reserve_order(
                    "idem-1", f"order-{i}", f'{{"candidate":{i}}}')))

            async with trio.open_nursery() as nursery:
                for i in range(50):
                    nursery.start_soon(start, i)
            winners = [i for i, result in results if result.reserved]
            assert len(winners) == 1
            mappings = {result.mapping for _, result in results}
            assert len(mappings) == 1
            (mapping,) = mappings
            assert mapping.order_id == f"order-{winners[0]}"
            assert mapping.snapshot == f'{{"candidate":{winners[0]}}}'
            assert mapping.status is IdempotencyStatus.PENDING
            assert await a.get_mapping("idem-1") == mapping
            assert await a.get_mapping("idem-2") is None


async def test_idempotency_pending_to_started_is_a_compare_and_set(url):
    results = []
    with trio.fail_after(TIMEOUT):
        async with (open_commerce_state_store(url) as a,
                    open_commerce_state_store(url) as b):
            with pytest.raises(zl.NotFound):
                await a.mark_started("idem-1", "order-1")
            await a.reserve_order("idem-1", "order-1")
            with pytest.raises(MappingConflict) as caught:
                await b.mark_started("idem-1", "order-2")
            assert isinstance(caught.value, zl.StaleFence)
            assert caught.value.mapping.order_id == "order-1"
            pending = await a.get_mapping("idem-1")
            assert pending is not None
            assert pending.status is IdempotencyStatus.PENDING  # the conflict wrote nothing

            async def mark(i: int) -> None:
                results.append(await (a, b)[i % 2].mark_started("idem-1", "order-1"))

            async with trio.open_nursery() as nursery:
                for i in range(50):
                    nursery.start_soon(mark, i)
            assert sum(r.changed for r in results) == 1
            assert {r.mapping.status for r in results} == {IdempotencyStatus.STARTED}
            again = await a.reserve_order("idem-1", "order-9")
            assert not again.reserved
            assert (again.mapping.order_id, again.mapping.status) == (
                "order-1", IdempotencyStatus.STARTED)


async def test_cart_snapshots(url):
    with trio.fail_after(TIMEOUT):
        async with open_commerce_state_store(url) as store:
            assert await store.get_cart("cart-1") is None
            await store.put_cart("cart-1", '{"lines":[]}')
            await store.put_cart("cart-1", '{"lines":[["sku-1",1]]}')
            assert await store.get_cart("cart-1") == '{"lines":[["sku-1",1]]}'
            with pytest.raises(zl.InvalidOperation):
                await store.put_cart("", "{}")


# -- Inventory and Payment ------------------------------------------------------------------


async def test_inventory_first_result_wins_under_concurrency(url):
    results = []
    with trio.fail_after(TIMEOUT):
        async with open_inventory(url) as a, open_inventory(url) as b:
            await a.seed_stock("sku-1", 5)
            await a.seed_stock("sku-2", 1)

            async def reserve(i: int) -> None:
                results.append(await (a, b)[i % 2].reserve(
                    "o-1", "o-1:reservation", [Line("sku-1", 1), Line("sku-2", 1),
                                               Line("sku-1", 1)]))

            async with trio.open_nursery() as nursery:
                for i in range(30):
                    nursery.start_soon(reserve, i)
            assert set(results) == {EffectResult(accepted=True)}
            assert (await a.stock("sku-1"), await a.stock("sku-2")) == (3, 0)  # taken once
            calls = await b.calls("o-1")
            assert len(calls) == 30
            assert [c.effect for c in calls].count(True) == 1
            assert repeated_effects(calls) == ()
            assert {(c.module, c.operation, c.request_id) for c in calls} == {
                ("inventory", "reserve", "o-1:reservation")}


async def test_inventory_insufficient_stock_is_refused_for_good(url):
    with trio.fail_after(TIMEOUT):
        async with open_inventory(url) as inventory:
            await inventory.seed_stock("sku-1", 1)
            refused = await inventory.reserve("o-1", "r-1", [Line("sku-1", 2)])
            assert refused == EffectResult(accepted=False, reason=INSUFFICIENT)
            unseeded = await inventory.reserve("o-2", "r-2", [Line("sku-9", 1)])
            assert unseeded == EffectResult(accepted=False, reason=INSUFFICIENT)
            assert await inventory.stock("sku-1") == 1  # nothing taken
            await inventory.seed_stock("sku-1", 10)
            assert await inventory.reserve("o-1", "r-1", [Line("sku-1", 2)]) == refused
            assert await inventory.stock("sku-1") == 10
            release = await inventory.release("o-1", "r-1", "inventory failed")
            assert release == EffectResult(accepted=False, reason=NOT_RESERVED)
            with pytest.raises(zl.InvalidOperation):
                await inventory.reserve("o-3", "r-3", [])
            with pytest.raises(zl.InvalidOperation):
                await inventory.reserve("o-3", "r-3", [Line("sku-1", 0)])


async def test_inventory_release_returns_the_stock_once(url):
    results = []
    with trio.fail_after(TIMEOUT):
        async with open_inventory(url) as a, open_inventory(url) as b:
            await a.seed_stock("sku-1", 4)
            assert (await a.reserve("o-1", "r-1", [Line("sku-1", 3)])).accepted
            assert await a.stock("sku-1") == 1

            async def release(i: int) -> None:
                results.append(await (a, b)[i % 2].release("o-1", "r-1", "payment failed"))

            async with trio.open_nursery() as nursery:
                for i in range(20):
                    nursery.start_soon(release, i)
            assert set(results) == {EffectResult(accepted=True)}
            assert await a.stock("sku-1") == 4
            releases = [c for c in await a.calls("o-1") if c.operation == "release"]
            assert len(releases) == 20
            assert [c.effect for c in releases].count(True) == 1


async def test_payment_first_result_wins_under_concurrency(url):
    results = []
    with trio.fail_after(TIMEOUT):
        async with open_payment(url) as a, open_payment(url) as b:
            await a.seed_payment_method("card-ok", accept=True)

            async def authorize(i: int) -> None:
                results.append(await (a, b)[i % 2].authorize(
                    "o-1", "o-1:payment", "card-ok", 42.5, "KRW"))

            async with trio.open_nursery() as nursery:
                for i in range(30):
                    nursery.start_soon(authorize, i)
            assert set(results) == {EffectResult(accepted=True)}
            await a.seed_payment_method("card-ok", accept=False)  # the first result stays
            assert await b.authorize("o-1", "o-1:payment", "card-ok", 42.5, "KRW") == \
                EffectResult(accepted=True)
            calls = await a.calls("o-1")
            assert len(calls) == 31
            assert [c.effect for c in calls].count(True) == 1
            assert repeated_effects(calls) == ()
            assert {(c.module, c.operation) for c in calls} == {("payment", "authorize")}


async def test_payment_follows_the_seeds(url):
    with trio.fail_after(TIMEOUT):
        async with open_payment(url) as payment:
            await payment.seed_payment_method("card-declined", accept=False)
            await payment.seed_payment_method("card-limit", accept=False, reason="over-limit")
            assert await payment.authorize("o-1", "p-1", "card-declined", 10, "KRW") == \
                EffectResult(accepted=False, reason=REJECTED)
            assert await payment.authorize("o-2", "p-2", "card-limit", 10, "KRW") == \
                EffectResult(accepted=False, reason="over-limit")
            assert await payment.authorize("o-3", "p-3", "card-nobody", 10, "KRW") == \
                EffectResult(accepted=False, reason=UNKNOWN_METHOD)
            with pytest.raises(zl.InvalidOperation):
                await payment.authorize("o-4", "p-4", "card-limit", True, "KRW")


async def test_module_calls_are_kept_per_order_and_module(url):
    with trio.fail_after(TIMEOUT):
        async with open_inventory(url) as inventory, open_payment(url) as payment:
            await inventory.seed_stock("sku-1", 1)
            await payment.seed_payment_method("card-ok", accept=True)
            await inventory.reserve("o-1", "r-1", [Line("sku-1", 1)], caller="workflow-a")
            # After a planned relocation the target calls on (same ids, another caller).
            await inventory.reserve("o-1", "r-1", [Line("sku-1", 1)], caller="workflow-b")
            await payment.authorize("o-1", "p-1", "card-ok", 1, "KRW", caller="workflow-b")
            await inventory.reserve("o-2", "r-2", [Line("sku-1", 1)])
            assert [(c.operation, c.effect, c.caller) for c in await inventory.calls("o-1")] == [
                ("reserve", True, "workflow-a"), ("reserve", False, "workflow-b")]
            assert [(c.operation, c.caller) for c in await payment.calls("o-1")] == [
                ("authorize", "workflow-b")]
            with pytest.raises(zl.InvalidOperation):
                await payment.authorize("o-1", "p-1", "card-ok", 1, "KRW", caller="")
            with pytest.raises(zl.InvalidOperation):
                await inventory.seed_stock("sku-1", -1)
            (refused,) = await inventory.calls("o-2")
            assert refused.result == EffectResult(accepted=False, reason=INSUFFICIENT)
            assert await payment.calls("o-2") == ()  # no Payment module call


def test_repeated_effects_names_a_second_effect_for_one_id():
    def call(request_id: str, effect: bool, operation: str = "reserve") -> ModuleCall:
        return ModuleCall(module="inventory", operation=operation, order_id="o-1",
                          request_id=request_id, effect=effect,
                          result=EffectResult(accepted=True))

    once = [call("r-1", True), call("r-1", False), call("r-1", True, "release"),
            call("r-2", True)]
    assert repeated_effects(once) == ()
    twice = call("r-1", True)
    assert repeated_effects([*once, twice]) == (twice,)

"""The Client's self-check, all 15 items, through the public order API only.

The items are those of ``docs/shoppingmall.md``, "The Client's self-check".

The Client starts orders, polls the read model, and sends duplicates,
continues and rebuilds over HTTP (``api``); it asserts only public responses
and lookup states. It never calls a hook and never waits for the runner: an
item whose fixture needs the runner between two steps (delete a projection,
wait for a release, relocate, terminate an owner) uses an order the runner
prepared before the Client started, named in its configuration
(``config.ORDER_ROLES``). After each item it reports ``shoppingmall-client
passed item=<n> order=<OrderId>`` (``reports``) so the runner can check the
event stream and external effects of exactly that order afterwards.

=======  ====================================================================
item     what the Client asserts (the runner's share: ``runner.verify``)
=======  ====================================================================
9.1-1    a new IdempotencyKey starts with ``state.status = Created``
9.1-2    it becomes Confirmed with ReservationId, PaymentId, amount, currency
9.1-3    a no-stock cart ends Failed, without a PaymentId
9.1-4    a rejected payment ends Failed after its reservation
9.1-5    the success order reads Confirmed through both APIs (event order: runner)
9.2-1    one key sent to both APIs at once gives one OrderId (one start: runner)
9.2-2    an order stopped at InventoryReserved is continued to Confirmed
9.2-3    a terminal order whose projection lagged reads terminal after continue
9.2-4    a deleted projection is 404, and a rebuild gives back the Confirmed state
         (the runner compares it with the state it saw before deleting)
9.2-5    once released, a command on a terminal order answers its same state
9.2-6    a relocated order (gated after InventoryReserved) ends Confirmed
9.3-1    concurrent orders read the same through either API
9.3-2    its Ready owner terminated, a command is 503 Unavailable; nothing moves
9.3-3    continue/rebuild of an unknown OrderId are 404, and create nothing
9.3-4    the config and the messages name no node, NodeRid or endpoint
=======  ====================================================================
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.client.api import ApiError, OrderApi, wait_status
from zlink_trio.samples.shoppingmall.client.config import (
    config_names_and_values,
    forbidden_names,
)
from zlink_trio.samples.shoppingmall.client.reports import PASSED_PREFIX, stdout_line
from zlink_trio.samples.shoppingmall.seeds import CURRENCY, derive_cart
from zlink_trio.samples.shoppingmall.shared.contracts import OrderState, OrderStatus, StartOrderReq

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.samples.shoppingmall.client.config import ClientConfig

__all__ = ("ITEMS", "Scenario", "ScenarioFailure")

_S: Final = OrderStatus
START_FIELDS: Final = ("cartId", "shippingAddressId", "paymentMethodId", "idempotencyKey")


class ScenarioFailure(Exception):
    """One assertion of the self-check failed; the message says which and what was seen."""


def check(condition: bool, message: str) -> None:
    """Raise :class:`ScenarioFailure` with ``message`` unless ``condition``."""
    if not condition:
        raise ScenarioFailure(message)


def _same(a: OrderState, b: OrderState) -> bool:
    return attrs.evolve(a, updated_at_unix_ms=0) == attrs.evolve(b, updated_at_unix_ms=0)


class Scenario:
    """Runs the items in order (module docstring) against ``config``'s APIs."""

    def __init__(self, config: ClientConfig, apis: list[OrderApi], *,
                 say: Callable[[str], None] = stdout_line) -> None:
        self.config = config
        self.a, self.b = apis[0], apis[1]
        self.say = say
        self.last: str = "nothing confirmed yet"
        self.orders: dict[str, OrderState] = {}

    def passed(self, item: str, state: OrderState | None, **extra: str) -> None:
        """Report ``item`` as passed (and remember the last confirmed state)."""
        words = [f"{PASSED_PREFIX}item={item}"]
        if state is not None:
            words.append(f"order={state.order_id}")
            self.last = f"item {item}: order {state.order_id} {state.status}"
        else:
            self.last = f"item {item}"
        words += [f"{k}={v}" for k, v in extra.items()]
        self.say(" ".join(words))

    def request(self, role: str, key: str | None = None) -> StartOrderReq:
        """A StartOrderReq for the cart of ``role`` (or a concurrent cart ID) with a fresh key."""
        cart_id = self.config.carts.get(role, role)
        cart = derive_cart(cart_id)
        check(cart is not None, f"cart {cart_id!r} has no known prefix")
        assert cart is not None
        return StartOrderReq(cart_id=cart_id, shipping_address_id="addr-home",
                             payment_method_id=cart.payment_method_id,
                             idempotency_key=key or f"key-{uuid.uuid4()}")

    async def start(self, role: str, api: OrderApi | None = None) -> OrderState:
        res = await (api or self.a).start(self.request(role))
        check(res.state.order_id == res.order_id, f"start: state names {res.state.order_id}")
        return res.state

    # -- 9.3-4 ---------------------------------------------------------------------------
    async def item_9_3_4(self) -> None:
        found = forbidden_names(*config_names_and_values(self.config))
        check(not found, f"9.3-4: the client config names {found}")
        codec = zl.MessageCodec()
        sent = json.loads(codec.to_json(self.request("success")))
        check(sorted(sent) == sorted(START_FIELDS), f"9.3-4: StartOrderReq carries {sorted(sent)}")
        read = json.loads(codec.to_json(self.orders["success"]))
        found = forbidden_names(read)
        check(not found, f"9.3-4: OrderState has the fields {found}")
        self.passed("9.3-4", None)

    # -- 9.1 -----------------------------------------------------------------------------
    async def item_9_1_1_and_2(self) -> None:
        state = await self.start("success")
        check(state.status is _S.CREATED, f"9.1-1: StartOrderRes status {state.status}")
        self.passed("9.1-1", state)
        final = await wait_status(self.a, state.order_id)
        cart = derive_cart(self.config.carts["success"])
        assert cart is not None
        check(final.status is _S.CONFIRMED, f"9.1-2: ended {final.status} ({final.reason})")
        check(bool(final.reservation_id) and bool(final.payment_id),
              f"9.1-2: reservationId {final.reservation_id!r} paymentId {final.payment_id!r}")
        check(final.amount == cart.amount and final.currency == CURRENCY,
              f"9.1-2: amount {final.amount} {final.currency}, wanted {cart.amount} {CURRENCY}")
        self.orders["success"] = final
        self.passed("9.1-2", final)

    async def item_9_1_3(self) -> None:
        final = await wait_status(self.a, (await self.start("noStock", self.b)).order_id)
        check(final.status is _S.FAILED and final.payment_id is None,
              f"9.1-3: {final.status} paymentId {final.payment_id!r}")
        self.orders["noStock"] = final
        self.passed("9.1-3", final)

    async def item_9_1_4(self) -> None:
        final = await wait_status(self.b, (await self.start("payReject")).order_id)
        check(final.status is _S.FAILED and bool(final.reservation_id),
              f"9.1-4: {final.status} reservationId {final.reservation_id!r}")
        self.passed("9.1-4", final)

    async def item_9_1_5(self) -> None:
        first = self.orders["success"]
        seen = [await api.get(first.order_id) for api in (self.a, self.b)]
        check(all(s == first for s in seen), f"9.1-5: the APIs read {seen}")
        self.passed("9.1-5", first)

    # -- 9.2 -----------------------------------------------------------------------------
    async def item_9_2_1(self) -> None:
        req = self.request("duplicate")
        results: list[OrderState] = []

        async def send(api: OrderApi) -> None:
            results.append((await api.start(req)).state)

        async with trio.open_nursery() as nursery:
            for api in (self.a, self.b, self.a, self.b):
                nursery.start_soon(send, api)
        ids = {s.order_id for s in results}
        check(len(ids) == 1, f"9.2-1: one key gave the OrderIds {sorted(ids)}")
        final = await wait_status(self.a, results[0].order_id)
        check(final.status is _S.CONFIRMED, f"9.2-1: ended {final.status}")
        self.passed("9.2-1", final)

    async def item_9_2_2(self) -> None:
        state = await self.start("resume")
        parked = await wait_status(self.a, state.order_id, frozenset({_S.INVENTORY_RESERVED}))
        resumed = await self.b.continue_order(state.order_id, f"continue-{uuid.uuid4()}")
        final = await wait_status(self.a, state.order_id)
        check(final.status is _S.CONFIRMED and final.reservation_id == parked.reservation_id,
              f"9.2-2: continue gave {resumed.status}, ended {final.status}, reservation "
              f"{parked.reservation_id} -> {final.reservation_id}")
        self.passed("9.2-2", final)

    async def item_9_2_3(self) -> None:
        state = await self.start("terminalProjection")
        await wait_status(self.a, state.order_id, frozenset({_S.PAYMENT_AUTHORIZED}))
        resumed = await self.a.continue_order(state.order_id, f"continue-{uuid.uuid4()}")
        looked = await self.b.get(state.order_id)
        check(resumed.status is _S.CONFIRMED and _same(looked, resumed),
              f"9.2-3: continue gave {resumed.status}, the lookup {looked.status}")
        self.passed("9.2-3", looked)

    async def item_9_2_4(self) -> None:
        order_id = self.config.orders["rebuild"]  # Confirmed; the runner deleted its projection
        try:
            gone = await self.a.get(order_id)
            raise ScenarioFailure(f"9.2-4: the deleted projection still reads {gone.status}")
        except ApiError as exc:
            check(exc.status == 404, f"9.2-4: lookup after deletion: {exc}")
        rebuilt = await self.b.rebuild(order_id, f"rebuild-{uuid.uuid4()}")
        looked = await self.a.get(order_id)
        cart = derive_cart(self.config.carts["rebuild"])
        assert cart is not None
        check(rebuilt.status is _S.CONFIRMED and _same(looked, rebuilt)
              and bool(rebuilt.reservation_id) and bool(rebuilt.payment_id)
              and rebuilt.amount == cart.amount and rebuilt.currency == CURRENCY,
              f"9.2-4: rebuilt {rebuilt}, looked up {looked}")
        self.passed("9.2-4", looked)

    async def item_9_2_5(self) -> None:
        order_id = self.config.orders["released"]  # Failed; its close released the authority
        before = await self.b.get(order_id)
        check(before.status is _S.FAILED, f"9.2-5: the released order reads {before.status}")
        again = await self.a.continue_order(order_id, f"continue-{uuid.uuid4()}")
        check(_same(again, before), f"9.2-5: a new generation answered {again}, was {before}")
        self.passed("9.2-5", again)

    async def item_9_2_6(self) -> None:
        order_id = self.config.orders["relocation"]  # moved by the runner after InventoryReserved
        final = await wait_status(self.a, order_id)
        check(final.status is _S.CONFIRMED and bool(final.payment_id),
              f"9.2-6: after the relocation the order ended {final.status} ({final.reason})")
        self.passed("9.2-6", final)

    # -- 9.3 -----------------------------------------------------------------------------
    async def item_9_3_1(self) -> None:
        states: list[OrderState] = []

        async def one(cart_id: str, api: OrderApi) -> None:
            states.append(await self.start(cart_id, api))

        async with trio.open_nursery() as nursery:
            for i, cart_id in enumerate(self.config.concurrent_carts):
                nursery.start_soon(one, cart_id, (self.a, self.b)[i % 2])
        for state in states:
            final = await wait_status(self.b, state.order_id)
            other = await self.a.get(state.order_id)
            check(final.status is _S.CONFIRMED and other == final,
                  f"9.3-1: order {state.order_id}: {final.status} via one API, {other.status} "
                  "via the other")
            self.passed("9.3-1", final)

    async def item_9_3_3(self) -> None:
        order_id = f"order-unknown-{uuid.uuid4()}"
        for call in (self.a.continue_order, self.b.rebuild):
            try:
                got = await call(order_id, f"cmd-{uuid.uuid4()}")
                raise ScenarioFailure(f"9.3-3: an unknown order answered {got}")
            except ApiError as exc:
                check(exc.status == 404, f"9.3-3: wanted 404, got {exc}")
        try:
            await self.a.get(order_id)
            raise ScenarioFailure("9.3-3: the unknown order now has a lookup state")
        except ApiError as exc:
            check(exc.status == 404, f"9.3-3: lookup: {exc}")
        self.passed("9.3-3", None, order=order_id)

    async def item_9_3_2(self) -> None:
        order_id = self.config.orders["failureBoundary"]  # its Ready owner was terminated
        parked = await self.a.get(order_id)
        check(parked.status is _S.INVENTORY_RESERVED,
              f"9.3-2: the order reads {parked.status} before the command")
        try:
            got = await self.b.continue_order(order_id, f"continue-{uuid.uuid4()}")
            raise ScenarioFailure(f"9.3-2: a command to a dead owner answered {got.status}")
        except ApiError as exc:
            check(exc.status == 503 and exc.error == "Unavailable",
                  f"9.3-2: wanted 503 Unavailable, got {exc}")
        after = await self.a.get(order_id)
        check(_same(after, parked), f"9.3-2: the order moved on to {after.status}")
        self.passed("9.3-2", after)

    async def run(self) -> None:
        """Every item, in :data:`ITEMS` order."""
        for name in ITEMS:
            method: Callable[[], Awaitable[Any]] = getattr(self, name)
            await method()


#: The order the items run in (every fixture was prepared before the Client started).
ITEMS: Final = ("item_9_1_1_and_2", "item_9_1_3", "item_9_1_4", "item_9_1_5", "item_9_3_4",
                "item_9_2_1", "item_9_2_2", "item_9_2_3", "item_9_2_4", "item_9_2_5",
                "item_9_2_6", "item_9_3_1", "item_9_3_3", "item_9_3_2")

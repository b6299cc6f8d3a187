"""OrderWorkflowSpot's three event orders on two nodes of one process: success, inventory failure,
payment rejection (compensation), and the start's duplicate handling (items 9.1-n, 9.2-1).

Every test is bounded by ``trio.fail_after`` and waits on the harness's Watch (woken by
every append and projection), never on a fixed sleep.
"""

from __future__ import annotations

import trio
from workflow_harness import CALL, TIMEOUT, open_harness

from zlink_trio.samples.shoppingmall.server.order_workflow.domain import (
    payment_id,
    reservation_id,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.workflow_calls import (
    start_order_workflow,
)
from zlink_trio.samples.shoppingmall.shared.contracts import OrderStatus

SUCCESS = ["OrderStartedEvent", "InventoryReservedEvent", "PaymentAuthorizedEvent",
           "OrderConfirmedEvent"]
INVENTORY_FAILURE = ["OrderStartedEvent", "InventoryReservationFailedEvent", "OrderFailedEvent"]
PAYMENT_FAILURE = ["OrderStartedEvent", "InventoryReservedEvent", "PaymentFailedEvent",
                   "InventoryReleasedEvent", "OrderFailedEvent"]


async def test_a_started_order_replies_created_then_confirms_in_the_background(tmp_path):
    with trio.fail_after(TIMEOUT):
        async with open_harness(tmp_path) as h:
            await h.seed(cart_id="c1")
            req = h.start_req("c1")
            # Called from the node that does not own it: the framework routes by OrderId.
            created = await start_order_workflow(h.b.client, req, seconds=CALL)
            assert created.status is OrderStatus.CREATED
            assert created.order_id == req.order_id
            final = await h.wait_status(req.order_id)
            assert final.status is OrderStatus.CONFIRMED
            assert final.reservation_id == reservation_id(req.order_id)
            assert final.payment_id == payment_id(req.order_id)
            assert (final.amount, final.currency, final.shipping_address_id) == (
                25.0, "EUR", "addr-1")
            assert await h.event_types(req.order_id) == SUCCESS
            assert await h.inventory.stock("sku-c1") == 3
            reserve = await h.inventory.calls(req.order_id)
            pay = await h.payment.calls(req.order_id)
            assert [(c.operation, c.effect, c.caller) for c in reserve] == [
                ("reserve", True, "workflow-a")]
            assert [(c.operation, c.effect, c.caller) for c in pay] == [
                ("authorize", True, "workflow-a")]
            started = f"shoppingmall-order started order={req.order_id} spot={req.order_id}"
            assert h.count("workflow-a", started) == 1
            assert h.count("workflow-b", started) == 0
            assert not [line for lines in h.lines.values() for line in lines
                        if "external-effect-repeated" in line]


async def test_insufficient_inventory_fails_without_calling_payment(tmp_path):
    with trio.fail_after(TIMEOUT):
        async with open_harness(tmp_path) as h:
            await h.seed(cart_id="c2", stock=1)
            req = h.start_req("c2")
            created = await start_order_workflow(h.a.client, req, seconds=CALL)
            assert created.status is OrderStatus.CREATED
            final = await h.wait_status(req.order_id)
            assert final.status is OrderStatus.FAILED
            assert final.reason == "insufficient-inventory"
            assert final.payment_id is None
            assert await h.event_types(req.order_id) == INVENTORY_FAILURE
            assert await h.payment.calls(req.order_id) == ()
            assert await h.inventory.stock("sku-c2") == 1


async def test_a_rejected_payment_releases_the_reservation_then_fails(tmp_path):
    with trio.fail_after(TIMEOUT):
        async with open_harness(tmp_path) as h:
            await h.seed(cart_id="c3", accept=False)
            req = h.start_req("c3")
            await start_order_workflow(h.a.client, req, seconds=CALL)
            final = await h.wait_status(req.order_id)
            assert final.status is OrderStatus.FAILED
            assert final.reason == "payment-rejected"
            assert final.reservation_id == reservation_id(req.order_id)
            assert await h.event_types(req.order_id) == PAYMENT_FAILURE
            assert await h.inventory.stock("sku-c3") == 5  # the compensation gave it back
            calls = await h.inventory.calls(req.order_id)
            assert [(c.operation, c.effect) for c in calls] == [("reserve", True),
                                                                ("release", True)]


async def test_duplicate_starts_record_one_start_event_and_mark_the_mapping(tmp_path):
    with trio.fail_after(TIMEOUT):
        async with open_harness(tmp_path) as h:
            await h.seed(cart_id="c4")
            req = h.start_req("c4")
            reserved = await h.commerce.reserve_order(req.idempotency_key, req.order_id)
            assert reserved.reserved
            replies = []

            async def start(node) -> None:
                replies.append(await start_order_workflow(node.client, req, seconds=CALL))

            async with trio.open_nursery() as nursery:
                for node in (h.a, h.b, h.a, h.b):
                    nursery.start_soon(start, node)
            assert {r.order_id for r in replies} == {req.order_id}
            await h.wait_status(req.order_id)
            assert (await h.event_types(req.order_id)).count("OrderStartedEvent") == 1
            started = f"shoppingmall-order started order={req.order_id} spot={req.order_id}"
            assert sum(h.count(node, started) for node in h.lines) == 1
            mapping = await h.commerce.get_mapping(req.idempotency_key)
            assert mapping is not None
            assert mapping.status.value == "started"
            # A start after the end records nothing and answers the fold.
            again = await start_order_workflow(h.b.client, req, seconds=CALL)
            assert again.status is OrderStatus.CONFIRMED
            assert await h.event_types(req.order_id) == SUCCESS

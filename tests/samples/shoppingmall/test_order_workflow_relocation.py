"""A planned relocation parked after InventoryReservedEvent (item 9.2-6, the order-replayed row).

The source's gate parks the background continuation right after the
reservation is recorded; the order moves to ``workflow-b`` (whose control has
no gate); the parked turn is a timer, so it fires at the target, which has
replayed the stream under the same ObjectGeneration and goes on at
AuthorizePaymentReq. ReserveInventoryReq ran once, at the source.
"""

from __future__ import annotations

import trio
from workflow_harness import CALL, TIMEOUT, open_harness

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.domain import reservation_id
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.fixture_control import (
    Fixture,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.workflow_calls import (
    start_order_workflow,
)
from zlink_trio.samples.shoppingmall.shared.contracts import OrderStatus

SUCCESS = ["OrderStartedEvent", "InventoryReservedEvent", "PaymentAuthorizedEvent",
           "OrderConfirmedEvent"]


async def test_the_target_replays_in_the_same_generation_and_resumes_at_payment(tmp_path):
    with trio.fail_after(TIMEOUT):
        async with open_harness(tmp_path) as h:
            await h.seed(cart_id="m1")
            source = h.fixtures["workflow-a"]
            source.arm(Fixture.GATE_AFTER_RESERVED, cart_id="m1")
            req = h.start_req("m1")
            await start_order_workflow(h.a.client, req, seconds=CALL)
            order_id = await source.wait_parked(cart_id="m1")
            assert order_id == req.order_id
            assert source.parked_orders() == (order_id,)
            assert await h.event_types(order_id) == SUCCESS[:2]
            before = await h.a.spots.find(order_id)
            assert before is not None
            assert before.node_rid == h.a.node_rid

            moved = await h.a.relocate(order_id, to="workflow-b", timeout=CALL)
            assert moved.outcome is zl.RelocationOutcome.COMMITTED, moved.reason
            assert moved.ref.generation == before.generation
            assert moved.ref.node_rid == h.b.node_rid
            source.open_gate()

            final = await h.wait_status(order_id)
            assert final.status is OrderStatus.CONFIRMED
            assert final.reservation_id == reservation_id(order_id)
            assert await h.event_types(order_id) == SUCCESS
            reserves = await h.inventory.calls(order_id)
            assert [(c.operation, c.effect, c.caller) for c in reserves] == [
                ("reserve", True, "workflow-a")]
            pay = await h.payment.calls(order_id)
            assert [(c.operation, c.effect, c.caller) for c in pay] == [
                ("authorize", True, "workflow-b")]

            replayed = f"shoppingmall-order replayed order={order_id} " \
                f"generation={before.generation}"
            assert h.count("workflow-b", replayed) == 1
            assert h.count("workflow-a", replayed) == 0
            assert h.lines["workflow-b"].count(
                f"shoppingmall-workflow activated order={order_id} "
                f"generation={before.generation} node=workflow-b version=2") == 1
            assert not [line for lines in h.lines.values() for line in lines
                        if "external-effect-repeated" in line]


async def test_an_order_without_a_pending_step_moves_without_a_replayed_line(tmp_path):
    with trio.fail_after(TIMEOUT):
        async with open_harness(tmp_path) as h:
            await h.seed(cart_id="m2")
            for fixtures in h.fixtures.values():  # a tick that moves stops at the target too
                fixtures.arm(Fixture.STOP_AT_RESERVED, cart_id="m2")
            req = h.start_req("m2")
            await start_order_workflow(h.a.client, req, seconds=CALL)
            await h.wait_status(req.order_id, OrderStatus.INVENTORY_RESERVED)
            # Nothing resumes by itself at the target: no replayed line.
            moved = await h.a.relocate(req.order_id, to="workflow-b", timeout=CALL)
            assert moved.outcome is zl.RelocationOutcome.COMMITTED, moved.reason
            assert not [line for lines in h.lines.values() for line in lines
                        if line.startswith("shoppingmall-order replayed")]
            assert await h.event_types(req.order_id) == SUCCESS[:2]


async def test_an_opened_gate_lets_a_parked_order_go_on_where_it_is(tmp_path):
    with trio.fail_after(TIMEOUT):
        async with open_harness(tmp_path) as h:
            await h.seed(cart_id="m3")
            source = h.fixtures["workflow-a"]
            source.arm(Fixture.GATE_AFTER_RESERVED, cart_id="m3")
            req = h.start_req("m3")
            await start_order_workflow(h.a.client, req, seconds=CALL)
            await source.wait_parked(order_id=req.order_id)
            source.open_gate()
            final = await h.wait_status(req.order_id)
            assert final.status is OrderStatus.CONFIRMED
            assert [c.caller for c in await h.payment.calls(req.order_id)] == ["workflow-a"]
            assert not [line for lines in h.lines.values() for line in lines
                        if line.startswith("shoppingmall-order replayed")]

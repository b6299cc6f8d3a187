"""``run_workflow_node``, as the process runner calls it: a Workflow node on SQLite stores,
reached from a CommerceApi-like node with no Spots of its own; and the payment method
lookup for an incarnation that did not run the start (``commerce_adapter``).
"""

from __future__ import annotations

import json

import trio
from workflow_harness import CALL, TIMEOUT

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.domain import start_command_id
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.commerce_adapter import (
    find_payment_method,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.evidence import (
    Evidence,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.inventory import (
    open_inventory,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.payment import (
    open_payment,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.projection_adapter import (  # noqa: E501
    read_order_state,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (
    open_order_read_model_store,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.workflow_calls import (
    start_order_workflow,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.process import run_workflow_node
from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
    open_commerce_state_store,
)
from zlink_trio.samples.shoppingmall.shared.contracts import (
    WORKFLOW_MESH,
    OrderLine,
    OrderStatus,
    StartOrderWorkflowReq,
)


async def test_run_workflow_node_serves_orders_until_cancelled(tmp_path):
    urls = {name: f"sqlite://{tmp_path / name}.db" for name in
            ("zlink", "events", "read-model", "commerce")}
    lines: list[str] = []
    with trio.fail_after(TIMEOUT):
        async with open_inventory(urls["commerce"]) as inventory, \
                open_payment(urls["commerce"]) as payment:
            await inventory.seed_stock("sku-p", 3)
            await payment.seed_payment_method("pm-p", accept=True)
        async with trio.open_nursery() as nursery:
            node = await nursery.start(lambda task_status=trio.TASK_STATUS_IGNORED: (
                run_workflow_node("workflow-a", store_url=urls["zlink"],
                                  events_url=urls["events"], read_model_url=urls["read-model"],
                                  commerce_url=urls["commerce"], evidence=Evidence(lines.append),
                                  task_status=task_status)))
            assert node.node_id == "workflow-a"
            async with zl.open_node("api-a", store=urls["zlink"], mesh=WORKFLOW_MESH) as api, \
                    open_order_read_model_store(urls["read-model"]) as read_models:
                req = StartOrderWorkflowReq(
                    order_id="order-p", cart_id="cart-p", shipping_address_id="addr",
                    payment_method_id="pm-p", idempotency_key="key-p",
                    source_command_id=start_command_id("key-p"),
                    lines=(OrderLine("sku-p", 1),), amount=9.5, currency="USD")
                created = await start_order_workflow(api.client, req, seconds=CALL)
                assert created.status is OrderStatus.CREATED
                ref = await api.spots.find("order-p")
                assert ref is not None
                assert ref.node_rid == node.node_rid
                while True:  # the read model is another process's view: poll it, bounded
                    state = await read_order_state(read_models, "order-p")
                    assert state is not None
                    if state.status is OrderStatus.CONFIRMED:
                        break
                    await trio.sleep(0.01)
            assert lines.count("shoppingmall-order started order=order-p spot=order-p") == 1
            nursery.cancel_scope.cancel()


async def test_the_payment_method_comes_from_the_cart_then_the_mapping_snapshot(tmp_path):
    url = f"sqlite://{tmp_path / 'commerce.db'}"
    with trio.fail_after(TIMEOUT):
        async with open_commerce_state_store(url) as store:
            ids = frozenset({start_command_id("key-1"), "o:reserve-inventory"})
            assert await find_payment_method(store, "cart-1", ids) is None
            await store.reserve_order("key-1", "o", json.dumps({"paymentMethodId": "pm-map"}))
            assert await find_payment_method(store, "cart-1", ids) == "pm-map"
            await store.put_cart("cart-1", json.dumps({"paymentMethodId": "pm-cart"}))
            assert await find_payment_method(store, "cart-1", ids) == "pm-cart"
            await store.put_cart("cart-2", "not json")
            assert await find_payment_method(store, "cart-2", frozenset()) is None

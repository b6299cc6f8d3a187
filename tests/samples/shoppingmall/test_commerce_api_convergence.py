"""Duplicate starts over two API nodes converge on one OrderId and one start (item 9.2-1).

Three nodes of one process share an in-process Location Store and talk over real
loopback links, as separate processes do: ``workflow-a`` hosts the stand-in
OrderWorkflow Spot, ``api-a`` and ``api-b`` serve no Spot type (object clients) and
each backs its own app instance with its own connections to the CommerceStateStore and
the OrderReadModelStore -- the real stores, on SQLite and on Redis (``store_backends``),
whose atomic reservation is what makes one key one order. The apps are driven through
``httpx.ASGITransport``.

These tests run on the real clock (an autojump clock would jump while a socket or a
store call waits), each bounded by ``trio.fail_after``; nothing sleeps.
"""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack

import trio
from commerce_api_world import (
    CART,
    CODEC,
    TIMEOUT,
    StandInWorkflow,
    asgi_client,
    reset_world,
    service_on,
    start_body,
)
from store_backends import url

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.commerce_api.cart import encode_cart
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (
    open_order_read_model_store,
)
from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
    IdempotencyStatus,
    open_commerce_state_store,
)
from zlink_trio.samples.shoppingmall.shared.contracts import (
    WORKFLOW_MESH,
    GetOrderStateRes,
    OrderStatus,
    StartOrderRes,
)

__all__ = ("url",)  # the fixture, imported for pytest

STARTS = 50


async def _open_world(stack: AsyncExitStack, url: str):
    """workflow-a with the stand-in, and two API apps on their own nodes and connections."""
    location = f"memory://commerce-api-{uuid.uuid4().hex[:12]}"
    world = reset_world(await stack.enter_async_context(open_order_read_model_store(url)))
    workflow = await stack.enter_async_context(zl.open_node(
        "workflow-a", store=location, mesh=WORKFLOW_MESH, spots=[StandInWorkflow]))
    apps, commerce = [], None
    for name in ("api-a", "api-b"):
        node = await stack.enter_async_context(zl.open_node(
            name, store=location, mesh=WORKFLOW_MESH, spots=[]))
        commerce = await stack.enter_async_context(open_commerce_state_store(url))
        read_model = await stack.enter_async_context(open_order_read_model_store(url))
        apps.append(await stack.enter_async_context(
            asgi_client(service_on(node, commerce, read_model))))
    assert commerce is not None
    await commerce.put_cart("cart-1", encode_cart(CODEC, CART))
    return world, workflow, apps, commerce


async def test_fifty_identical_starts_over_two_api_nodes_give_one_order_and_one_start(url):
    with trio.fail_after(TIMEOUT):
        async with AsyncExitStack() as stack:
            world, workflow, apps, commerce = await _open_world(stack, url)
            responses = [None] * STARTS

            async def start(i: int) -> None:
                responses[i] = await apps[i % 2].post("/orders", json=start_body())

            async with trio.open_nursery() as nursery:
                for i in range(STARTS):
                    nursery.start_soon(start, i)

            assert [r.status_code for r in responses] == [200] * STARTS
            results = [CODEC.from_json(r.content, StartOrderRes) for r in responses]
            order_ids = {res.order_id for res in results}
            assert len(order_ids) == 1, order_ids
            (order_id,) = order_ids
            assert all(res.state.order_id == order_id for res in results)
            assert {res.state.status for res in results} == {OrderStatus.CREATED}
            # One OrderStartedEvent, one incarnation on the Workflow node, one mapping.
            assert world.streams == {order_id: ["OrderStartedEvent"]}
            assert world.activations == [order_id]
            assert {msg_order for _, msg_order in world.calls} == {order_id}
            owner = await workflow.spots.find(order_id)
            assert owner is not None
            assert owner.node_rid == workflow.node_rid
            mapping = await commerce.get_mapping("key-1")
            assert mapping is not None
            assert (mapping.order_id, mapping.status) == (order_id, IdempotencyStatus.STARTED)


async def test_different_orders_read_the_same_through_either_api(url):
    with trio.fail_after(TIMEOUT):
        async with AsyncExitStack() as stack:
            world, _, apps, _ = await _open_world(stack, url)
            order_ids: list[str] = []

            async def start(i: int) -> None:
                response = await apps[i % 2].post("/orders", json=start_body(key=f"key-{i}"))
                assert response.status_code == 200, response.text
                order_ids.append(response.json()["orderId"])

            async with trio.open_nursery() as nursery:
                for i in range(10):
                    nursery.start_soon(start, i)
            assert len(set(order_ids)) == 10
            assert sorted(world.streams) == sorted(order_ids)
            for order_id in order_ids[:5]:
                await apps[0].post(f"/orders/{order_id}/continue",
                                   json={"sourceCommandId": f"resume-{order_id}"})
            for order_id in order_ids:
                seen = [CODEC.from_json((await app.get(f"/orders/{order_id}")).content,
                                        GetOrderStateRes) for app in apps]
                assert seen[0] == seen[1]
                assert seen[0].state == world.state(order_id)

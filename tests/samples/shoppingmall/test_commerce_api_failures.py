"""The order API's failure boundary: owner unreachable 503, deadline 504, the status table.

- **503.** The order's Spot is Ready on a Workflow node the API node cannot reach
  (both nodes run without links, ``listen=None``): the framework answers
  ``zl.Unavailable`` and the API 503 -- the owner is not recreated elsewhere (item
  9.3-2). A store that cannot be asked is 503 too.
- **504.** The stand-in holds the request past the API's workflow deadline:
  ``zl.DeadlineExceeded``, 504. The mapping stays pending, and a retry with the same key
  resumes the same OrderId.

- **503 after SIGKILL.** The same with a real Workflow process, killed while it owns a
  Ready order (``commerce_api_workflow_worker.py``): continue and rebuild are 503, the
  order is not recreated, the lookup still answers.

The in-process tests run on the autojump clock (the deadlines are mock seconds); the
process test on the real clock (sockets, another process). Every test is bounded by
``trio.fail_after``; nothing sleeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import trio
from commerce_api_world import (
    CART,
    CODEC,
    TIMEOUT,
    MemoryCommerceStore,
    MemoryReadModel,
    StandInWorkflow,
    asgi_client,
    one_node,
    reset_world,
    service_on,
    start_body,
)

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.commerce_api.cart import encode_cart
from zlink_trio.samples.shoppingmall.server.commerce_api.http_errors import error_status
from zlink_trio.samples.shoppingmall.server.commerce_api.inputs import ValidationError
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (
    open_order_read_model_store,
)
from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import IdempotencyStatus
from zlink_trio.samples.shoppingmall.shared.contracts import (
    ORDER_WORKFLOW_TYPE,
    WORKFLOW_MESH,
    StartOrderWorkflowReq,
    StartOrderWorkflowRes,
)

WORKER = Path(__file__).resolve().with_name("commerce_api_workflow_worker.py")


def _error(response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]


async def test_an_order_whose_owner_cannot_be_reached_is_a_503_and_not_recreated(autojump_clock):
    store = f"memory://commerce-api-{uuid.uuid4().hex[:12]}"
    commerce, read_model = MemoryCommerceStore(), MemoryReadModel()
    await commerce.put_cart("cart-1", encode_cart(CODEC, CART))
    world = reset_world(read_model)
    with trio.fail_after(TIMEOUT):
        async with AsyncExitStack() as stack:
            workflow = await stack.enter_async_context(zl.open_node(
                "workflow-a", store=store, mesh=WORKFLOW_MESH, spots=[StandInWorkflow],
                listen=None))
            api = await stack.enter_async_context(zl.open_node(
                "api-a", store=store, mesh=WORKFLOW_MESH, spots=[], listen=None))
            http = await stack.enter_async_context(
                asgi_client(service_on(api, commerce, read_model)))
            # order-1 is Ready on workflow-a (its own node started it).
            await workflow.client.request("order-1", StartOrderWorkflowReq(
                order_id="order-1", cart_id="cart-1", shipping_address_id="addr-1",
                payment_method_id="pm-1", idempotency_key="key-0",
                source_command_id="start:key-0", lines=CART.lines, amount=CART.amount,
                currency=CART.currency), reply=StartOrderWorkflowRes).instance_spot(
                    ORDER_WORKFLOW_TYPE)
            owner = await api.spots.find("order-1")
            assert owner is not None
            assert owner.node_rid == workflow.node_rid

            for command in ("continue", "rebuild-projection"):
                response = await http.post(f"/orders/order-1/{command}",
                                           json={"sourceCommandId": f"{command}-1"})
                assert _error(response) == (503, "Unavailable"), response.text
            # Not recreated anywhere: the same incarnation, on the same node.
            assert await api.spots.find("order-1") == owner
            assert world.activations == ["order-1"]

            # A new order placed on the unreachable node: 503, its mapping left pending.
            response = await http.post("/orders", json=start_body())
            assert _error(response) == (503, "Unavailable"), response.text
            mapping = commerce.mappings["key-1"]
            assert mapping.status is IdempotencyStatus.PENDING
            assert mapping.order_id not in world.streams
            # The lookup still answers from the read model alone.
            assert (await http.get("/orders/order-1")).status_code == 200


async def test_a_store_that_cannot_be_asked_is_a_503(autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            async def unreachable(*args, **kwargs):
                raise zl.StoreUnavailable("test: the CommerceStateStore cannot be reached")

            env.commerce.reserve_order = unreachable
            env.read_model.get = unreachable
            assert _error(await env.http.post("/orders", json=start_body())) == (
                503, "StoreUnavailable")
            assert _error(await env.http.get("/orders/order-1")) == (503, "StoreUnavailable")
            assert env.world.calls == []


async def test_a_start_past_the_deadline_is_a_504_and_a_retry_resumes_the_same_order(
        autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node(workflow_timeout=5) as env:
            env.world.hold.add("*")
            before = trio.current_time()
            response = await env.http.post("/orders", json=start_body())
            assert _error(response) == (504, "DeadlineExceeded"), response.text
            assert trio.current_time() - before == pytest.approx(5, abs=0.5)
            mapping = env.commerce.mappings["key-1"]
            assert mapping.status is IdempotencyStatus.PENDING

            env.world.hold.clear()
            env.world.release.set()  # the held start now completes, unanswered
            response = await env.http.post("/orders", json=start_body())
            assert response.status_code == 200, response.text
            assert response.json()["orderId"] == mapping.order_id
            assert env.world.streams[mapping.order_id] == ["OrderStartedEvent"]
            assert env.commerce.mappings["key-1"].status is IdempotencyStatus.STARTED


async def test_continue_past_the_deadline_is_a_504(autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node(workflow_timeout=3) as env:
            order_id = (await env.http.post("/orders", json=start_body())).json()["orderId"]
            env.world.hold.add(order_id)
            response = await env.http.post(f"/orders/{order_id}/continue",
                                           json={"sourceCommandId": "resume-1"})
            assert _error(response) == (504, "DeadlineExceeded")
            env.world.release.set()


@pytest.mark.parametrize(("error", "expected"), [
    (ValidationError("bad"), (400, "ValidationError")),
    (zl.InvalidOperation("bad id"), (400, "InvalidOperation")),
    (zl.InvalidConfiguration("bad config"), (500, "InvalidConfiguration")),
    (zl.NotFound("gone"), (404, "NotFound")),
    (zl.AlreadyExists("taken"), (409, "AlreadyExists")),
    (zl.StaleFence("moved on"), (409, "StaleFence")),
    (zl.Unavailable("down"), (503, "Unavailable")),
    (zl.StoreUnavailable("down"), (503, "StoreUnavailable")),
    (zl.CapacityExceeded("full"), (503, "CapacityExceeded")),
    (zl.NotConfigured("no workflow node"), (503, "NotConfigured")),
    (zl.DeadlineExceeded("late"), (504, "DeadlineExceeded")),
    (zl.TypeMismatch("other reply"), (500, "TypeMismatch")),
    (zl.HandlerError("x", error_type="NotFound"), (404, "NotFound")),
    (zl.HandlerError("x", error_type="ExpectedVersionConflict"),
     (409, "ExpectedVersionConflict")),
    (zl.HandlerError("x", error_type="InvalidOperation"), (409, "InvalidOperation")),
    (zl.HandlerError("x", error_type="CorruptStream"), (500, "HandlerError")),
    (zl.HandlerError("x", error_type="RuntimeError"), (500, "HandlerError")),
])
def test_each_outcome_has_its_status_and_name(error, expected):
    assert error_status(error) == expected


async def test_a_sigkilled_owner_process_is_a_503_and_its_order_is_not_recreated(tmp_path):
    """Item 9.3-2 with a real process: the Workflow node that owns a Ready order dies."""
    location = f"sqlite://{tmp_path / 'location.db'}"
    read_model_url = f"sqlite://{tmp_path / 'read-model.db'}"
    commerce = MemoryCommerceStore()
    await commerce.put_cart("cart-1", encode_cart(CODEC, CART))
    argv = [sys.executable, str(WORKER), "workflow-a", location, read_model_url, "120"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(WORKER.parent), os.environ.get("PYTHONPATH", "")])}
    with trio.fail_after(TIMEOUT):
        proc = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE, env=env)
        try:
            ready = json.loads(await _read_line(proc))
            assert ready["ready"]
            async with AsyncExitStack() as stack:
                read_model = await stack.enter_async_context(
                    open_order_read_model_store(read_model_url))
                api = await stack.enter_async_context(zl.open_node(
                    "api-a", store=location, mesh=WORKFLOW_MESH, spots=[]))
                http = await stack.enter_async_context(
                    asgi_client(service_on(api, commerce, read_model)))
                response = await http.post("/orders", json=start_body())
                assert response.status_code == 200, response.text
                order_id = response.json()["orderId"]
                owner = await api.spots.find(order_id)
                assert owner is not None
                assert str(owner.node_rid) == ready["node_rid"]

                proc.kill()
                await proc.wait()
                for command in ("continue", "rebuild-projection"):
                    response = await http.post(f"/orders/{order_id}/{command}",
                                               json={"sourceCommandId": f"{command}-1"})
                    assert _error(response) == (503, "Unavailable"), response.text
                # The same key again: the mapping is started, the lookup model answers.
                response = await http.post("/orders", json=start_body())
                assert response.json()["orderId"] == order_id
                assert (await http.get(f"/orders/{order_id}")).status_code == 200
                assert await api.spots.find(order_id) == owner  # not recreated elsewhere
        finally:
            with trio.CancelScope(shield=True):
                if proc.returncode is None:
                    proc.kill()
                await proc.wait()
                assert proc.stdout is not None
                await proc.stdout.aclose()


async def _read_line(proc: trio.Process) -> bytes:
    assert proc.stdout is not None
    buffer = b""
    while b"\n" not in buffer:
        chunk = await proc.stdout.receive_some(4096)
        assert chunk, "the workflow worker exited before it was ready"
        buffer += chunk
    return buffer.partition(b"\n")[0]

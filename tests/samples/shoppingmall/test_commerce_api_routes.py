"""The public order API's routes, driven in-process through ``httpx.ASGITransport``.

One node (no links) hosts the stand-in OrderWorkflow Spot (``commerce_api_world``);
the app's service calls it through the node's client with Instance intent, and its
stores are the recording doubles, so "writes nothing" and "reads only the read model"
are checked call by call. Every test runs on the autojump clock under
``trio.fail_after``; nothing sleeps and nothing listens.
"""

from __future__ import annotations

import json

import httpx
import pytest
import trio
from commerce_api_world import CART, CODEC, TIMEOUT, Chunks, one_node, start_body

from zlink_trio.samples.shoppingmall.server.commerce_api.inputs import MAX_BODY_BYTES
from zlink_trio.samples.shoppingmall.shared.contracts import (
    ContinueOrderWorkflowRes,
    GetOrderStateRes,
    OrderState,
    OrderStatus,
    RebuildOrderProjectionRes,
    StartOrderRes,
)


def _assert_json_error(response, status: int, name: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error", "message"}
    assert body["error"] == name
    assert body["message"]
    return body


async def test_start_returns_created_and_the_lookup_reads_it_back(autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            response = await env.http.post("/orders", json=start_body())
            assert response.status_code == 200, response.text
            assert response.headers["content-type"] == "application/json"
            started = CODEC.from_json(response.content, StartOrderRes)
            assert started.state.status is OrderStatus.CREATED
            assert started.state.order_id == started.order_id
            assert set(response.json()) == {"orderId", "state"}
            assert env.world.starts[started.order_id].lines == CART.lines
            assert env.world.starts[started.order_id].amount == CART.amount
            assert env.world.starts[started.order_id].source_command_id == "start:key-1"
            mapping = env.commerce.mappings["key-1"]
            assert (mapping.order_id, mapping.status.value) == (started.order_id, "started")

            looked_up = await env.http.get(f"/orders/{started.order_id}")
            assert looked_up.status_code == 200
            assert CODEC.from_json(looked_up.content, GetOrderStateRes).state == started.state
            assert set(looked_up.json()) == {"state"}


async def test_a_retry_with_the_same_key_returns_the_same_order_and_starts_nothing_new(
        autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            first = (await env.http.post("/orders", json=start_body())).json()
            second = (await env.http.post("/orders", json=start_body())).json()
            assert first["orderId"] == second["orderId"]
            assert env.world.streams[first["orderId"]] == ["OrderStartedEvent"]
            # The started mapping answers from the read model: one workflow call in all.
            assert env.world.calls == [("StartOrderWorkflowReq", first["orderId"])]


async def test_the_same_key_for_another_request_is_a_409_and_writes_nothing_more(autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            first = (await env.http.post("/orders", json=start_body())).json()
            calls = list(env.world.calls)
            response = await env.http.post("/orders", json=start_body(paymentMethodId="pm-2"))
            body = _assert_json_error(response, 409, "AlreadyExists")
            assert first["orderId"] in body["message"]
            assert env.world.calls == calls
            assert env.commerce.mappings["key-1"].order_id == first["orderId"]


@pytest.mark.parametrize(("body", "why"), [
    pytest.param(start_body(cartId=None), "expected str", id="null-field"),
    pytest.param({k: v for k, v in start_body().items() if k != "cartId"}, "", id="missing"),
    pytest.param({k: v for k, v in start_body().items() if k != "idempotencyKey"}, "",
                 id="missing-key"),
    pytest.param(start_body(cartId=7), "", id="number-for-string"),
    pytest.param(start_body(idempotencyKey=["k"]), "", id="array-for-string"),
    pytest.param(start_body(idempotencyKey=""), "empty", id="empty-key"),
    pytest.param(start_body(cartId=""), "empty", id="empty-cart"),
    pytest.param(start_body(shippingAddressId=""), "empty", id="empty-address"),
    pytest.param(start_body(paymentMethodId=""), "empty", id="empty-method"),
    pytest.param(start_body(idempotencyKey="k" * 129), "at most", id="long-key"),
    pytest.param(start_body(idempotencyKey="a\nb"), "control", id="control-char"),
    pytest.param(start_body(cartId="cart-unknown"), "no cart", id="unknown-cart"),
    pytest.param({"cart_id": "cart-1", "shippingAddressId": "a", "paymentMethodId": "p",
                  "idempotencyKey": "k"}, "", id="snake-case-key"),
    pytest.param([start_body()], "", id="array-body"),
    pytest.param("cart-1", "", id="string-body"),
])
async def test_every_bad_start_is_a_400_and_writes_nothing(body, why, autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            response = await env.http.post("/orders", json=body)
            answer = _assert_json_error(response, 400, "ValidationError")
            assert why in answer["message"]
            assert env.commerce.writes == []
            assert env.commerce.mappings == {}
            assert env.world.calls == []
            assert env.world.activations == []
            assert env.read_model.calls == []


@pytest.mark.parametrize("raw", [b"", b"{", b"not json", b'{"cartId": "a", "cartId": "b"}',
                                 b"\xff\xfe", b"null"])
async def test_a_body_that_is_not_json_is_a_400_and_writes_nothing(raw, autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            response = await env.http.post("/orders", content=raw,
                                           headers={"content-type": "application/json"})
            _assert_json_error(response, 400, "ValidationError")
            assert env.commerce.calls == []
            assert env.world.calls == []


async def test_a_body_over_64_kib_is_a_400_before_it_is_read_to_the_end(autojump_clock):
    body = Chunks(b'{"cartId": "cart-1", "pad": "', 1024)  # 1 MiB, if anyone read it all
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            request = httpx.Request("POST", "http://api.test/orders", stream=body)
            assert "content-length" not in request.headers
            response = await env.http.send(request)
            answer = _assert_json_error(response, 400, "ValidationError")
            assert str(MAX_BODY_BYTES) in answer["message"]
            assert body.pulled <= MAX_BODY_BYTES // 1024 + 2, body.pulled  # stopped at the bound
            assert env.commerce.calls == []
            assert env.world.calls == []


async def test_a_declared_length_over_64_kib_is_refused(autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            # Valid JSON, but one byte over the bound (trailing whitespace).
            raw = _dumps(start_body())
            raw += b" " * (MAX_BODY_BYTES + 1 - len(raw))
            response = await env.http.post("/orders", content=raw)
            assert response.request.headers["content-length"] == str(MAX_BODY_BYTES + 1)
            _assert_json_error(response, 400, "ValidationError")
            assert env.commerce.calls == []
            assert env.world.calls == []


async def test_a_body_of_exactly_64_kib_is_read(autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            raw = _dumps(start_body())
            raw = raw[:-1] + b', "pad": "' + b"x" * (MAX_BODY_BYTES - len(raw) - 11) + b'"}'
            assert len(raw) == MAX_BODY_BYTES
            response = await env.http.post("/orders", content=raw)
            assert response.status_code == 200, response.text


def _dumps(value) -> bytes:
    return json.dumps(value).encode()


async def test_an_unknown_order_is_a_404_and_the_lookup_asks_no_workflow(autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            response = await env.http.get("/orders/order-nobody")
            _assert_json_error(response, 404, "NotFound")
            assert env.read_model.calls == ["get"]
            assert env.commerce.calls == []
            assert env.world.calls == []
            assert env.world.activations == []
            assert await env.node.spots.find("order-nobody") is None


async def test_the_lookup_reads_only_the_read_model(autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            # A document no workflow wrote: the lookup returns it as it is.
            state = OrderState(order_id="order-x", status=OrderStatus.PAYMENT_AUTHORIZED,
                               payment_id="order-x:payment", updated_at_unix_ms=5)
            await env.read_model.put("order-x", 3, CODEC.to_json(state).decode())
            env.read_model.calls.clear()
            for _ in range(3):
                response = await env.http.get("/orders/order-x")
                assert CODEC.from_json(response.content, GetOrderStateRes).state == state
            assert env.read_model.calls == ["get"] * 3
            assert env.commerce.calls == []
            assert env.world.calls == []
            assert env.world.activations == []
            assert await env.node.spots.find("order-x") is None
            assert env.lines == []  # not terminal: no evidence line


async def test_continue_and_rebuild_reach_the_workflow_and_a_terminal_lookup_leaves_evidence(
        autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            order_id = (await env.http.post("/orders", json=start_body())).json()["orderId"]
            response = await env.http.post(f"/orders/{order_id}/continue",
                                           json={"sourceCommandId": "resume-1"})
            assert response.status_code == 200, response.text
            resumed = CODEC.from_json(response.content, ContinueOrderWorkflowRes)
            assert resumed.state.status is OrderStatus.CONFIRMED
            await env.read_model.delete(order_id)
            assert (await env.http.get(f"/orders/{order_id}")).status_code == 404
            response = await env.http.post(f"/orders/{order_id}/rebuild-projection",
                                           json={"sourceCommandId": "rebuild-1"})
            assert response.status_code == 200, response.text
            rebuilt = CODEC.from_json(response.content, RebuildOrderProjectionRes)
            assert rebuilt.state == resumed.state
            looked_up = await env.http.get(f"/orders/{order_id}")
            assert CODEC.from_json(looked_up.content, GetOrderStateRes).state == rebuilt.state
            assert env.lines == [f"shoppingmall-evidence order={order_id} events=4"]
            assert [c[0] for c in env.world.calls] == [
                "StartOrderWorkflowReq", "ContinueOrderWorkflowReq", "RebuildOrderProjectionReq"]


@pytest.mark.parametrize("command", ["continue", "rebuild-projection"])
async def test_continue_or_rebuild_of_an_order_without_a_stream_is_a_404_and_records_nothing(
        command, autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            response = await env.http.post(f"/orders/order-ghost/{command}",
                                           json={"sourceCommandId": "cmd-1"})
            _assert_json_error(response, 404, "NotFound")
            assert "order-ghost" not in env.world.streams
            assert env.read_model.documents == {}
            assert env.commerce.calls == []


@pytest.mark.parametrize("command", ["continue", "rebuild-projection"])
@pytest.mark.parametrize("body", [{}, {"sourceCommandId": ""}, {"sourceCommandId": 3},
                                  {"source_command_id": "x"}, {"sourceCommandId": "x" * 200}])
async def test_a_bad_command_body_is_a_400_and_never_reaches_the_workflow(
        command, body, autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            response = await env.http.post(f"/orders/order-1/{command}", json=body)
            _assert_json_error(response, 400, "ValidationError")
            assert env.world.calls == []
            assert env.world.activations == []
            assert env.commerce.calls == []
            assert env.read_model.calls == []


@pytest.mark.parametrize("path", ["/orders/" + "o" * 129, "/orders/a%0Ab"])
async def test_a_bad_order_id_in_the_path_is_a_400(path, autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            _assert_json_error(await env.http.get(path), 400, "ValidationError")
            response = await env.http.post(path + "/continue", json={"sourceCommandId": "c"})
            _assert_json_error(response, 400, "ValidationError")
            assert env.world.calls == []
            assert env.read_model.calls == []


async def test_unknown_routes_and_methods_answer_in_the_error_shape(autojump_clock):
    with trio.fail_after(TIMEOUT):
        async with one_node() as env:
            _assert_json_error(await env.http.get("/nothing"), 404, "NotFound")
            _assert_json_error(await env.http.get("/orders/"), 404, "NotFound")
            _assert_json_error(await env.http.delete("/orders/order-1"), 405,
                               "InvalidOperation")
            _assert_json_error(await env.http.get("/orders"), 405, "InvalidOperation")

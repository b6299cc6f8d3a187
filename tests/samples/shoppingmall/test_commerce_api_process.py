"""``run_api_node``: a real Hypercorn on 127.0.0.1, port 0, in the test's Trio program.

The API node joins the workflow Mesh (an in-process Location Store, real loopback
links) beside a Workflow node hosting the stand-in OrderWorkflow Spot; its stores are
SQLite files in ``tmp_path``. The tests check the readiness evidence lines -- verbatim,
once each, the object-route one from the store alone -- and the public order API over
a real socket, including the 64 KiB bound on a streamed body.

They run on the real clock (sockets), each bounded by ``trio.fail_after``; a wait for a
line waits on an event the log callable sets, never on a sleep.
"""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack
from functools import partial

import httpx
import pytest
import trio
from commerce_api_world import (
    CART,
    CODEC,
    TIMEOUT,
    Chunks,
    StandInWorkflow,
    reset_world,
    start_body,
)

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.commerce_api.cart import encode_cart
from zlink_trio.samples.shoppingmall.server.commerce_api.inputs import MAX_BODY_BYTES
from zlink_trio.samples.shoppingmall.server.commerce_api.process import run_api_node
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (
    open_order_read_model_store,
)
from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
    open_commerce_state_store,
)
from zlink_trio.samples.shoppingmall.shared.contracts import (
    WORKFLOW_MESH,
    GetOrderStateRes,
    StartOrderRes,
)


class Log:
    """A ``log`` callable that keeps the lines and lets a test wait for one."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._changed = trio.Event()

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, line: str) -> None:
        while line not in self.lines:
            await self._changed.wait()


@pytest.fixture
def urls(tmp_path):
    return {"store_url": f"memory://commerce-api-{uuid.uuid4().hex[:12]}",
            "app_store_url": f"sqlite://{tmp_path / 'commerce.db'}",
            "read_model_url": f"sqlite://{tmp_path / 'read-model.db'}"}


async def _workflow_node(stack: AsyncExitStack, urls: dict[str, str], node_id: str):
    return await stack.enter_async_context(zl.open_node(
        node_id, store=urls["store_url"], mesh=WORKFLOW_MESH, spots=[StandInWorkflow]))


async def _seed(stack: AsyncExitStack, urls: dict[str, str]) -> None:
    reset_world(await stack.enter_async_context(
        open_order_read_model_store(urls["read_model_url"])))
    async with open_commerce_state_store(urls["app_store_url"]) as commerce:
        await commerce.put_cart("cart-1", encode_cart(CODEC, CART))


async def _order_round_trip(base: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        response = await http.post("/orders", json=start_body())
        assert response.status_code == 200, response.text
        started = CODEC.from_json(response.content, StartOrderRes)
        response = await http.get(f"/orders/{started.order_id}")
        assert response.status_code == 200, response.text
        assert CODEC.from_json(response.content, GetOrderStateRes).state == started.state
        response = await http.get("/orders/order-nobody")
        assert response.status_code == 404
        assert response.json()["error"] == "NotFound"


async def test_the_api_node_prints_its_readiness_lines_and_serves_the_order_api(urls):
    log = Log()
    with trio.fail_after(TIMEOUT):
        async with AsyncExitStack() as stack:
            await _seed(stack, urls)
            await _workflow_node(stack, urls, "workflow-a")
            async with trio.open_nursery() as nursery:
                base = await nursery.start(partial(run_api_node, "api-a", http_port=0,
                                                   log=log, **urls))
                assert base.startswith("http://127.0.0.1:")
                assert not base.endswith(":0")
                # The HTTP edge first; workflow-a was there before the first read.
                assert log.lines == [
                    "shoppingmall-ready kind=http node=api-a",
                    "shoppingmall-ready kind=object-route node=api-a target=workflow-a",
                ]
                # A Workflow node that appears later is seen from its claim alone.
                async with zl.open_node("workflow-b", store=urls["store_url"],
                                        mesh=WORKFLOW_MESH, spots=[StandInWorkflow]):
                    await log.wait_for(
                        "shoppingmall-ready kind=object-route node=api-a target=workflow-b")
                    await _order_round_trip(base)
                nursery.cancel_scope.cancel()
            # Each line once: the watcher never repeats a Workflow node.
            assert sorted(log.lines) == sorted(set(log.lines))
            assert len(log.lines) == 3


async def test_a_streamed_body_over_64_kib_is_refused_over_the_socket(urls):
    log = Log()

    with trio.fail_after(TIMEOUT):
        async with AsyncExitStack() as stack:
            await _seed(stack, urls)
            await _workflow_node(stack, urls, "workflow-a")
            async with trio.open_nursery() as nursery:
                base = await nursery.start(partial(run_api_node, "api-a", http_port=0,
                                                   log=log, **urls))
                async with httpx.AsyncClient(base_url=base, timeout=10) as http:
                    # A body that never ends: only a bounded read can answer it.
                    body = Chunks(b'{"cartId": "cart-1", "pad": "', None)
                    try:
                        request = http.build_request(
                            "POST", "/orders", headers={"transfer-encoding": "chunked"})
                        request.stream = body
                        response = await http.send(request)
                    except httpx.HTTPError:
                        response = None  # the server answered and closed mid-upload
                    if response is not None:
                        assert response.status_code == 400
                        assert response.json()["error"] == "ValidationError"
                    raw = b" " * (MAX_BODY_BYTES + 1)
                    response = await http.post("/orders", content=raw)
                    assert response.status_code == 400
                    assert response.json()["error"] == "ValidationError"
                nursery.cancel_scope.cancel()


async def test_leaving_run_api_node_removes_its_claim(urls):
    log = Log()
    with trio.fail_after(TIMEOUT):
        async with AsyncExitStack() as stack:
            await _seed(stack, urls)
            await _workflow_node(stack, urls, "workflow-a")
            store = await stack.enter_async_context(zl.open_store(urls["store_url"]))
            async with trio.open_nursery() as nursery:
                await nursery.start(partial(run_api_node, "api-a", http_port=0, log=log,
                                            **urls))
                claims = await store.location.descriptors(WORKFLOW_MESH,
                                                          now=trio.current_time())
                assert {c.descriptor.node_id for c in claims} == {"api-a", "workflow-a"}
                api = next(c for c in claims if c.descriptor.node_id == "api-a")
                assert api.descriptor.served_types == {}  # an object client only
                nursery.cancel_scope.cancel()
            claims = await store.location.descriptors(WORKFLOW_MESH, now=trio.current_time())
            assert {c.descriptor.node_id for c in claims} == {"workflow-a"}


@pytest.mark.parametrize("port", [-1, 65536, "80", True])
async def test_a_bad_http_port_is_refused_before_anything_opens(urls, port):
    with trio.fail_after(TIMEOUT), pytest.raises(zl.InvalidConfiguration, match="http_port"):
        await run_api_node("api-a", http_port=port, **urls)

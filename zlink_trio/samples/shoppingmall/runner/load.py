"""``load``: orders per second end to end through both APIs, and StartOrder latency.

Theory of operation
-------------------
The four processes start as ``serve`` starts them (the seed rule on, so every
``cart-ok-<uuid>`` is a cart that succeeds). Then ``clients`` concurrent
clients (100 by default), each with its own HTTP connection pool, run orders
one after another until ``orders`` have been started in all: a client sends
``POST /orders`` (a fresh IdempotencyKey and cart) to api-a or api-b in turn,
records how long that took (the StartOrder latency: until the Created
boundary), then polls ``GET /orders/{orderId}`` on the other API every
20 ms until the order is Confirmed or Failed. An order *completes* when its
lookup says Confirmed; the figure is completed orders over the wall time from
the first start to the last completion.

It prints one JSON object on its last line: ``orders_per_s``, ``orders``
(started), ``confirmed``, ``failed`` (an error status, a Failed order or a
lookup that never ended within ``order_timeout``), ``start_order_ms`` (``p50``,
``p99``) and ``clients``. Exit code 0 when every order was confirmed.
"""

from __future__ import annotations

import json
import math
import secrets
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Final

import httpx
import trio

from zlink_trio.samples.shoppingmall.runner.processes import open_deployment
from zlink_trio.samples.shoppingmall.runner.seeding import apply_seed_plan, prepare_stores
from zlink_trio.samples.shoppingmall.runner.serve import new_run_id, wait_ready
from zlink_trio.samples.shoppingmall.runner.topology import plan_deployment, store_urls
from zlink_trio.samples.shoppingmall.seeds import seed_plan

__all__ = ("load",)

POLL_INTERVAL: Final = 0.02


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


class _Tally:
    def __init__(self, orders: int) -> None:
        self.left = orders
        self.started = 0
        self.confirmed = 0
        self.failed = 0
        self.latencies: list[float] = []
        self.last_done = 0.0
        self.problems: list[str] = []

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


async def _one_order(http: httpx.AsyncClient, start_url: str, poll_url: str,
                     tally: _Tally, order_timeout: float) -> None:
    body = {"cartId": f"cart-ok-{uuid.uuid4().hex}", "shippingAddressId": "addr-1",
            "paymentMethodId": "pm-ok", "idempotencyKey": f"load-{uuid.uuid4().hex}"}
    began = time.perf_counter()
    response = await http.post(f"{start_url}/orders", json=body)
    tally.latencies.append((time.perf_counter() - began) * 1000)
    tally.started += 1
    if response.status_code != 200:
        tally.failed += 1
        tally.problems.append(f"POST /orders {response.status_code}: {response.text[:200]}")
        return
    order_id = response.json()["orderId"]
    with trio.move_on_after(order_timeout):
        while True:
            state = (await http.get(f"{poll_url}/orders/{order_id}")).json().get("state", {})
            status = state.get("status")
            if status == "Confirmed":
                tally.confirmed += 1
                tally.last_done = time.perf_counter()
                return
            if status == "Failed":
                break
            await trio.sleep(POLL_INTERVAL)
    tally.failed += 1
    tally.problems.append(f"order {order_id} did not confirm")


async def _client(index: int, apis: list[str], tally: _Tally, order_timeout: float) -> None:
    turn = index
    limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)
    async with httpx.AsyncClient(timeout=order_timeout, limits=limits) as http:
        while tally.take():
            start, poll = apis[turn % 2], apis[(turn + 1) % 2]
            turn += 1
            try:
                await _one_order(http, start, poll, tally, order_timeout)
            except httpx.HTTPError as exc:
                tally.failed += 1
                tally.problems.append(f"{type(exc).__name__}: {exc}")


async def _run(store: str | None, clients: int, orders: int, work_dir: Path,
               order_timeout: float) -> dict[str, Any]:
    run_id = new_run_id()
    urls = store_urls(store, work_dir / "stores", run_id)
    await prepare_stores(urls)
    await apply_seed_plan(urls.commerce, seed_plan(()))  # stock and payment methods
    deployment = plan_deployment(run_id=run_id, stores=urls, base_port=0, runner_mode=False)
    async with open_deployment(deployment, work_dir, secret=secrets.token_hex(32)) as nodes:
        if not await wait_ready(nodes):
            raise SystemExit("the processes did not become ready; see the logs in "
                             f"{work_dir / 'logs'}")
        apis = [deployment.node(name).base_url for name in ("api-a", "api-b")]
        tally = _Tally(orders)
        began = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for index in range(clients):
                nursery.start_soon(_client, index, apis, tally, order_timeout)
        elapsed = max((tally.last_done or time.perf_counter()) - began, 1e-9)
    return {
        "orders_per_s": round(tally.confirmed / elapsed, 1), "orders": tally.started,
        "confirmed": tally.confirmed, "failed": tally.failed, "clients": clients,
        "seconds": round(elapsed, 2),
        "start_order_ms": {"p50": round(_percentile(tally.latencies, 0.50), 2),
                           "p99": round(_percentile(tally.latencies, 0.99), 2)},
        "store": "sqlite" if store is None or store.startswith("sqlite") else "redis",
        "problems": tally.problems[:5],
    }


def load(store: str | None, clients: int = 100, orders: int = 2000,
         order_timeout: float = 30.0) -> int:
    """The ``load`` subcommand; its exit code (0: every order confirmed)."""
    with tempfile.TemporaryDirectory(prefix="shoppingmall-load-") as directory:
        result = trio.run(_run, store, clients, orders, Path(directory), order_timeout)
    print(json.dumps(result), flush=True)
    return 0 if result["confirmed"] == result["orders"] else 1

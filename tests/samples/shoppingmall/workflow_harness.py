"""Two OrderWorkflow nodes in one Trio process, on one store, for the workflow tests.

``workflow-a`` takes every new order (placement weight 1), ``workflow-b`` is
only a relocation target and a second caller (weight 0). The framework's
Location Store is a named ``memory://`` store; the application stores are
SQLite files in the test's directory (one per resource, as the sample's
default). Each node gets its own :class:`WorkflowServices`, whose evidence
lines go to a list per node and whose projection and stream tell a
:class:`Watch` about every write, so a test waits for a state without
sleeping.
"""

from __future__ import annotations

import json
import uuid
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.domain import start_command_id
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_store import (
    OrderEventStore,
    open_order_event_store,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.evidence import (
    Evidence,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.fixture_control import (
    FixtureControl,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.inventory import (
    Inventory,
    open_inventory,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.order_workflow_spot import (  # noqa: E501
    order_workflow_spot,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.payment import (
    Payment,
    open_payment,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.projection_adapter import (  # noqa: E501
    read_order_state,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (
    OrderReadModelStore,
    open_order_read_model_store,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.services import (
    open_workflow_services,
)
from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
    CommerceStateStore,
    open_commerce_state_store,
)
from zlink_trio.samples.shoppingmall.shared.contracts import (
    WORKFLOW_MESH,
    OrderLine,
    OrderState,
    OrderStatus,
    StartOrderWorkflowReq,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

#: The bound of every test here (``trio.fail_after``).
TIMEOUT = 20
CALL = 10.0
NODES = ("workflow-a", "workflow-b")
TERMINAL = (OrderStatus.CONFIRMED, OrderStatus.FAILED)


class Watch:
    """Wakes waiters whenever a node wrote an event or a projection."""

    def __init__(self) -> None:
        self._changed = trio.Event()

    def notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def until(self, check: Callable[[], Awaitable[bool]]) -> None:
        """Return once ``check()`` is true, re-checking after every write."""
        while True:
            changed = self._changed
            if await check():
                return
            await changed.wait()


@attrs.define
class _Notifying:
    """A port wrapper that tells the watch after each call of ``method``."""

    inner: Any
    method: str
    watch: Watch

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name != self.method:
            return value

        async def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return await value(*args, **kwargs)
            finally:
                self.watch.notify()
        return call


@attrs.define
class Harness:
    """The two nodes, the stores they share, and what they reported."""

    directory: Path
    nodes: dict[str, zl.Node]
    fixtures: dict[str, FixtureControl]
    lines: dict[str, list[str]]
    events: OrderEventStore
    read_models: OrderReadModelStore
    commerce: CommerceStateStore
    inventory: Inventory
    payment: Payment
    watch: Watch

    @property
    def a(self) -> zl.Node:
        return self.nodes["workflow-a"]

    @property
    def b(self) -> zl.Node:
        return self.nodes["workflow-b"]

    def count(self, node_id: str, line: str) -> int:
        return self.lines[node_id].count(line)

    async def seed(self, *, cart_id: str, stock: int = 5, accept: bool = True,
                   method: str | None = None) -> str:
        """Seed a cart (2 x sku-<cart>), its stock and its payment method; the method."""
        method = method or f"pm-{cart_id}"
        await self.inventory.seed_stock(f"sku-{cart_id}", stock)
        await self.payment.seed_payment_method(method, accept=accept)
        await self.commerce.put_cart(cart_id, json.dumps({
            "lines": [{"sku": f"sku-{cart_id}", "quantity": 2}], "amount": 25.0,
            "currency": "EUR", "paymentMethodId": method}))
        return method

    def start_req(self, cart_id: str, *, order_id: str | None = None,
                  key: str | None = None, method: str | None = None) -> StartOrderWorkflowReq:
        key = key or f"key-{cart_id}"
        return StartOrderWorkflowReq(
            order_id=order_id or f"order-{uuid.uuid4().hex[:8]}", cart_id=cart_id,
            shipping_address_id="addr-1", payment_method_id=method or f"pm-{cart_id}",
            idempotency_key=key, source_command_id=start_command_id(key),
            lines=(OrderLine(f"sku-{cart_id}", 2),), amount=25.0, currency="EUR")

    async def state(self, order_id: str) -> OrderState | None:
        return await read_order_state(self.read_models, order_id)

    async def wait_status(self, order_id: str, *statuses: OrderStatus) -> OrderState:
        wanted = statuses or TERMINAL
        found: list[OrderState] = []

        async def check() -> bool:
            state = await self.state(order_id)
            if state is not None and state.status in wanted:
                found.append(state)
                return True
            return False

        await self.watch.until(check)
        return found[0]

    async def event_types(self, order_id: str) -> list[str]:
        return [e.event_type for e in await self.events.read(order_id)]

    async def wait_event(self, order_id: str, event_type: str) -> None:
        async def check() -> bool:
            return event_type in await self.event_types(order_id)
        await self.watch.until(check)

    async def wait_gone(self, node: zl.Node, order_id: str) -> None:
        """Until no incarnation of the order is registered (its close released it)."""
        # The close finishes after the turn, out of sight of the Spot: poll, bounded.
        while await node.spots.find(order_id) is not None:  # noqa: ASYNC110
            await trio.sleep(0.01)


@asynccontextmanager
async def open_harness(directory: Path) -> AsyncIterator[Harness]:
    """The two nodes and the stores (module docstring)."""
    store_url = f"memory://workflow-{uuid.uuid4().hex}"
    urls = {name: f"sqlite://{directory / name}.db" for name in
            ("events", "read-model", "commerce")}
    watch = Watch()
    lines: dict[str, list[str]] = {name: [] for name in NODES}
    fixtures = {name: FixtureControl(park_poll=0.01) for name in NODES}
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(zl.open_store(store_url))
        nodes: dict[str, zl.Node] = {}
        for weight, name in zip((1.0, 0.0), NODES, strict=True):
            services = await stack.enter_async_context(open_workflow_services(
                name, events_url=urls["events"], read_model_url=urls["read-model"],
                commerce_url=urls["commerce"], evidence=Evidence(lines[name].append),
                control=fixtures[name]))
            ports = attrs.evolve(
                services.ports,
                stream=_Notifying(services.ports.stream, "append", watch),
                projection=_Notifying(services.ports.projection, "put", watch))
            services = attrs.evolve(services, ports=ports)
            nodes[name] = await stack.enter_async_context(zl.open_node(
                name, store=store_url, mesh=WORKFLOW_MESH, spots=[order_workflow_spot(services)],
                placement_weight=weight))
        yield Harness(
            directory=directory, nodes=nodes, fixtures=fixtures, lines=lines,
            events=await stack.enter_async_context(open_order_event_store(urls["events"])),
            read_models=await stack.enter_async_context(
                open_order_read_model_store(urls["read-model"])),
            commerce=await stack.enter_async_context(open_commerce_state_store(urls["commerce"])),
            inventory=await stack.enter_async_context(open_inventory(urls["commerce"])),
            payment=await stack.enter_async_context(open_payment(urls["commerce"])),
            watch=watch)

"""The fixtures the runner prepares before the Client starts (items 9.2-4 to 9.2-6, 9.3-2).

The runner prepares fixtures and checks the server's evidence itself, before the
Client starts or after it finishes, never while it runs
(``docs/shoppingmall.md``, "The smoke"). Four items of the Client's self-check
need the runner *between* two steps of one order, so the runner takes those
steps itself, before the Client process exists, and hands the Client the
OrderIds (``ClientConfig.orders``). It starts each order the way any caller does
-- ``POST /orders`` on a CommerceApi, through ``client.api`` -- so every OrderId
it passes on is a value this run produced, and it never names an owner:

=====================  ===============================================================
order role             what the runner does before the Client starts
=====================  ===============================================================
``relocation``         starts it (its cart's continuation is gated after
                       InventoryReserved), waits until it parked, relocates it to the
                       other Workflow node, checks the same ObjectGeneration there, and
                       opens the gates: the target replays and goes on at
                       AuthorizePaymentReq (item 9.2-6)
``rebuild``            starts it, polls until Confirmed, remembers that state and
                       deletes its projection (item 9.2-4)
``released``           starts a no-stock order, polls until Failed, and waits until
                       no node hosts it (its close released the authority, item 9.2-5)
``failureBoundary``    starts it (its continuation stops at InventoryReserved), moves
                       it by planned relocation to the fixture node
                       (``topology.FIXTURE_NODE``, placement weight 0), checks it is
                       Ready there, and terminates that process (SIGKILL) (item 9.3-2)
=====================  ===============================================================

Why a fixture node for item 9.3-2: terminating one of the four sample nodes before
the Client would leave one OrderWorkflow process for the rest of the scenario,
where item 9.3-1 wants two; restarting it would release its Spots (restart
recovery), so the command would build a new generation instead of ending
``Unavailable``. A fifth process that takes no placements owns that one order
only; both sample Workflow nodes stay up and eligible, so "not re-created on a
different node" is checked with two candidates for it.

:func:`prepare_fixtures` returns the OrderIds and the :class:`Facts`
``verify`` checks afterwards; any step that goes wrong is :class:`PrepareError`.
Every wait is bounded: the status polls and hook waits use 100 ms x 300.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import attrs

from zlink_trio.samples.shoppingmall.client.api import ApiError, StatusWaitTimeout, wait_status
from zlink_trio.samples.shoppingmall.runner.hooks_client import HookError
from zlink_trio.samples.shoppingmall.runner.topology import FIXTURE_NODE, WORKFLOW_NODES
from zlink_trio.samples.shoppingmall.seeds import derive_cart
from zlink_trio.samples.shoppingmall.shared.contracts import (
    OrderState,
    OrderStatus,
    StartOrderReq,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from zlink_trio.samples.shoppingmall.client.api import OrderApi
    from zlink_trio.samples.shoppingmall.runner.hooks_client import Hooks
    from zlink_trio.samples.shoppingmall.runner.processes import NodeProcess

__all__ = ("Facts", "Kill", "PrepareError", "Prepared", "Relocation", "prepare_fixtures")


class PrepareError(Exception):
    """A fixture could not be prepared; the message says which and what was seen."""


@attrs.frozen(kw_only=True)
class Relocation:
    """The planned relocation the runner ran: which order, generation, source, target."""

    order_id: str
    generation: str
    source: str
    target: str


@attrs.frozen(kw_only=True)
class Kill:
    """The owner the runner terminated: the order, its generation, where it was placed
    (``source``) and the process killed (``node``, after the order moved there)."""

    order_id: str
    generation: str
    source: str
    node: str


@attrs.define
class Facts:
    """What the runner did before the Client started (``verify`` reads it afterwards)."""

    relocation: Relocation | None = None
    kill: Kill | None = None
    #: The ``rebuild`` order's state before its projection was deleted.
    rebuilt_before: OrderState | None = None
    released: str | None = None


@attrs.frozen
class Prepared:
    """The OrderIds by ``ClientConfig.ORDER_ROLES`` role, and the :class:`Facts`."""

    orders: dict[str, str]
    facts: Facts


class _Preparer:
    def __init__(self, hooks: Hooks, nodes: Mapping[str, NodeProcess],
                 apis: Sequence[OrderApi], carts: Mapping[str, str]) -> None:
        self.hooks = hooks
        self.nodes = nodes
        self.a, self.b = apis[0], apis[1]
        self.carts = carts
        self.facts = Facts()

    async def start(self, role: str, api: OrderApi) -> str:
        cart_id = self.carts[role]
        cart = derive_cart(cart_id)
        if cart is None:
            raise PrepareError(f"cart {cart_id!r} of role {role} has no known prefix")
        res = await api.start(StartOrderReq(
            cart_id=cart_id, shipping_address_id="addr-home",
            payment_method_id=cart.payment_method_id,
            idempotency_key=f"runner-{role}-{uuid.uuid4()}"))
        return res.order_id

    async def status(self, api: OrderApi, order_id: str, wanted: OrderStatus) -> OrderState:
        state = await wait_status(api, order_id, frozenset({wanted}) | _TERMINAL)
        if state.status is not wanted:
            raise PrepareError(f"order {order_id} ended {state.status} ({state.reason}), "
                               f"wanted {wanted}")
        return state

    async def owner(self, order_id: str) -> tuple[str, str]:
        owner = await self.hooks.owner(order_id)
        if owner is None:
            raise HookError(f"no live node hosts order {order_id}")
        return owner

    async def move(self, order_id: str, source: str, generation: str, target: str) -> None:
        """Relocate ``order_id`` and check it is Ready at ``target`` in ``generation``."""
        moved = await self.hooks.relocate(order_id, source, target)
        if moved["generation"] != generation:
            raise HookError(f"relocating {order_id} changed the generation {generation} -> "
                            f"{moved['generation']}")
        after = await self.hooks.owner(order_id)
        if after != (target, generation):
            raise HookError(f"after the relocation {order_id} is owned by {after}")

    async def relocation(self) -> str:
        order_id = await self.start("relocation", self.b)
        source = await self.hooks.wait_parked(order_id)
        owner, generation = await self.owner(order_id)
        if owner != source:
            raise HookError(f"order {order_id} parked at {source} but is owned by {owner}")
        target = next(n for n in WORKFLOW_NODES if n != source)
        await self.move(order_id, source, generation, target)
        for node_id in (target, source):  # the target is Ready: let the order go on
            await self.hooks.open_gate(node_id)
        self.facts.relocation = Relocation(order_id=order_id, generation=generation,
                                           source=source, target=target)
        return order_id

    async def rebuild(self) -> str:
        order_id = await self.start("rebuild", self.a)
        before = await self.status(self.a, order_id, OrderStatus.CONFIRMED)
        if not await self.hooks.delete_projection(order_id):
            raise HookError(f"order {order_id} had no projection to delete")
        self.facts.rebuilt_before = before
        return order_id

    async def released(self) -> str:
        order_id = await self.start("released", self.b)
        await self.status(self.b, order_id, OrderStatus.FAILED)
        await self.hooks.wait_released(order_id)
        self.facts.released = order_id
        return order_id

    async def failure_boundary(self) -> str:
        order_id = await self.start("failureBoundary", self.a)
        await self.status(self.a, order_id, OrderStatus.INVENTORY_RESERVED)
        source, generation = await self.owner(order_id)
        await self.move(order_id, source, generation, FIXTURE_NODE)
        node = self.nodes[FIXTURE_NODE]
        node.process.kill()
        await node.process.wait()
        self.hooks.down.add(FIXTURE_NODE)
        self.facts.kill = Kill(order_id=order_id, generation=generation, source=source,
                               node=FIXTURE_NODE)
        return order_id


_TERMINAL = frozenset({OrderStatus.CONFIRMED, OrderStatus.FAILED})


async def prepare_fixtures(hooks: Hooks, nodes: Mapping[str, NodeProcess],
                           apis: Sequence[OrderApi], carts: Mapping[str, str],
                           say: Callable[[str], None]) -> Prepared:
    """Prepare the four orders of the module docstring, in its order; raises PrepareError."""
    preparer = _Preparer(hooks, nodes, apis, carts)
    orders: dict[str, str] = {}
    steps = (("relocation", preparer.relocation), ("rebuild", preparer.rebuild),
             ("released", preparer.released), ("failureBoundary", preparer.failure_boundary))
    for role, step in steps:
        try:
            orders[role] = await step()
        except (HookError, ApiError, StatusWaitTimeout) as exc:
            raise PrepareError(f"preparing the {role} order: {exc}") from exc
        say(f"shoppingmall-runner prepared role={role} order={orders[role]}")
    return Prepared(orders, preparer.facts)

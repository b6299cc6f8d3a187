"""The runner's answers to the Client's asks (``client.asks``): the mid-scenario fixtures.

========================  ==========================================================
ask                       what the runner does (through the hooks, never the Client)
========================  ==========================================================
``delete-projection``     deletes the order's read model document (§9.2-4)
``await-released``        waits until no node hosts the order any more (§9.2-5)
``relocate``              waits until the order parked at a gate after
                          InventoryReserved, relocates it to the other Workflow node,
                          and opens the gates once the target is Ready (§9.2-6, §7.3)
``kill-owner``            terminates (SIGKILL) the process hosting the order's Ready
                          owner and waits for it to exit (§9.3-2)
========================  ==========================================================

:class:`AskDesk` records what it did (:class:`Facts`) for ``verify``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs

from zlink_trio.samples.shoppingmall.client.asks import parse_fields
from zlink_trio.samples.shoppingmall.runner.hooks_client import HookError

if TYPE_CHECKING:
    from zlink_trio.samples.shoppingmall.runner.hooks_client import Hooks
    from zlink_trio.samples.shoppingmall.runner.processes import NodeProcess

__all__ = ("AskDesk", "Facts", "Relocation")


@attrs.frozen(kw_only=True)
class Relocation:
    """The planned relocation the runner ran: which order, generation, source, target."""

    order_id: str
    generation: str
    source: str
    target: str


@attrs.define
class Facts:
    """What the runner did during the scenario."""

    relocation: Relocation | None = None
    killed: dict[str, str] = attrs.field(factory=dict)  # order -> NodeId
    deleted: list[str] = attrs.field(factory=list)


class AskDesk:
    """Answers asks with the hooks; :meth:`answer` returns the JSON answer line."""

    def __init__(self, hooks: Hooks, nodes: dict[str, NodeProcess]) -> None:
        self.hooks = hooks
        self.nodes = nodes
        self.facts = Facts()

    async def answer(self, line: str) -> str:
        """The answer to the ask ``line`` (``ok`` false with the reason on failure)."""
        fields = parse_fields(line)
        name = fields.get("ask", "")
        try:
            extra = await self._do(name, fields.get("order", ""))
            return json.dumps({"answer": name, "ok": True, **extra})
        except (HookError, KeyError, ValueError) as exc:
            return json.dumps({"answer": name, "ok": False, "reason": str(exc)})

    async def _do(self, name: str, order_id: str) -> dict[str, Any]:
        if not order_id:
            raise ValueError(f"ask {name!r} names no order")
        if name == "delete-projection":
            if not await self.hooks.delete_projection(order_id):
                raise HookError(f"order {order_id} had no projection to delete")
            self.facts.deleted.append(order_id)
            return {}
        if name == "await-released":
            await self.hooks.wait_released(order_id)
            return {}
        if name == "relocate":
            return await self._relocate(order_id)
        if name == "kill-owner":
            return await self._kill_owner(order_id)
        raise ValueError(f"unknown ask {name!r}")

    async def _relocate(self, order_id: str) -> dict[str, Any]:
        source = await self.hooks.wait_parked(order_id)
        owner = await self.hooks.owner(order_id)
        if owner is None or owner[0] != source:
            raise HookError(f"order {order_id} parked at {source} but is owned by {owner}")
        target = next(n for n in self.hooks.live if n != source)
        moved = await self.hooks.relocate(order_id, source, target)
        if moved["generation"] != owner[1]:
            raise HookError(f"relocation changed the generation {owner[1]} -> {moved}")
        after = await self.hooks.owner(order_id)
        if after != (target, owner[1]):
            raise HookError(f"after the relocation {order_id} is owned by {after}")
        for node_id in (target, source):  # the target is Ready: let the order go on
            await self.hooks.open_gate(node_id)
        self.facts.relocation = Relocation(order_id=order_id, generation=owner[1],
                                           source=source, target=target)
        return {"generation": owner[1]}

    async def _kill_owner(self, order_id: str) -> dict[str, Any]:
        owner = await self.hooks.owner(order_id)
        if owner is None:
            raise HookError(f"no live node hosts order {order_id}")
        node = self.nodes[owner[0]]
        node.process.kill()
        await node.process.wait()
        self.hooks.down.add(owner[0])
        self.facts.killed[order_id] = owner[0]
        return {}

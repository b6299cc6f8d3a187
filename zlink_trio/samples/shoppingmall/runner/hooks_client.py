"""The runner's side of the ``/self-check/*`` hooks (``hooks_app``): one call per fixture.

Only the runner process uses this. Every call is bounded: an HTTP timeout per
request, and the waits (:meth:`Hooks.wait_parked`, :meth:`Hooks.wait_released`)
use the log waits' budget, 100 ms x 300.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from zlink_trio.samples.shoppingmall.runner.log_wait import POLL_ATTEMPTS, POLL_INTERVAL

if TYPE_CHECKING:
    import httpx

__all__ = ("HookError", "Hooks")


class HookError(Exception):
    """A hook answered an error, or a hook wait ran out of budget."""


class Hooks:
    """The Workflow nodes' hooks, by NodeId; ``down`` holds the nodes the runner terminated."""

    def __init__(self, http: httpx.AsyncClient, urls: dict[str, str]) -> None:
        self._http = http
        self._urls = urls
        self.down: set[str] = set()

    @property
    def live(self) -> list[str]:
        """The Workflow nodes not terminated, in NodeId order."""
        return [n for n in sorted(self._urls) if n not in self.down]

    async def call(self, node_id: str, path: str, body: dict[str, Any] | None = None,
                   *, ok: tuple[int, ...] = (200,)) -> tuple[int, dict[str, Any]]:
        """``POST`` ``body`` (or ``GET`` without one) to ``path`` on ``node_id``'s hooks."""
        url = f"{self._urls[node_id]}/self-check/{path}"
        response = await (self._http.get(url) if body is None
                          else self._http.post(url, json=body))
        data = response.json()
        if response.status_code not in ok:
            raise HookError(f"{node_id} {path}: HTTP {response.status_code} {data}")
        return response.status_code, data

    async def seed(self, cart_ids: list[str]) -> None:
        """Seed the carts (and the stock and payment methods) once, through one node."""
        await self.call(self.live[0], "seed", {"cartIds": cart_ids})

    async def arm(self, fixture: str, cart_id: str) -> None:
        """Arm ``fixture`` for the first order of ``cart_id`` on every Workflow node."""
        for node_id in self.live:
            await self.call(node_id, "fixtures/arm", {"fixture": fixture, "cartId": cart_id})

    async def owner(self, order_id: str) -> tuple[str, str] | None:
        """(NodeId, ObjectGeneration) of the live node hosting ``order_id``, or ``None``."""
        for node_id in self.live:
            _, data = await self.call(node_id, f"owner/{order_id}")
            if data["owned"]:
                return node_id, str(data["generation"])
        return None

    async def wait_parked(self, order_id: str) -> str:
        """The NodeId where ``order_id``'s continuation parked at the gate (bounded)."""
        for _ in range(POLL_ATTEMPTS):
            for node_id in self.live:
                status, _ = await self.call(node_id, "fixtures/wait-parked",
                                            {"orderId": order_id, "timeout": POLL_INTERVAL},
                                            ok=(200, 504))
                if status == 200:
                    return node_id
        raise HookError(f"order {order_id} never parked at a gate")

    async def wait_released(self, order_id: str) -> None:
        """Return once no live node hosts ``order_id`` (its close released it; bounded)."""
        for _ in range(POLL_ATTEMPTS):
            if await self.owner(order_id) is None:
                return
            await trio.sleep(POLL_INTERVAL)
        raise HookError(f"order {order_id} was never released")

    async def relocate(self, order_id: str, source: str, target: str) -> dict[str, Any]:
        """Planned relocation of ``order_id`` from ``source`` to ``target``."""
        _, data = await self.call(source, "relocate", {"orderId": order_id, "to": target})
        if data["outcome"] != "COMMITTED":
            raise HookError(f"relocating {order_id} {source} -> {target}: {data}")
        return data

    async def open_gate(self, node_id: str) -> None:
        """Let parked continuations on ``node_id`` go on."""
        await self.call(node_id, "fixtures/open-gate", {})

    async def delete_projection(self, order_id: str) -> bool:
        """Delete ``order_id``'s read model document; whether there was one."""
        _, data = await self.call(self.live[0], "projection/delete", {"orderId": order_id})
        return bool(data["deleted"])

    async def mark(self, node_id: str, token: str) -> None:
        """Have ``node_id`` print its mark line with ``token`` (``log_wait.MARK``)."""
        await self.call(node_id, "mark", {"token": token})

    async def evidence(self, order_id: str) -> dict[str, Any]:
        """``{"events": [...], "calls": [...]}`` of ``order_id`` (from the shared stores)."""
        _, data = await self.call(self.live[0], f"evidence/{order_id}")
        return data

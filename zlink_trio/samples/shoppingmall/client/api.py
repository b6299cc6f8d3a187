"""The public order API of one CommerceApi, over HTTP with httpx (the Client's only door).

:class:`OrderApi` sends the JSON contracts (``shared.contracts``) as JSON
through the framework's typed codec and decodes the replies into the same
classes. A non-200 reply is :class:`ApiError` with the HTTP status and the
body's ``error`` name. :func:`wait_status` polls a lookup, bounded (100 ms x 300
by default), until the order reaches one of the wanted statuses.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final, TypeVar

import trio

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.shared.contracts import (
    ContinueOrderWorkflowRes,
    GetOrderStateRes,
    OrderState,
    OrderStatus,
    RebuildOrderProjectionRes,
    StartOrderReq,
    StartOrderRes,
)

if TYPE_CHECKING:
    import httpx

__all__ = ("TERMINAL", "ApiError", "OrderApi", "StatusWaitTimeout", "wait_status")

TERMINAL: Final = frozenset({OrderStatus.CONFIRMED, OrderStatus.FAILED})
_T = TypeVar("_T")


class ApiError(Exception):
    """A reply other than 200: ``status``, the body's ``error`` name and ``message``."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(f"HTTP {status} {error}: {message}")
        self.status = status
        self.error = error
        self.message = message


class StatusWaitTimeout(Exception):
    """Raised when an order did not reach a wanted status within the poll budget."""

    def __init__(self, order_id: str, wanted: frozenset[OrderStatus],
                 last: OrderState | ApiError | None) -> None:
        super().__init__(f"order {order_id} did not reach {sorted(wanted)}; last: {last}")
        self.last = last


class OrderApi:
    """One CommerceApi's public order API at ``base_url``."""

    def __init__(self, http: httpx.AsyncClient, base_url: str,
                 codec: zl.MessageCodec | None = None) -> None:
        self._http = http
        self.base_url = base_url.rstrip("/")
        self._codec = codec or zl.MessageCodec()

    def _decode(self, response: httpx.Response, kind: type[_T]) -> _T:
        if response.status_code != 200:
            try:
                body = response.json()
                error, message = str(body.get("error")), str(body.get("message"))
            except (ValueError, AttributeError):
                error, message = "?", response.text[:200]
            raise ApiError(response.status_code, error, message)
        return self._codec.from_json(response.content, kind)

    async def start(self, req: StartOrderReq) -> StartOrderRes:
        """``POST /orders``."""
        response = await self._http.post(f"{self.base_url}/orders",
                                         content=self._codec.to_json(req),
                                         headers={"content-type": "application/json"})
        return self._decode(response, StartOrderRes)

    async def get(self, order_id: str) -> OrderState:
        """``GET /orders/{orderId}``."""
        response = await self._http.get(f"{self.base_url}/orders/{order_id}")
        return self._decode(response, GetOrderStateRes).state

    async def _command(self, order_id: str, verb: str, source_command_id: str) -> bytes:
        response = await self._http.post(
            f"{self.base_url}/orders/{order_id}/{verb}",
            content=json.dumps({"sourceCommandId": source_command_id}).encode(),
            headers={"content-type": "application/json"})
        if response.status_code != 200:
            self._decode(response, GetOrderStateRes)  # raises ApiError
        return response.content

    async def continue_order(self, order_id: str, source_command_id: str) -> OrderState:
        """``POST /orders/{orderId}/continue``."""
        body = await self._command(order_id, "continue", source_command_id)
        return self._codec.from_json(body, ContinueOrderWorkflowRes).state

    async def rebuild(self, order_id: str, source_command_id: str) -> OrderState:
        """``POST /orders/{orderId}/rebuild-projection``."""
        body = await self._command(order_id, "rebuild-projection", source_command_id)
        return self._codec.from_json(body, RebuildOrderProjectionRes).state


async def wait_status(api: OrderApi, order_id: str, wanted: frozenset[OrderStatus] = TERMINAL,
                      *, interval: float = 0.1, attempts: int = 300) -> OrderState:
    """Poll ``api`` for ``order_id`` until its status is in ``wanted``; that state.

    Raises :class:`StatusWaitTimeout` (with the last state or error) after ``attempts``.
    """
    last: OrderState | ApiError | None = None
    for attempt in range(attempts):
        try:
            last = await api.get(order_id)
            if last.status in wanted:
                return last
        except ApiError as exc:
            last = exc
        if attempt + 1 < attempts:
            await trio.sleep(interval)
    raise StatusWaitTimeout(order_id, wanted, last)

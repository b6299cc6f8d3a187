"""The public order API as a Starlette ASGI app: four routes around :class:`OrderService`.

The paths and JSON shapes are a contract other clients rely on:

- ``POST /orders``, body ``StartOrderReq`` -> ``StartOrderRes`` (once Created is recorded)
- ``GET /orders/{orderId}`` -> ``GetOrderStateRes`` (the read model; no side effect)
- ``POST /orders/{orderId}/continue``, body ``{"sourceCommandId": ...}`` ->
  ``ContinueOrderWorkflowRes``
- ``POST /orders/{orderId}/rebuild-projection``, body ``{"sourceCommandId": ...}`` ->
  ``RebuildOrderProjectionRes``

Bodies are JSON in the framework's typed codec (camelCase,
``shared.contracts``), read with a 64 KiB bound (``inputs``); replies are
``application/json``. Every failure is ``{"error": ..., "message": ...}`` with
the status ``http_errors`` assigns -- 400 refused input, 404 unknown order or
route, 409 a conflict, 503 the owner or a store unavailable, 504 the deadline
passed. A handler only reads, decodes, calls the service and encodes: the rules
are the service's.

The app holds no node, store or owner address of its own; :func:`build_app`
takes the service, so tests drive it through ``httpx.ASGITransport`` and
``process.run_api_node`` serves it with Hypercorn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import Route

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.commerce_api.http_errors import (
    error_response,
    json_error,
)
from zlink_trio.samples.shoppingmall.server.commerce_api.inputs import (
    ValidationError,
    decode_body,
    read_body,
)
from zlink_trio.samples.shoppingmall.shared.contracts import StartOrderReq

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import Request

    from zlink_trio.samples.shoppingmall.server.commerce_api.orders import OrderService

__all__ = ("OrderCommandBody", "build_app")


@attrs.frozen
class OrderCommandBody:
    """The body of ``continue`` and ``rebuild-projection``: the command's SourceCommandId.

    The OrderId is the path's; with it the body becomes ContinueOrderWorkflowReq
    or RebuildOrderProjectionReq.
    """

    __zlink_type__: ClassVar[str] = "shoppingmall.OrderCommandBody"
    __zlink_json_names__: ClassVar[str] = "camelCase"
    source_command_id: str


def _json(service: OrderService, value: object) -> Response:
    return Response(service.codec.to_json(value), media_type="application/json")


def _route(path: str, method: str, service: OrderService,
           call: Callable[[OrderService, Request], Awaitable[object]]) -> Route:
    async def handle(request: Request) -> Response:
        try:
            return _json(service, await call(service, request))
        except (ValidationError, zl.ZLinkError) as exc:
            return error_response(exc)

    return Route(path, handle, methods=[method])


async def _start(service: OrderService, request: Request) -> object:
    req = decode_body(service.codec, await read_body(request), StartOrderReq)
    return await service.start_order(req)


async def _get(service: OrderService, request: Request) -> object:
    return await service.get_order_state(request.path_params["orderId"])


async def _continue(service: OrderService, request: Request) -> object:
    body = decode_body(service.codec, await read_body(request), OrderCommandBody)
    return await service.continue_order(request.path_params["orderId"], body.source_command_id)


async def _rebuild(service: OrderService, request: Request) -> object:
    body = decode_body(service.codec, await read_body(request), OrderCommandBody)
    return await service.rebuild_projection(request.path_params["orderId"],
                                            body.source_command_id)


async def _http_error(request: Request, exc: Exception) -> Response:
    # Starlette's own refusals (no such route, method not allowed) in the API's shape.
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    name = {404: "NotFound", 405: "InvalidOperation"}.get(status, "InvalidOperation")
    detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
    return json_error(status, name, f"{request.method} {request.url.path}: {detail}")


def build_app(service: OrderService) -> Starlette:
    """The ASGI app of the public order API (module docstring) over ``service``."""
    app = Starlette(
        routes=[
            _route("/orders", "POST", service, _start),
            _route("/orders/{orderId}", "GET", service, _get),
            _route("/orders/{orderId}/continue", "POST", service, _continue),
            _route("/orders/{orderId}/rebuild-projection", "POST", service, _rebuild),
        ],
        exception_handlers={HTTPException: _http_error},
    )
    # The paths are exact: ``/orders/`` is no order, not a redirect to ``/orders``.
    app.router.redirect_slashes = False
    return app

"""The runner-only ``/self-check/*`` hooks a Workflow node serves in runner mode.

Only the smoke runner calls these, on a loopback port of its own choosing;
the Client never does, and ``serve`` does not open them. Each hook prepares a
fixture or reads server-side evidence; none is part of the public order API.
Bodies and replies are JSON:

==========================================  ==============================================
``POST /self-check/seed``                   ``{"cartIds": [...]}``: seed those carts, the
                                            stock and the payment methods (``seeds``)
``POST /self-check/fixtures/arm``           ``{"fixture": "stop-at-reserved" |
                                            "skip-terminal-projection" |
                                            "gate-after-reserved", "cartId"|"orderId": ...}``
``POST /self-check/fixtures/wait-parked``   ``{"cartId": ..., "timeout": s}`` -> ``{"orderId"}``
                                            once a gated order parked here; 504 otherwise
``POST /self-check/fixtures/open-gate``     let parked continuations of this node go on
``GET  /self-check/owner/{orderId}``        ``{"owned": bool, "generation": "N" | null}``:
                                            does this node host the order's Ready owner
``POST /self-check/relocate``               ``{"orderId", "to"}`` -> ``{"outcome",
                                            "generation", "target", "reason"}``
``POST /self-check/projection/delete``      ``{"orderId"}`` -> ``{"deleted": bool}``
``GET  /self-check/evidence/{orderId}``     ``{"events": [eventType...], "calls":
                                            [{"module", "operation", "effect", "caller"}]}``
``POST /self-check/mark``                   ``{"token"}``: print ``shoppingmall-runner mark
                                            node=<NodeId> token=<Token>`` (``log_wait.MARK``)
                                            to this node's log, after everything it wrote
                                            before; the runner's exact-count rows wait for it
==========================================  ==============================================
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import attrs
import trio
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from zlink_trio.samples.shoppingmall.runner import parts
from zlink_trio.samples.shoppingmall.runner.evidence import render
from zlink_trio.samples.shoppingmall.runner.log_wait import MARK
from zlink_trio.samples.shoppingmall.runner.seeding import apply_seed_plan
from zlink_trio.samples.shoppingmall.seeds import seed_plan

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import Request

    import zlink_trio as zl
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_store import (
        OrderEventStore,
    )
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.inventory import (
        Inventory,
    )
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.payment import (
        Payment,
    )
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (  # noqa: E501
        OrderReadModelStore,
    )

__all__ = ("HookContext", "build_hooks_app")


@attrs.frozen(kw_only=True)
class HookContext:
    """What the hooks act on: this Workflow node, its fixture control, the stores."""

    node: zl.Node
    node_id: str
    fixtures: Any
    commerce_url: str
    events: OrderEventStore
    read_models: OrderReadModelStore
    inventory: Inventory
    payment: Payment
    #: Writes one line to this node's log (default: standard output, flushed).
    say: Callable[[str], None] = attrs.field(factory=lambda: _stdout_line)


def _stdout_line(line: str) -> None:
    """One line to standard output, flushed: the node's log, in the order it was written."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _body(request: Request) -> dict[str, Any]:
    data = await request.json()
    if not isinstance(data, dict):
        raise ValueError("the body must be a JSON object")
    return data


def _target(data: dict[str, Any]) -> dict[str, str]:
    if "orderId" in data:
        return {"order_id": str(data["orderId"])}
    return {"cart_id": str(data["cartId"])}


async def _seed(ctx: HookContext, request: Request) -> JSONResponse:
    data = await _body(request)
    cart_ids = [str(c) for c in data["cartIds"]]
    await apply_seed_plan(ctx.commerce_url, seed_plan(cart_ids))
    return JSONResponse({"seeded": len(cart_ids)})


async def _arm(ctx: HookContext, request: Request) -> JSONResponse:
    data = await _body(request)
    ctx.fixtures.arm(parts.fixture(str(data["fixture"])), **_target(data))
    return JSONResponse({"armed": data["fixture"], "node": ctx.node_id})


async def _wait_parked(ctx: HookContext, request: Request) -> JSONResponse:
    data = await _body(request)
    with trio.move_on_after(float(data.get("timeout", 1.0))):
        order_id = await ctx.fixtures.wait_parked(**_target(data))
        return JSONResponse({"orderId": order_id, "node": ctx.node_id})
    return JSONResponse({"error": "NotParked", "node": ctx.node_id}, status_code=504)


async def _open_gate(ctx: HookContext, request: Request) -> JSONResponse:
    ctx.fixtures.open_gate()
    return JSONResponse({"opened": ctx.node_id})


async def _owner(ctx: HookContext, request: Request) -> JSONResponse:
    ref = await ctx.node.spots.find(request.path_params["orderId"])
    owned = ref is not None and ref.node_rid == ctx.node.node_rid
    return JSONResponse({"owned": owned, "node": ctx.node_id,
                         "generation": str(ref.generation) if ref is not None else None})


async def _relocate(ctx: HookContext, request: Request) -> JSONResponse:
    data = await _body(request)
    result = await ctx.node.relocate(str(data["orderId"]), to=str(data["to"]),
                                     timeout=float(data.get("timeout", 10.0)))
    return JSONResponse({"outcome": result.outcome.name, "reason": result.reason,
                         "generation": str(result.ref.generation) if result.ref else None,
                         "target": data["to"], "source": ctx.node_id})


async def _delete_projection(ctx: HookContext, request: Request) -> JSONResponse:
    data = await _body(request)
    return JSONResponse({"deleted": await ctx.read_models.delete(str(data["orderId"]))})


async def _evidence(ctx: HookContext, request: Request) -> JSONResponse:
    order_id = request.path_params["orderId"]
    events = await ctx.events.read(order_id)
    calls = (*await ctx.inventory.calls(order_id), *await ctx.payment.calls(order_id))
    return JSONResponse({
        "events": [e.event_type for e in events],
        "calls": [{"module": c.module, "operation": c.operation, "effect": c.effect,
                   "caller": c.caller, "requestId": c.request_id} for c in calls],
    })


async def _mark(ctx: HookContext, request: Request) -> JSONResponse:
    data = await _body(request)
    token = str(data["token"])
    if not token or any(c.isspace() for c in token):
        raise ValueError(f"a mark token is one non-blank word, got {token!r}")
    ctx.say(render(MARK, NodeId=ctx.node_id, Token=token))
    return JSONResponse({"marked": token, "node": ctx.node_id})


def _route(path: str, method: str, ctx: HookContext,
           handler: Callable[[HookContext, Request], Awaitable[JSONResponse]]) -> Route:
    async def handle(request: Request) -> JSONResponse:
        try:
            return await handler(ctx, request)
        except (KeyError, ValueError, TypeError) as exc:
            return JSONResponse({"error": "BadHookRequest", "message": repr(exc)},
                                status_code=400)
        except Exception as exc:  # a hook reports what failed; the node goes on
            return JSONResponse({"error": type(exc).__name__, "message": str(exc)},
                                status_code=500)
    return Route(path, handle, methods=[method])


def build_hooks_app(ctx: HookContext) -> Starlette:
    """The hook app (module docstring) over ``ctx``."""
    return Starlette(routes=[
        _route("/self-check/seed", "POST", ctx, _seed),
        _route("/self-check/fixtures/arm", "POST", ctx, _arm),
        _route("/self-check/fixtures/wait-parked", "POST", ctx, _wait_parked),
        _route("/self-check/fixtures/open-gate", "POST", ctx, _open_gate),
        _route("/self-check/owner/{orderId}", "GET", ctx, _owner),
        _route("/self-check/relocate", "POST", ctx, _relocate),
        _route("/self-check/projection/delete", "POST", ctx, _delete_projection),
        _route("/self-check/evidence/{orderId}", "GET", ctx, _evidence),
        _route("/self-check/mark", "POST", ctx, _mark),
    ])

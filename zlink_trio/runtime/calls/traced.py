"""``TracedRouter``: a :class:`~.delivery.Router` that makes a span of every call.

A node that traces (``observe.tracing``: ``open_node(tracing=...)`` or a global tracer
provider) puts it between ``node.client`` (and every ``ctx.client``) and the node's
router -- outside the metered router when both are on; a node that traces nothing
talks to the router directly and pays nothing per call. Each ``send`` / ``request``
is one span, ``zlink.send`` (kind PRODUCER) or ``zlink.request`` (kind CLIENT), child
of the caller's current span (a handler's ``zlink.handle`` while it runs), ended with
the call's outcome. The delivery carries the span's context
(:attr:`~.delivery.Delivery.trace`): the resolve, a cold activation and the handler
turn are its children, on this node or -- through command 39's metadata -- another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import Span
    from opentelemetry.util.types import AttributeValue

    from zlink_trio.runtime.calls.delivery import Delivery, Intent, Router
    from zlink_trio.runtime.observe.tracing import OtelTracing

__all__ = ("TracedRouter",)


class TracedRouter:
    """``router`` with every call a span of ``tracing`` (the node's ``NodeState.tracing``)."""

    __slots__ = ("_mesh", "_router", "_tracing")

    def __init__(self, tracing: OtelTracing, router: Router, mesh: str) -> None:
        self._router = router
        self._tracing = tracing
        self._mesh = mesh

    def delivery(self, spot_id: str, msg: object, *, intent: Intent | None, reply: object,
                 request: bool, timeout: float | None, to_actor: bool = False) -> Delivery:
        """The router's delivery (see :meth:`Router.delivery`)."""
        return self._router.delivery(spot_id, msg, intent=intent, reply=reply,
                                     request=request, timeout=timeout, to_actor=to_actor)

    def _start(self, name: str, kind: str, call: Delivery) -> Span:
        attributes: dict[str, AttributeValue] = {
            "zlink.spot_id": call.spot_id, "zlink.message": type(call.msg).__qualname__}
        intent = call.intent
        attributes["zlink.mesh"] = (intent.mesh if intent is not None and intent.mesh
                                    else self._mesh)
        if intent is not None and intent.stable_type is not None:
            attributes["zlink.spot_type"] = intent.stable_type
        span = self._tracing.start(name, None, kind=kind, attributes=attributes)
        call.trace = self._tracing.context_with(span)
        return span

    async def send(self, call: Delivery) -> None:
        """The router's send, as span ``zlink.send``."""
        span = self._start("zlink.send", "producer", call)
        try:
            await self._router.send(call)
        except BaseException as exc:
            self._tracing.finish(span, exc)
            raise
        self._tracing.finish(span, None)

    async def request(self, call: Delivery) -> object:
        """The router's request, as span ``zlink.request``."""
        span = self._start("zlink.request", "client", call)
        try:
            reply = await self._router.request(call)
        except BaseException as exc:
            self._tracing.finish(span, exc)
            raise
        self._tracing.finish(span, None)
        return reply

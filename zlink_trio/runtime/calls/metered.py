"""``MeteredRouter``: a :class:`~.delivery.Router` that counts and times every call.

``open_node(metrics=...)`` puts it between ``node.client`` (and every ``ctx.client``)
and the node's router; without metrics the client talks to the router directly, so a
node that records nothing pays nothing per call.  Each ``send`` / ``request`` is
reported once, when it ends: its kind, its outcome (``ok`` or the error class name,
``fields.outcome_of``) and its latency from admission to reply (a send: to admission).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from zlink_trio.runtime.observe.fields import Operation, outcome_of

if TYPE_CHECKING:
    from zlink_trio.runtime.calls.delivery import Delivery, Intent, Router
    from zlink_trio.runtime.observe.recorder import Recorder

__all__ = ("MeteredRouter",)


class MeteredRouter:
    """``router`` with every call reported to ``recorder`` (the node's ``NodeState.metrics``)."""

    __slots__ = ("_recorder", "_router")

    def __init__(self, recorder: Recorder, router: Router) -> None:
        self._router = router
        self._recorder = recorder

    def delivery(self, spot_id: str, msg: object, *, intent: Intent | None, reply: object,
                 request: bool, timeout: float | None, to_actor: bool = False) -> Delivery:
        """The router's delivery (see :meth:`Router.delivery`)."""
        return self._router.delivery(spot_id, msg, intent=intent, reply=reply,
                                     request=request, timeout=timeout, to_actor=to_actor)

    async def send(self, call: Delivery) -> None:
        """The router's send, reported as ``send``."""
        started = time.perf_counter()
        try:
            await self._router.send(call)
        except BaseException as exc:
            self._recorder.request(Operation.SEND, outcome_of(exc),
                                   time.perf_counter() - started)
            raise
        self._recorder.request(Operation.SEND, "ok", time.perf_counter() - started)

    async def request(self, call: Delivery) -> object:
        """The router's request, reported as ``request``."""
        started = time.perf_counter()
        try:
            reply = await self._router.request(call)
        except BaseException as exc:
            self._recorder.request(Operation.REQUEST, outcome_of(exc),
                                   time.perf_counter() - started)
            raise
        self._recorder.request(Operation.REQUEST, "ok", time.perf_counter() - started)
        return reply

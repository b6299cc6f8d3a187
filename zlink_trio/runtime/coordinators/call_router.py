"""``CallRouter``: what ``node.client`` (and every ``ctx.client``) calls through.

Theory of operation
-------------------
The client validates a call and hands it to the node's router, which builds the
:class:`~zlink_trio.runtime.calls.delivery.Delivery` (encoded, with its one deadline),
admits it -- through the route cache with nothing awaited (:func:`~.routing.admit_cached`),
else by resolving (:mod:`.routing`: first :func:`~.routing.deliver_inline` on a store whose
transactions never suspend, then :func:`~.routing.deliver` under the call's deadline)
-- and for a request waits for the reply under the same deadline.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.core.deadline import Deadline
from zlink_trio.core.errors import DeadlineExceeded
from zlink_trio.runtime.calls.completion import Completion
from zlink_trio.runtime.calls.delivery import Delivery
from zlink_trio.runtime.coordinators.routing import (
    UNREAD,
    Unread,
    admit_cached,
    deliver,
    deliver_inline,
)
from zlink_trio.store.combined_protocol import immediate_of

if TYPE_CHECKING:
    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.core.route_cache import CachedRoute
    from zlink_trio.runtime.calls.delivery import Intent
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.incarnation.incarnation import Incarnation

__all__ = ("CallRouter",)


class CallRouter:
    """The node's router: what ``node.client`` (and every ``ctx.client``) calls through."""

    __slots__ = ("_now", "_rt")

    def __init__(self, rt: NodeRuntime) -> None:
        self._rt = rt
        # What ``trio.current_time`` reads, without its three calls: the router lives
        # in the run that opened the node.
        self._now: Final = trio.lowlevel.current_clock().current_time

    def bind(self, rt: NodeRuntime) -> None:
        """Route through ``rt`` from now on: the node rejoined the Mesh as a new lifecycle."""
        self._rt = rt

    def delivery(self, spot_id: str, msg: object, *, intent: Intent | None, reply: object,
                 request: bool, timeout: float | None, to_actor: bool = False) -> Delivery:
        """The call as one Delivery, encoded, with its deadline fixed now."""
        rt = self._rt
        rt.check_usable()
        encoded = rt.codec.encode(msg)
        seconds = rt.options.default_timeout if timeout is None else timeout
        return Delivery(
            spot_id, msg, len(encoded.body), intent, Completion() if request else None, reply,
            Deadline.after(seconds, now=self._now(), wall_now=time.time()), "", encoded,
            to_actor=to_actor)

    async def send(self, call: Delivery) -> None:
        """Admit a one-way ``call``; DeadlineExceeded when its deadline passes first."""
        # The route-cache hit admits without awaiting anything, so it needs no deadline
        # scope (no wait happens); every other path waits under the call's deadline.
        first = admit_cached(self._rt, call)
        if first is not True:
            await self._resolve(call, first, "the send")
            # A send resolved on a store whose transactions never suspend may have
            # admitted -- even activated a Spot -- without yielding: yield once, so a loop
            # of such sends still lets the node's other tasks (lease, the new Spots) run.
            # Shielded: the message is admitted, so no Cancelled may say otherwise.
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def request(self, call: Delivery) -> object:
        """Admit ``call`` as :meth:`send` does, then wait for its reply (same deadline).

        A StaleRoute answer (the owner no longer hosts it; not run) fails this call and
        drops the cached route: it is not resubmitted, the next call resolves afresh.
        """
        rt = self._rt
        first = admit_cached(rt, call)
        if first is not True:
            await self._resolve(call, first, "the request")
        if rt.peers.unflushed:  # (a frame for another node: write it from here)
            await rt.peers.flush()
        assert call.completion is not None
        reply = await call.completion.wait(call.deadline, f"the request to Spot "
                                           f"{call.spot_id!r}", rt.deadlines)
        # A reply from a handler on this node is its own object: the caller gets a copy,
        # as it would from another node (``Delivery.message_for_local_turn``).
        return rt.codec.isolated(reply) if call.copy_reply else reply

    async def _resolve(self, call: Delivery, first: Incarnation | CachedRoute | bool,
                       what: str) -> None:
        rt = self._rt
        # A traced call's resolve is a span of its own (a node that traces nothing gets
        # the shared empty context manager: ``observe.tracing.Tracing.span``).
        with rt.tracing.span("zlink.resolve", call.trace,
                             attributes={"zlink.spot_id": call.spot_id}):
            await self._resolve_in(rt, call, first, what)

    async def _resolve_in(self, rt: NodeRuntime, call: Delivery,
                          first: Incarnation | CachedRoute | bool, what: str) -> None:
        prefetched: AuthorityRecord | Unread | None = UNREAD
        if first is False:
            immediate = immediate_of(rt.store)
            if immediate is not None:
                # A store without waits: first try it in this continuation -- no scope,
                # since nothing waits (a deadline is only passed by waiting).
                done = deliver_inline(rt, call, immediate)
                if done is True:
                    return
                prefetched = done
        with trio.move_on_at(call.deadline.at):
            await deliver(rt, call, first, prefetched)
            return
        raise DeadlineExceeded(
            f"{what} to Spot {call.spot_id!r} was not admitted before its deadline; use a "
            "longer .timeout()"
        )

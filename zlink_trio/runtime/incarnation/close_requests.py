"""How an incarnation's close begins: a BeginClose that succeeded, ``ctx.close()``, a
lost lease (06 §7, 06 §9).

Theory of operation
-------------------
A :class:`~.host.Host` closes for one of three reasons, each sealing admission at once:

* :func:`request_close` -- a store BeginClose succeeded (an explicit close, idle
  eviction, node shutdown): the chart takes ``begin_close`` (``begin_idle_eviction``),
  the reason and the Closing record's fence are kept for the Release, and a close
  already under way absorbs a second one;
* :func:`begin_self_close` -- ``ctx.close()`` asked for it during a turn: once that
  turn ended, the host's task runs the BeginClose itself (bounded by the node's
  ``default_timeout``; a refusal is logged and the Spot keeps serving);
* :func:`lose_ownership` -- the node learned its lease is gone: the local part of a
  close without any store write; queued items end :class:`Unavailable` without
  running, timers are cancelled, a relocation in progress is unsealed.

What happens once all accepted work is done is :mod:`.closing`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import trio

from zlink_trio.core.errors import ZLinkError
from zlink_trio.runtime.charts import INCARNATION, step
from zlink_trio.runtime.declaration.policies import CloseReason
from zlink_trio.runtime.incarnation.closing import ClosingHost, fail_queued
from zlink_trio.runtime.observe.logs import SPOTS as LOGGER

if TYPE_CHECKING:
    from zlink_trio.core.errors import Unavailable
    from zlink_trio.core.records import AuthorityFence
    from zlink_trio.runtime.incarnation.moving import Move

__all__ = ("CloseRequestHost", "begin_self_close", "lose_ownership", "request_close")


class CloseRequestHost(ClosingHost, Protocol):
    """What beginning a close reads and changes of its host (a :class:`~.host.Host`)."""

    #: ``ctx.close()`` was called and its close has not begun yet.
    self_close: bool

    @property
    def move(self) -> Move | None: ...

    def wake(self) -> None: ...


def request_close(host: CloseRequestHost, reason: CloseReason, fence: AuthorityFence) -> None:
    """Seal admission for a close whose BeginClose succeeded; merges with a running one."""
    event = (INCARNATION.ev.begin_idle_eviction if reason is CloseReason.IDLE_EVICTED
             else INCARNATION.ev.begin_close)
    if host.close_reason is not None or not INCARNATION.allows(host.state, event):
        return
    host.state = step(INCARNATION, host.state, event)
    host.close_reason = reason
    host.close_fence = fence
    host.wake()


def lose_ownership(host: CloseRequestHost, error: Unavailable) -> None:
    """The node lost its lease: seal, fail queued work with ``error``, cancel timers.

    The task then finishes the running turn, runs ``on_close(OWNERSHIP_LOST)`` once
    (unless a close already started its ``on_close``) and leaves the catalog without
    writing to the store. Synchronous; idempotent.
    """
    if host.ownership_lost or host.state not in INCARNATION.tags.task_running:
        return
    host.ownership_lost = True
    if host.move is not None:  # the move cannot go on without a lease
        host.move.unseal()
    if INCARNATION.allows(host.state, INCARNATION.ev.begin_close):
        host.state = step(INCARNATION, host.state, INCARNATION.ev.begin_close)
    if not host.cleanup_started:
        host.close_reason = CloseReason.OWNERSHIP_LOST
    host.self_close = False
    host.timers.cancel_all()
    fail_queued(host, error)
    host.wake()


async def begin_self_close(host: CloseRequestHost) -> None:
    """``ctx.close()``'s BeginClose, after the turn that asked for it (by the host's task)."""
    if host.state == INCARNATION.st.sealed:
        return  # the relocation that sealed behind the turn sees it and aborts
    host.self_close = False
    if not INCARNATION.allows(host.state, INCARNATION.ev.begin_close):
        return
    rt = host.rt
    record = None
    with trio.move_on_after(rt.options.default_timeout):
        try:
            record = await rt.store.location.begin_close(
                host.spot_id, object_generation=host.generation, owner=rt.owner,
                now=rt.now())
        except ZLinkError as exc:
            LOGGER.warning("Spot %r: ctx.close() could not begin: %s", host.spot_id, exc,
                           extra=host.log_fields())
    if record is not None:
        request_close(host, CloseReason.CLOSED, record.fence())

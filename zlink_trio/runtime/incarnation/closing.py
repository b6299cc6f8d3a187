"""How an incarnation ends: its last steps, once all accepted work is done (06 §7, 09 §5).

Theory of operation
-------------------
A :class:`~.host.Host` decides *when* it closes (a store BeginClose succeeded, the node
lost its lease, a relocation committed); this module holds *what* then happens, once:

* :func:`finish` -- ``on_close(reason)`` once, then (with ownership) Release with the
  Closing record's fence, the catalog entry dropped, ``disposed``, ``finished`` set,
  and the activation inbox and any leftover first-record root deleted. Without
  ownership nothing is written: the inbox and root stay as evidence for the operator.
* :func:`moved_away` -- after a committed relocation: ``on_close(RELOCATED)`` once and
  ``finished``; no store write (the target owns the Spot now).
* :func:`fail_queued` -- every queued request ends with the given error without
  running (a one-way send is dropped and logged), so no caller waits for a turn that
  never comes.

Every store call of the cleanup is bounded by the node's ``default_timeout`` and
logged when it fails or gets no answer (:func:`bounded`): the caller runs these steps
shielded, so a hung store must not hold the task forever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import trio

from zlink_trio.core.errors import ZLinkError
from zlink_trio.runtime import observers
from zlink_trio.runtime.charts import INCARNATION, step
from zlink_trio.runtime.coordinators.first_record import drop_recovery
from zlink_trio.runtime.declaration.policies import CloseReason
from zlink_trio.runtime.incarnation.app_calls import run_on_close
from zlink_trio.runtime.incarnation.handler_turn import TurnHost
from zlink_trio.runtime.incarnation.work import MessageWork, Work
from zlink_trio.runtime.observe.events import incarnation_closed
from zlink_trio.runtime.observe.logs import SPOTS as LOGGER

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from statecharts.names import IncarnationState
    from zlink_trio.core.errors import Unavailable
    from zlink_trio.core.lanes import Lanes
    from zlink_trio.core.records import AuthorityFence
    from zlink_trio.runtime.coordinators.first_record import FirstRecord
    from zlink_trio.runtime.incarnation.timers import HostTimers

__all__ = ("ClosingHost", "bounded", "fail_queued", "finish", "moved_away")


class ClosingHost(TurnHost, Protocol):
    """What the last steps read and change of their incarnation (a :class:`~.host.Host`),
    besides what a turn reads."""

    @property
    def mesh(self) -> str: ...
    @property
    def timers(self) -> HostTimers: ...
    @property
    def lanes(self) -> Lanes[Work]: ...

    state: IncarnationState
    close_reason: CloseReason | None
    close_fence: AuthorityFence | None
    first_record: FirstRecord | None
    ownership_lost: bool
    cleanup_started: bool

    def leave_catalog(self) -> None: ...
    def set_finished(self) -> None: ...


async def finish(host: ClosingHost) -> None:
    """All accepted work is done: cleanup once, release, unregister (06 §7).

    Without ownership (the node lost its lease) nothing is written to the store.
    """
    reason = host.close_reason
    assert reason is not None
    host.timers.cancel_all()
    host.cleanup_started = True
    await run_on_close(host.spot_type, host.instance, host.spot_id, reason)
    _observe_close(host, reason)
    fence = host.close_fence
    if not host.ownership_lost and fence is not None:
        await bounded(host, "Release", lambda: host.rt.store.location.release(fence))
    host.leave_catalog()
    host.state = step(INCARNATION, host.state, INCARNATION.ev.dispose)
    host.set_finished()
    incarnation_closed(host.rt, reason.value, host.spot_id, host.mesh, host.generation)
    if not host.ownership_lost:  # else inbox and root stay as evidence for the operator
        first = host.first_record
        await bounded(host, "recovery cleanup", lambda: drop_recovery(
            host.rt, host.spot_id, host.generation, first))


async def moved_away(host: ClosingHost) -> None:
    """After a committed relocation: ``on_close(RELOCATED)`` once, then ``finished``."""
    host.cleanup_started = True
    await run_on_close(host.spot_type, host.instance, host.spot_id, CloseReason.RELOCATED)
    _observe_close(host, CloseReason.RELOCATED)
    host.set_finished()
    incarnation_closed(host.rt, CloseReason.RELOCATED.value, host.spot_id, host.mesh,
                       host.generation)


def _observe_close(host: ClosingHost, reason: CloseReason) -> None:
    if observers.OBSERVERS and host.instance is not None:
        for observer in observers.OBSERVERS:
            observer.closed(host.rt.node_id, host.spot_id, host.generation, reason)


async def bounded(host: ClosingHost, what: str, call: Callable[[], Awaitable[object]]
                  ) -> None:
    """One store call of the (shielded) cleanup, bounded by ``default_timeout``; logged."""
    timeout = host.rt.options.default_timeout
    with trio.move_on_after(timeout) as scope:
        try:
            await call()
        except ZLinkError as exc:
            LOGGER.error("Spot %r: %s failed: %s", host.spot_id, what, exc,
                         extra=host.log_fields())
    if scope.cancelled_caught:
        LOGGER.error("Spot %r: %s got no answer from the store within %s s; the record "
                     "stays until an operator cleans it up", host.spot_id, what, timeout,
                     extra=host.log_fields())


def fail_queued(host: ClosingHost, error: Unavailable) -> None:
    """Complete every queued request with ``error`` without running it (sends are dropped
    and logged); no caller may wait for a turn that never comes."""
    dropped = 0
    while (turn := host.lanes.next_turn()) is not None:
        if isinstance(turn.item, MessageWork):
            if turn.item.completion is not None:
                turn.item.completion.set_error(error)
            else:
                dropped += 1
        host.lanes.complete(turn.ticket)
    if dropped:
        LOGGER.warning("Spot %r: %d queued one-way send(s) were not run: %s",
                       host.spot_id, dropped, error, extra=host.log_fields())

"""Firing an incarnation's due timers: their ticks queued as turns.

:func:`fire_due_timers` is called by the host's task before it parks: the ticks due
now (``HostTimers.due``) join the application lane as :class:`~.timers.TimerWork`
items, so a callback runs as an ordinary turn, one at a time with the handlers.  No
tick is queued while the incarnation's state fires no timers (closing, sealed for a
relocation) nor by an owner past its lease deadline (09 §4: a periodic timer comes due
again); a tick the lane refuses (its bound) is skipped and logged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import trio

from zlink_trio.core.errors import ZLinkError
from zlink_trio.runtime.charts import INCARNATION
from zlink_trio.runtime.incarnation.handler_turn import TurnHost, lease_passed
from zlink_trio.runtime.observe.logs import SPOTS as LOGGER

if TYPE_CHECKING:
    from statecharts.names import IncarnationState
    from zlink_trio.core.lanes import Lanes
    from zlink_trio.runtime.incarnation.timers import HostTimers

__all__ = ("TimerHost", "fire_due_timers")


class TimerHost(TurnHost, Protocol):
    """What firing the due timers reads of their host (a :class:`~.host.Host`)."""

    @property
    def state(self) -> IncarnationState: ...
    @property
    def timers(self) -> HostTimers: ...
    @property
    def lanes(self) -> Lanes[Any]: ...


def fire_due_timers(host: TimerHost) -> None:
    """Queue the due ticks on the application lane; see the module docstring."""
    timers = host.timers
    if not timers or host.state not in INCARNATION.tags.fires_timers:
        return  # (most Spots have no timer: no clock read)
    due = timers.due(trio.current_time())
    if due and lease_passed(host.rt):
        # An owner past its lease deadline is no valid owner (09 §4): no tick runs,
        # as no message is admitted (a periodic timer comes due again).
        LOGGER.warning("Spot %r: %d timer tick(s) skipped: this node's lease deadline "
                       "passed before a renewal", host.spot_id, len(due),
                       extra=host.log_fields())
        return
    for tick in due:
        try:
            host.lanes.application.admit(tick, 0)
        except ZLinkError as exc:
            LOGGER.warning("Spot %r: timer tick skipped: %s", host.spot_id, exc,
                           extra=host.log_fields())

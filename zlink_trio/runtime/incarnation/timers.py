"""The timers of one Spot incarnation: schedule, callbacks and their ticks as turns.

Theory of operation
-------------------
``ctx.start_timer(delay, callback, period=...)`` registers a timer here; the sans-IO
:class:`~zlink_trio.core.timers.TimerSchedule` keeps the deadlines (periodic timers
never burst, at most 1,024 per Spot) and :class:`IncarnationTimers` keeps the async
callback of each registered timer.  The incarnation's task asks
:meth:`IncarnationTimers.next_deadline` how long it may sleep and, once awake,
:meth:`IncarnationTimers.due` for the ticks to queue: each tick is a :class:`TimerWork`
item admitted to the application lane, so a callback runs as an ordinary turn of the
Spot, one at a time with the handlers.

A fired one-shot timer's callback is dropped with it; a cancelled timer's callback is
dropped at once, so the callback table never outgrows the schedule.  A tick already
queued still runs after ``cancel`` (no further tick is queued).  Every timer is
cancelled when the incarnation closes, fails to activate or loses its owner
(:meth:`IncarnationTimers.cancel_all`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.timers import TimerSchedule
from zlink_trio.runtime.observe.logs import SPOTS as LOGGER

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.core.timers import TimerId

__all__ = ("NO_TIMERS", "IncarnationTimers", "TimerWork", "method_name")


@attrs.define(eq=False)
class TimerWork:
    """A timer tick: ``await callback()`` as a turn."""

    timer_id: TimerId
    callback: Callable[[], Awaitable[object]]

    async def run(self, spot_id: str) -> None:
        """Run the callback as a turn; an exception is logged, the Spot keeps running."""
        try:
            await self.callback()
        except Exception:
            LOGGER.exception("Spot %r: timer callback %r raised", spot_id, self.callback)


def method_name(instance: object, callback: object) -> str:
    """The name of ``callback`` as a method of ``instance``; InvalidOperation otherwise."""
    name = getattr(callback, "__name__", "")
    if getattr(callback, "__self__", None) is instance and getattr(
            instance, name, None) == callback:
        return name
    raise InvalidOperation(
        f"timer callback {callback!r} is not a method of the Spot instance, so it cannot "
        "move with a relocation; start timers with a method of the Spot "
        "(ctx.start_timer(5, self.tick))"
    )


#: The activation timers of an incarnation that registered none (shared: empty sets cost
#: ~220 B each).
_NO_TIMERS: Final[frozenset[TimerId]] = frozenset()


class IncarnationTimers:
    """One incarnation's registered timers and their callbacks (no I/O, no clock).

    The schedule and the callbacks are built by the first :meth:`add`: most Spots
    never start a timer, and an idle Spot should not pay for an empty schedule
    (docs/performance.md, "Where an idle Spot's bytes go"). Once built, the schedule
    stays, so a :class:`TimerId` is never issued twice by one incarnation.
    """

    __slots__ = ("_activation", "_callbacks", "_schedule")

    def __init__(self) -> None:
        self._schedule: TimerSchedule | None = None
        self._callbacks: dict[TimerId, Callable[[], Awaitable[object]]] | None = None
        #: Timers registered by the factory or ``on_activate``: they register again
        #: wherever the Spot activates, so a relocation does not move them.
        self._activation: frozenset[TimerId] = _NO_TIMERS

    def __contains__(self, timer_id: object) -> bool:
        return self._schedule is not None and timer_id in self._schedule

    def __len__(self) -> int:
        return len(self._schedule) if self._schedule is not None else 0

    def add(self, delay: float, callback: Callable[[], Awaitable[object]], *,
            period: float | None, now: float) -> TimerId:
        """Register ``callback`` to tick after ``delay`` (then every ``period``)."""
        if self._schedule is None:
            self._schedule = TimerSchedule()
        if self._callbacks is None:
            self._callbacks = {}
        timer_id = self._schedule.add(delay, now=now, period=period)
        self._callbacks[timer_id] = callback
        return timer_id

    def cancel(self, timer_id: TimerId) -> bool:
        """Unregister a timer; ``True`` if it was registered."""
        if self._schedule is None or self._callbacks is None:
            return False
        self._callbacks.pop(timer_id, None)
        return self._schedule.cancel(timer_id)

    def cancel_all(self) -> None:
        """Unregister every timer (close, failed activation, lost ownership)."""
        if self._schedule is not None:
            self._schedule.cancel_all()
        self._callbacks = None

    def next_deadline(self) -> float | None:
        """When the next timer comes due, or ``None`` without timers."""
        return self._schedule.next_deadline() if self._schedule is not None else None

    def mark_activation(self) -> None:
        """The instance is built: the timers registered so far are its activation's."""
        if self._callbacks:
            self._activation = frozenset(self._callbacks)

    def movable(self, instance: object, now: float) -> list[tuple[str, float, float | None]]:
        """The timers a relocation moves: ``(method name, seconds until due, period)``.

        Every timer registered after activation, in due order. Raises
        :class:`InvalidOperation` for one whose callback is not a method of
        ``instance`` (only a method can be found again on the target's instance).
        """
        moved: list[tuple[str, float, float | None]] = []
        if self._schedule is None or self._callbacks is None:
            return moved
        for info in self._schedule.timers():
            if info.timer_id in self._activation:
                continue
            callback = self._callbacks[info.timer_id]
            moved.append((method_name(instance, callback), max(0.0, info.deadline - now),
                          info.period))
        return moved

    def restore(self, instance: object, timers: list[tuple[str, float, float | None]],
                now: float) -> None:
        """Register moved timers again, on ``instance``'s methods of the same names."""
        for name, due_in, period in timers:
            self.add(due_in, getattr(instance, name), period=period, now=now)

    def due(self, now: float) -> list[TimerWork]:
        """The ticks due at ``now``, in due order; fired one-shots forget their callback."""
        ticks: list[TimerWork] = []
        schedule, callbacks = self._schedule, self._callbacks
        if schedule is None or callbacks is None:
            return ticks
        for timer_id in schedule.due(now):
            callback = (callbacks.get(timer_id) if timer_id in schedule
                        else callbacks.pop(timer_id, None))
            if callback is not None:
                ticks.append(TimerWork(timer_id, callback))
        return ticks


class _NoTimers(IncarnationTimers):
    """:data:`NO_TIMERS`: what every read sees of an incarnation that never registered
    a timer. Shared, so it must never hold one: :meth:`add` refuses."""

    __slots__ = ()

    def add(self, delay: float, callback: Callable[[], Awaitable[object]], *,
            period: float | None, now: float) -> TimerId:
        raise RuntimeError("NO_TIMERS is shared and holds no timer: add through "
                           "Incarnation.own_timers()")


#: The timers of every incarnation that has none yet (``Incarnation.timers``): most
#: Spots never start one, and 100,000 idle Spots should not each hold an empty table.
NO_TIMERS: Final[IncarnationTimers] = _NoTimers()

"""The timer schedule of one Spot incarnation, sans-IO.

Theory of operation
-------------------
A Spot registers one-shot and periodic timers; the runtime turns each timer
that comes due into a tick on the Spot's execution lane. This module only
keeps the schedule: it never reads a clock and never sleeps. The runtime
asks :meth:`TimerSchedule.next_deadline`, sleeps until then
(``trio.sleep_until``), and calls :meth:`TimerSchedule.due` with the current
time, which returns the timers to fire, in due order.

Ordering. Timers fire in deadline order; equal deadlines fire in the order
the timers were added (their :class:`TimerId` order), so the result is
deterministic.

Periodic timers never burst. A periodic timer that comes due is fired once
and rescheduled to the first point of its grid (``deadline + k * period``)
that is strictly after ``now``. If the runtime was late by several periods —
a long handler turn, a paused process — the missed ticks are *skipped*, not
delivered back to back: a Spot that fell behind should not be punished with
a burst of work that only makes it fall further behind. The grid keeps its
phase (no drift from late wake-ups), and :class:`TimerStatistics` counts the
skipped ticks so the loss is observable.

Bounds. At most ``max_timers`` (default 1,024) timers are registered at
once; :meth:`TimerSchedule.add` beyond that raises :class:`CapacityExceeded`.
A one-shot timer stops counting once it has fired or been cancelled.

Implementation. A binary heap of ``(deadline, timer id, version)`` with lazy
deletion: cancelling drops the timer from the live table, and stale heap
entries are discarded when they reach the top (and compacted away when they
outnumber the live ones), so every operation is O(log n) amortised.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

import heapq
import math
from typing import Final

import attrs

from zlink_trio.core.errors import CapacityExceeded, InvalidConfiguration, InvalidOperation

__all__ = (
    "DEFAULT_MAX_TIMERS",
    "TimerId",
    "TimerInfo",
    "TimerSchedule",
    "TimerStatistics",
)

#: Default bound on the timers one Spot may have registered at once.
DEFAULT_MAX_TIMERS: Final = 1024


@attrs.frozen(order=True)
class TimerId:
    """Names one timer of one :class:`TimerSchedule`; never reused by that schedule."""

    value: int


@attrs.frozen(kw_only=True)
class TimerInfo:
    """A registered timer: when it fires next and, if periodic, its period."""

    timer_id: TimerId
    deadline: float
    period: float | None


@attrs.frozen(kw_only=True)
class TimerStatistics:
    """A snapshot of one schedule."""

    #: Timers registered now (one-shot not yet fired, plus periodic).
    active: int
    #: How many of ``active`` are periodic.
    periodic: int
    #: The bound on ``active``.
    max_timers: int
    #: The earliest deadline, or ``None`` with no timers.
    next_deadline: float | None
    #: Ticks fired by :meth:`TimerSchedule.due` since the schedule was made.
    fired: int
    #: Periodic ticks skipped because the runtime was late by more than a period.
    skipped: int


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidOperation(f"{what} must be a finite number of seconds, got {value!r}")
    return float(value)


def _period(period: object) -> float | None:
    if period is None:
        return None
    value = _number(period, "period")
    if value <= 0:
        raise InvalidOperation(
            f"period must be > 0 seconds, got {period!r}; pass period=None for a one-shot timer"
        )
    return value


@attrs.define
class _Live:
    deadline: float
    period: float | None
    version: int


class TimerSchedule:
    """The one-shot and periodic timers of one Spot.

    Not thread-safe; the runtime drives it from the Spot's task. Raises
    :class:`InvalidConfiguration` if ``max_timers`` is not a positive int.
    """

    __slots__ = ("_fired", "_heap", "_live", "_max_timers", "_next_id", "_skipped")

    def __init__(self, *, max_timers: int = DEFAULT_MAX_TIMERS) -> None:
        if type(max_timers) is not int or max_timers <= 0:
            raise InvalidConfiguration(
                f"max_timers must be a positive int, got {max_timers!r}; a Spot's timers "
                "are always bounded"
            )
        self._max_timers: Final = max_timers
        self._live: dict[int, _Live] = {}
        self._heap: list[tuple[float, int, int]] = []
        self._next_id = 1
        self._fired = 0
        self._skipped = 0

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, timer_id: object) -> bool:
        return isinstance(timer_id, TimerId) and timer_id.value in self._live

    def add(self, delay: float, *, now: float, period: float | None = None) -> TimerId:
        """Register a timer firing ``delay`` seconds after ``now``, then every ``period``.

        ``delay`` is finite and >= 0 (0 fires at the next :meth:`due`);
        ``period`` is ``None`` (one-shot) or finite and > 0. Raises
        :class:`InvalidOperation` for bad numbers and :class:`CapacityExceeded`
        when ``max_timers`` timers are already registered; nothing changes then.
        """
        start = _number(now, "now")
        wait = _number(delay, "delay")
        if wait < 0:
            raise InvalidOperation(f"delay must be >= 0 seconds, got {delay!r}")
        return self._register(start + wait, _period(period))

    def add_at(self, deadline: float, *, period: float | None = None) -> TimerId:
        """Register a timer firing at the absolute time ``deadline``, then every ``period``.

        A deadline in the past fires at the next :meth:`due`. Raises like :meth:`add`.
        """
        return self._register(_number(deadline, "deadline"), _period(period))

    def _register(self, deadline: float, period: float | None) -> TimerId:
        if len(self._live) >= self._max_timers:
            raise CapacityExceeded(
                f"this Spot already has {len(self._live)} timers registered, its bound of "
                f"{self._max_timers}; cancel timers it no longer needs, or use one periodic "
                "timer for many purposes"
            )
        timer_id = self._next_id
        self._next_id += 1
        self._live[timer_id] = _Live(deadline, period, 0)
        heapq.heappush(self._heap, (deadline, timer_id, 0))
        return TimerId(timer_id)

    def cancel(self, timer_id: TimerId) -> bool:
        """Unregister ``timer_id``; ``True`` if it was registered, ``False`` otherwise.

        Idempotent: cancelling a fired one-shot, an unknown or an already
        cancelled timer returns ``False`` and changes nothing. Never raises.
        """
        if not isinstance(timer_id, TimerId) or self._live.pop(timer_id.value, None) is None:
            return False
        self._compact()
        return True

    def cancel_all(self) -> int:
        """Unregister every timer (close, relocation); returns how many there were."""
        count = len(self._live)
        self._live.clear()
        self._heap.clear()
        return count

    def _compact(self) -> None:
        # Lazy deletion leaves stale heap entries; rebuild when they dominate.
        if len(self._heap) > 2 * len(self._live) + 16:
            self._heap = [
                (entry.deadline, timer_id, entry.version)
                for timer_id, entry in self._live.items()
            ]
            heapq.heapify(self._heap)

    def _top(self) -> tuple[float, int, int] | None:
        heap = self._heap
        while heap:
            _, timer_id, version = heap[0]
            entry = self._live.get(timer_id)
            if entry is not None and entry.version == version:
                return heap[0]
            heapq.heappop(heap)
        return None

    def next_deadline(self) -> float | None:
        """The earliest deadline of a registered timer, or ``None`` with no timers."""
        top = self._top()
        return None if top is None else top[0]

    def due(self, now: float) -> list[TimerId]:
        """Fire every timer whose deadline is <= ``now``; return them in due order.

        One-shot timers are unregistered. Each periodic timer appears at most
        once and moves to the first ``deadline + k * period`` after ``now``
        (missed ticks are skipped and counted, never bursted). Raises
        :class:`InvalidOperation` if ``now`` is not a finite number.
        """
        current = _number(now, "now")
        fired: list[TimerId] = []
        rescheduled: list[tuple[float, int, int]] = []
        while (top := self._top()) is not None and top[0] <= current:
            heapq.heappop(self._heap)
            timer_id = top[1]
            entry = self._live[timer_id]
            fired.append(TimerId(timer_id))
            if entry.period is None:
                del self._live[timer_id]
                continue
            missed = math.floor((current - entry.deadline) / entry.period)
            following = entry.deadline + (missed + 1) * entry.period
            while following <= current:  # float rounding can land on or before now
                following += entry.period
                missed += 1
            self._skipped += missed
            entry.deadline = following
            entry.version += 1
            # Pushed after the loop so a timer fires at most once per call.
            rescheduled.append((following, timer_id, entry.version))
        for item in rescheduled:
            heapq.heappush(self._heap, item)
        self._fired += len(fired)
        return fired

    def timers(self) -> list[TimerInfo]:
        """Every registered timer in due order (for relocation payloads and diagnostics)."""
        entries = sorted((entry.deadline, timer_id) for timer_id, entry in self._live.items())
        return [
            TimerInfo(
                timer_id=TimerId(timer_id),
                deadline=deadline,
                period=self._live[timer_id].period,
            )
            for deadline, timer_id in entries
        ]

    def statistics(self) -> TimerStatistics:
        """Return a frozen snapshot of the schedule. Never raises."""
        return TimerStatistics(
            active=len(self._live),
            periodic=sum(1 for entry in self._live.values() if entry.period is not None),
            max_timers=self._max_timers,
            next_deadline=self.next_deadline(),
            fired=self._fired,
            skipped=self._skipped,
        )

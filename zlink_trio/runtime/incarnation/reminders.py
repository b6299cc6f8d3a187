"""A Spot's durable reminders as its code sees them: ``ctx.remind`` (docs/reminders.md).

Theory of operation
-------------------
A Spot type with a handler for :class:`Reminder` sets reminders in the store
(``store.reminder_steps``) with its incarnation's fence (:class:`~.owner_writes.OwnerWrites`,
the same rule as ``ctx.state``): only while this incarnation owns the Spot with a live
lease and serves it, else :class:`StaleFence` / :class:`Unavailable` and nothing written.
A reminder outlives the incarnation that set it -- idle eviction, a crash and restart, a
move -- until it is cancelled, its one due was delivered, or its User Spot closed. The
nodes of the Mesh deliver it when due (``coordinators.reminders``).

Times: ``at`` is a time on the store's clock (``ctx.now()``: wall-clock seconds for a
store shared between processes; an aware ``datetime`` is converted), ``after`` and
``every`` are durations (seconds or a ``timedelta``).
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import TYPE_CHECKING

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.runtime.declaration.reminder_message import Reminder

if TYPE_CHECKING:
    from zlink_trio.runtime.declaration.spot_types import SpotType
    from zlink_trio.runtime.incarnation.owner_writes import OwnerWrites
    from zlink_trio.store.values import StoredReminder

__all__ = ("as_reminder", "cancel_reminder", "remind", "reminders_of")


def as_reminder(stored: StoredReminder) -> Reminder:
    """The public face of a stored reminder (its next due)."""
    return Reminder(name=stored.name, due=stored.due, period=stored.period)


def _seconds(value: object, what: str) -> float:
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise InvalidOperation(f"{what} takes seconds (a finite number) or a timedelta, "
                           f"got {value!r}")


def _writes(writes: OwnerWrites | None, spot_type: SpotType) -> OwnerWrites:
    if writes is None or not spot_type.reminders:
        raise InvalidOperation(
            f"{spot_type.stable_type!r} has no handler for zl.Reminder, so nothing could "
            "deliver its reminders; add one (@zl.handler async def ...(self, msg: "
            "zl.Reminder)) to set reminders (docs/reminders.md)")
    return writes


def _due(now: float, at: object, after: object, every: float | None) -> float:
    if at is not None and after is not None:
        raise InvalidOperation("a reminder is due at= a time or after= a delay, not both")
    if at is not None:
        if isinstance(at, _dt.datetime):
            if at.tzinfo is None:
                raise InvalidOperation(f"at= takes an aware datetime (with a tzinfo), got "
                                       f"{at!r}; naive times are ambiguous")
            return at.timestamp()
        return _seconds(at, "at=")
    if after is not None:
        delay = _seconds(after, "after=")
        if delay < 0:
            raise InvalidOperation(f"after= takes a delay of 0 s or more, got {delay}")
        return now + delay
    if every is None:
        raise InvalidOperation("a reminder needs at=, after= or every= (or several: "
                               "every= with at= or after= sets its first due)")
    return now + every


async def remind(writes: OwnerWrites | None, spot_type: SpotType, name: str, *,
                 at: object = None, after: object = None, every: object = None) -> Reminder:
    """``ctx.remind``: set (or replace) the reminder ``name``; see ``SpotContext.remind``."""
    fence_of = _writes(writes, spot_type)
    rt = fence_of.rt
    period = None if every is None else _seconds(every, "every=")
    now = rt.now()
    due = _due(now, at, after, period)
    stored = await rt.store.location.set_reminder(await fence_of.fence("its reminder"),
                                                  name, due=due, period=period, now=now)
    return as_reminder(stored)


async def cancel_reminder(writes: OwnerWrites | None, spot_type: SpotType,
                          name: str) -> bool:
    """``ctx.cancel_reminder``: whether there was a reminder ``name`` to cancel."""
    fence_of = _writes(writes, spot_type)
    rt = fence_of.rt
    return await rt.store.location.cancel_reminder(
        await fence_of.fence("the cancel of its reminder"), name, now=rt.now())


async def reminders_of(writes: OwnerWrites | None, spot_type: SpotType) -> list[Reminder]:
    """``ctx.reminders``: the Spot's reminders by name, each with its next due."""
    inc = _writes(writes, spot_type)
    return [as_reminder(r) for r in await inc.rt.store.location.reminders(inc.spot_id)]

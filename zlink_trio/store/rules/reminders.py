"""Durable reminders as pure transactions (the oracle of ``store.reminder_steps``).

Theory of operation
-------------------
:attr:`LocationState.reminders` maps a Spot ID to its reminders, a tuple of
:class:`StoredReminder` sorted by name (replaced whole by each write, so a backend that
keeps rows per Spot sees one change). A set or a cancel checks the writer's fence as a
state write does (``rules.state.owning_record``) before anything is written. A take
checks the taker's own live claim, then takes each candidate that is due and not held;
a done acts only on the reminder exactly as it was taken. The order of every scan is
:func:`scan_order`: by wake, then Spot ID, then name.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs

from zlink_trio.core._checks import check_finite, check_text
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import SpotKind, validate_spot_id
from zlink_trio.core.placement import REMINDER_PARTITIONS, reminder_partition
from zlink_trio.core.records import AuthorityFence, OwnerFence
from zlink_trio.store.rules.location import check_owner
from zlink_trio.store.rules.state import WRITING, owning_record
from zlink_trio.store.values import (
    MAX_REMINDER_NAME,
    MAX_REMINDERS_PER_SPOT,
    MIN_REMINDER_PERIOD,
    StoredReminder,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.store.rules.location import LocationState

__all__ = ("MAX_TAKE", "check_cancel_args", "check_done_args", "check_reminder_name",
           "check_set_args", "check_take_args", "next_due", "not_for_kind", "scan_order",
           "too_many", "txn_cancel_reminder", "txn_drop_reminders", "txn_reminder_done",
           "txn_reminders", "txn_set_reminder", "txn_take_due_reminders")

#: Most reminders one take returns.
MAX_TAKE = 1000


def scan_order(reminder: StoredReminder) -> tuple[float, str, str]:
    """The order scans take reminders in (every backend)."""
    return (reminder.wake, reminder.spot_id, reminder.name)


def check_reminder_name(name: object) -> str:
    """A reminder name: 1..``MAX_REMINDER_NAME`` UTF-8 bytes, no NUL."""
    text = check_text(name, "a reminder name", MAX_REMINDER_NAME)
    if "\x00" in text:
        raise InvalidOperation(f"a reminder name holds no NUL character, got {text!r}")
    return text


def check_set_args(fence: object, name: object, due: object, period: object,
                   now: object) -> None:
    """The argument checks of ``set_reminder`` (every backend)."""
    if not isinstance(fence, AuthorityFence):
        raise InvalidOperation(f"a reminder is set with the writer's AuthorityFence, got "
                               f"{type(fence).__name__}")
    check_reminder_name(name)
    check_finite(due, "due")
    check_finite(now, "now")
    if period is not None:
        check_finite(period, "period")
        assert isinstance(period, (int, float))
        if period < MIN_REMINDER_PERIOD:
            raise InvalidOperation(
                f"a repeating reminder's period is at least {MIN_REMINDER_PERIOD} s, got "
                f"{period!r}; for a shorter wake use a timer (ctx.start_timer)")


def check_cancel_args(fence: object, name: object, now: object) -> None:
    """The argument checks of ``cancel_reminder`` (every backend)."""
    if not isinstance(fence, AuthorityFence):
        raise InvalidOperation(f"a reminder is cancelled with the writer's AuthorityFence, "
                               f"got {type(fence).__name__}")
    check_reminder_name(name)
    check_finite(now, "now")


def check_done_args(taken: object, now: object) -> None:
    """The argument checks of ``reminder_done`` (every backend)."""
    if not isinstance(taken, StoredReminder) or taken.taker is None:
        raise InvalidOperation("reminder_done takes a reminder as take_due_reminders "
                               "returned it")
    check_finite(now, "now")


def check_take_args(mesh: object, partitions: object, taker: object, now: object,
                    hold: object, limit: object) -> tuple[int, ...]:
    """The argument checks of ``take_due_reminders`` (every backend): the partitions,
    sorted, without repeats."""
    check_text(mesh, "mesh")
    if not isinstance(taker, OwnerFence):
        raise InvalidOperation(f"reminders are taken by a lifecycle's OwnerFence, got "
                               f"{type(taker).__name__}")
    check_finite(now, "now")
    check_finite(hold, "hold")
    assert isinstance(hold, (int, float))
    if hold <= 0:
        raise InvalidOperation(f"a take holds its reminders for a positive time, got {hold!r}")
    if type(limit) is not int or not 1 <= limit <= MAX_TAKE:
        raise InvalidOperation(f"limit must be an int in 1..{MAX_TAKE}, got {limit!r}")
    if not isinstance(partitions, (list, tuple, frozenset, set)) or not all(
            type(p) is int and 0 <= p < REMINDER_PARTITIONS for p in partitions):
        raise InvalidOperation(f"partitions must be ints in 0..{REMINDER_PARTITIONS - 1}, "
                               f"got {partitions!r}")
    return tuple(sorted(set(partitions)))


def not_for_kind(record: AuthorityRecord) -> InvalidOperation:
    """The refusal of a reminder for a Spot of another kind than User or Instance (every
    backend)."""
    return InvalidOperation(
        f"{record.spot_id!r} is of kind {record.kind.name.title()}: reminders are for "
        "User and Instance Spots; an Actor's container sets them (docs/reminders.md)")


def too_many(spot_id: str, kept: int) -> InvalidOperation:
    """The refusal of one reminder more than ``MAX_REMINDERS_PER_SPOT`` (every backend)."""
    return InvalidOperation(f"{spot_id!r} keeps {kept} reminders, the most a Spot may keep; "
                            "cancel one before setting another, or reuse a name")


def next_due(due: float, period: float, now: float) -> float:
    """The first due of a repeating reminder after ``now``: dues it missed (its node was
    down, or delivery took long) fold into the one delivered (every backend)."""
    if now < due:
        return due + period
    nxt = due + (math.floor((now - due) / period) + 1) * period
    while nxt <= now:  # rounding
        nxt += period
    return nxt


def _put(state: LocationState, spot_id: str, keep: Iterable[StoredReminder]) -> None:
    ordered = tuple(sorted(keep, key=lambda r: r.name))
    if ordered:
        state.reminders[spot_id] = ordered
    else:
        state.reminders.pop(spot_id, None)


def txn_set_reminder(state: LocationState, fence: AuthorityFence, name: str, *,
                     due: float, period: float | None, now: float) -> StoredReminder:
    """SetReminder; see ``ReminderSteps.set_reminder``."""
    check_set_args(fence, name, due, period, now)
    record = owning_record(state, fence, now, WRITING)
    if record.kind not in (SpotKind.USER, SpotKind.INSTANCE):
        raise not_for_kind(record)
    kept = state.reminders.get(record.spot_id, ())
    old = next((r for r in kept if r.name == name), None)
    if old is None and len(kept) >= MAX_REMINDERS_PER_SPOT:
        raise too_many(record.spot_id, len(kept))
    reminder = StoredReminder(
        spot_id=record.spot_id, name=name, mesh=record.mesh, kind=record.kind,
        stable_type=record.stable_type, due=float(due),
        period=None if period is None else float(period),
        version=1 if old is None else old.version + 1)
    _put(state, record.spot_id, [*(r for r in kept if r.name != name), reminder])
    return reminder


def txn_cancel_reminder(state: LocationState, fence: AuthorityFence, name: str, *,
                        now: float) -> bool:
    """CancelReminder; see ``ReminderSteps.cancel_reminder``."""
    check_cancel_args(fence, name, now)
    record = owning_record(state, fence, now, WRITING)
    kept = state.reminders.get(record.spot_id, ())
    if all(r.name != name for r in kept):
        return False
    _put(state, record.spot_id, [r for r in kept if r.name != name])
    return True


def txn_reminders(state: LocationState, spot_id: str) -> tuple[StoredReminder, ...]:
    """Reminders; see ``ReminderSteps.reminders``."""
    validate_spot_id(spot_id)
    return state.reminders.get(spot_id, ())


def txn_take_due_reminders(
        state: LocationState, mesh: str, partitions: Sequence[int], taker: OwnerFence, *,
        now: float, hold: float, limit: int,
        candidates: Callable[[tuple[int, ...]], Iterable[tuple[str, str]]] | None = None,
) -> list[StoredReminder]:
    """TakeDueReminders; see ``ReminderSteps.take_due_reminders``.

    After the checks, ``candidates(partitions)`` names the reminders to look at,
    ``(spot_id, name)`` keys in :func:`scan_order`: a backend's index of the due
    reminders of those partitions, read only once the taker was found live. Each is taken
    only if it is current, of ``mesh`` and ``partitions``, and due and not held at
    ``now``; without ``candidates`` every reminder is looked at (the plain oracle).
    """
    wanted = check_take_args(mesh, partitions, taker, now, hold, limit)
    check_owner(state, mesh, taker, now)
    if candidates is None:
        keys: Iterable[tuple[str, str]] = [
            (r.spot_id, r.name) for r in sorted(
                (r for kept in state.reminders.values() for r in kept), key=scan_order)]
    else:
        keys = candidates(wanted)
    taken: list[StoredReminder] = []
    for spot_id, name in keys:
        if len(taken) >= limit:
            break
        kept = state.reminders.get(spot_id, ())
        current = next((r for r in kept if r.name == name), None)
        if (current is None or current.mesh != mesh or current.wake > now
                or reminder_partition(current.spot_id) not in wanted):
            continue
        took = attrs.evolve(current, taker=taker, taken_until=now + hold)
        _put(state, current.spot_id, [*(r for r in kept if r.name != current.name), took])
        taken.append(took)
    return taken


def txn_reminder_done(state: LocationState, taken: StoredReminder, *, now: float) -> bool:
    """ReminderDone; see ``ReminderSteps.reminder_done``."""
    check_done_args(taken, now)
    kept = state.reminders.get(taken.spot_id, ())
    current = next((r for r in kept if r.name == taken.name), None)
    if (current is None or current.version != taken.version or current.due != taken.due
            or current.taker != taken.taker or current.taken_until != taken.taken_until):
        # Set again, cancelled, or taken since (by another, or by the same node again:
        # each take holds until its own time): not this take's.
        return False
    rest = [r for r in kept if r.name != taken.name]
    if current.period is not None:
        rest.append(attrs.evolve(current, due=next_due(current.due, current.period, now),
                                 taker=None, taken_until=0.0))
    _put(state, taken.spot_id, rest)
    return True


def txn_drop_reminders(state: LocationState, spot_id: str) -> int:
    """DropReminders; see ``ReminderSteps.drop_reminders``."""
    validate_spot_id(spot_id)
    kept = state.reminders.get(spot_id, ())
    if spot_id in state.records or not kept or any(r.kind is not SpotKind.USER
                                                   for r in kept):
        return 0
    del state.reminders[spot_id]
    return len(kept)

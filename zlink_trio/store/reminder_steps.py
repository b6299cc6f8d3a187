"""The durable-reminder part of the Location Store protocol: wake-ups a Spot sets, kept
beside its authority, taken by the nodes that deliver them.

Theory of operation
-------------------
A Spot (User or Instance) sets a **reminder**, a name with a due time on the store's
clock and an optional period, with ``set_reminder``; the store keeps it under the Spot
ID until ``cancel_reminder``, its last delivery (one that does not repeat), or the close
of a User Spot (``release`` deletes them in the same transaction). Set and cancel are
fenced exactly like a state write (``store.state_steps``): only the Spot's current owner,
serving, with a live lease, writes; a zombie's set or cancel changes nothing and raises.

**Delivery is by take.** Every reminder is in one of ``REMINDER_PARTITIONS`` partitions
by Spot ID (``core.placement.reminder_partition``); a node scans the partitions it wins
(``core.placement.reminder_partitions``) with ``take_due_reminders``, which, in one
transaction, checks the taker's own claim is live and marks up to ``limit`` due reminders
of those partitions as **taken** by it until ``now + hold``. A taken reminder is not due
again to anyone until the take runs out, so two nodes that disagree for a moment about
who scans a partition never deliver the same due twice at once. The taker delivers it
(a message to the Spot: docs/reminders.md) and then calls ``reminder_done``, which acts
only on the reminder exactly as taken (same version, due and taker): a one-shot reminder
is deleted, a repeating one gets its next due after ``now`` and is free again. A taker
that crashed or failed never calls it; the take runs out and the reminder is due again:
**at least once**.

Each scan reads only due reminders of its partitions, in the order of
``rules.reminders.scan_order``, at most ``limit`` per take: the cost of a scan is bounded
by what it takes, not by how many reminders the store keeps.

The oracle is ``store.rules.reminders``; every backend passes
``tests/store/test_reminder_conformance.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from zlink_trio.core.records import AuthorityFence, OwnerFence
    from zlink_trio.store.values import StoredReminder

__all__ = ("ReminderSteps",)


class ReminderSteps(Protocol):
    """A Spot's durable reminders and their delivery by take (module docstring)."""

    async def set_reminder(self, fence: AuthorityFence, name: str, *, due: float,
                           period: float | None, now: float) -> StoredReminder:
        """Set (or replace) the reminder ``name`` of ``fence.spot_id``: due at ``due`` on
        the store's clock, then every ``period`` seconds (at least
        ``MIN_REMINDER_PERIOD``) unless ``period`` is ``None``. Fenced as
        ``StateSteps.save_state`` (:class:`StaleFence`, :class:`Unavailable`); a Spot keeps
        at most ``MAX_REMINDERS_PER_SPOT``, and an Actor none (:class:`InvalidOperation`).
        A replaced reminder's take, if any, ends with it. The reminder stored (its version
        one more than the one it replaced, else 1)."""
        ...

    async def cancel_reminder(self, fence: AuthorityFence, name: str, *,
                              now: float) -> bool:
        """Delete the reminder ``name`` of ``fence.spot_id`` under the checks of
        :meth:`set_reminder`; whether there was one."""
        ...

    async def reminders(self, spot_id: str) -> tuple[StoredReminder, ...]:
        """The reminders ``spot_id`` keeps, by name."""
        ...

    async def take_due_reminders(self, mesh: str, partitions: Sequence[int],
                                 taker: OwnerFence, *, now: float, hold: float,
                                 limit: int) -> list[StoredReminder]:
        """Take up to ``limit`` (at most ``MAX_TAKE``) reminders of ``mesh`` in
        ``partitions`` that are due at ``now`` and not held by a take (or whose take ran
        out), in ``scan_order``: each is marked taken by ``taker`` until ``now + hold``
        and returned as taken. Raises as ``check_owner`` does when ``taker`` has no live
        claim in ``mesh`` (:class:`StaleFence`, :class:`Unavailable`): nothing taken."""
        ...

    async def reminder_done(self, taken: StoredReminder, *, now: float) -> bool:
        """``taken`` (as :meth:`take_due_reminders` returned it) was delivered: delete it,
        or for a repeating reminder set its next due after ``now`` (``next_due``) and free
        it. Whether it acted: ``False`` when the reminder was set again, cancelled or
        taken by another since (then nothing changes)."""
        ...

    async def drop_reminders(self, spot_id: str) -> int:
        """Delete the reminders of a User Spot ``spot_id`` that no longer exists (no
        authority record); how many. A Spot with a record, or reminders of another kind,
        keeps them (0)."""
        ...

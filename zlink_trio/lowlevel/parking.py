"""``ParkingSlot``: one task parked until another task wakes it.

Theory of operation
-------------------
A ``trio.Event`` costs an object, a parking lot and a set of waiters; the hot paths
of this runtime (every request's reply, every store call's answer, a link's writer
between bursts) have exactly one waiter each, known in advance. A slot holds that
one task: :meth:`ParkingSlot.park` suspends the current task with
``trio.lowlevel.wait_task_rescheduled`` and :meth:`ParkingSlot.wake` reschedules it.
The slot is the only place in the code base that pairs those two calls, so the
rules of that pairing live here:

* A task is rescheduled exactly once: :meth:`wake` forgets the task before it
  reschedules it, and a cancelled wait forgets it too, so a late :meth:`wake` is a
  harmless ``False``.
* A cancel (a deadline, a nursery) ends the wait with ``trio.Cancelled``, unless the
  slot's :meth:`~ParkingSlot.on_cancel` (a subclass's) says the waker has already
  taken the task's work over (a group commit that already runs the parked
  transaction): then the wait goes on until :meth:`wake`, and the cancel is
  delivered at the task's next checkpoint.
* At most one task parks in a slot at a time (a second is a bug of the caller:
  ``RuntimeError``).
* :meth:`~ParkingSlot.park` is a plain method that returns Trio's own awaitable, so a
  parked task carries no frame of the slot's: an idle Spot's task parks in its
  incarnation with the smallest stack there is (100,000 idle Spots pay every frame).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable

__all__ = ("ParkingSlot",)


class ParkingSlot:
    """Where one task waits until another wakes it (see the module docstring)."""

    __slots__ = ("_task",)

    def __init__(self) -> None:
        self._task: trio.lowlevel.Task | None = None

    @property
    def occupied(self) -> bool:
        """Whether a task is parked here now."""
        return self._task is not None

    def park(self) -> Awaitable[object]:
        """What the current task awaits to wait here until :meth:`wake` (or a cancel,
        see above): ``await slot.park()``, by the task that calls it, at once (never
        ``nursery.start_soon(slot.park)``: the slot would hold the wrong task)."""
        if self._task is not None:
            raise RuntimeError("a ParkingSlot holds one parked task at a time")
        self._task = trio.lowlevel.current_task()
        # The slot is its own abort function (``__call__``): a bound method would be
        # one more object, tracked by the garbage collector, for every parked task.
        return trio.lowlevel.wait_task_rescheduled(self)  # noqa: ASYNC105 (see above)

    def wake(self) -> bool:
        """Reschedule the parked task; ``False`` (nothing happens) when none is parked."""
        task = self._task
        if task is None:
            return False
        self._task = None
        trio.lowlevel.reschedule(task)
        return True

    def on_cancel(self) -> bool:
        """Called once when the parked task is cancelled: whether its wait ends now.

        ``True`` here; a subclass returns ``False`` when the waker has taken the task's
        work over and will :meth:`wake` it (the cancel then reaches the task at its
        next checkpoint).
        """
        return True

    def __call__(self, _: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
        """Trio's abort function of the parked wait (see :meth:`park`): not for callers."""
        if not self.on_cancel():
            return trio.lowlevel.Abort.FAILED
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED

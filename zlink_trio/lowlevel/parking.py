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
* A parked task holds nothing but the slot: :meth:`~ParkingSlot.park` returns the slot
  itself, an awaitable that hands Trio's run loop the message
  ``trio.lowlevel.wait_task_rescheduled`` would yield and, when the task is
  rescheduled, unwraps what Trio sends back, as that trap does. Trio reads the message's
  abort function (the slot: ``__call__``) and drops it, so an idle Spot's task keeps no
  coroutine, generator or message of the trap while it waits: four objects and ~630
  bytes less per idle Spot than awaiting the trap (docs/performance.md, issue #32). The
  message's class is taken once per process from one step of that public trap
  (:func:`_message_type`), not imported from Trio's private modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NoReturn, cast

import trio

if TYPE_CHECKING:
    from collections.abc import Callable, Generator

    import outcome

__all__ = ("ParkingSlot",)


def _never_aborted(_: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.FAILED


def _message_type() -> Callable[[Callable[[trio.lowlevel.RaiseCancelT],
                                          trio.lowlevel.Abort]], object]:
    """The class of the message ``trio.lowlevel.wait_task_rescheduled(abort)`` yields to
    Trio's run loop, built from its abort function: one step of that trap, then closed
    (it needs no running loop for that step)."""
    trap = trio.lowlevel.wait_task_rescheduled(_never_aborted)  # noqa: ASYNC105 (see above)
    message = trap.send(None)
    trap.close()
    kind: Callable[[Callable[[trio.lowlevel.RaiseCancelT], trio.lowlevel.Abort]], object]
    kind = type(message)
    return kind


#: Trio's wait message: built with a slot as its abort function, once per park.
_WAIT: Final = _message_type()


class ParkingSlot:
    """Where one task waits until another wakes it (see the module docstring)."""

    __slots__ = ("_task",)

    def __init__(self) -> None:
        self._task: trio.lowlevel.Task | None = None

    @property
    def occupied(self) -> bool:
        """Whether a task is parked here now."""
        return self._task is not None

    def park(self) -> ParkingSlot:
        """What the current task awaits to wait here until :meth:`wake` (or a cancel,
        see above): ``await slot.park()``, by the task that calls it, at once (never
        ``nursery.start_soon(slot.park)``: the slot would hold the wrong task)."""
        if self._task is not None:
            raise RuntimeError("a ParkingSlot holds one parked task at a time")
        self._task = trio.lowlevel.current_task()
        return self

    # The awaitable protocol of ``await slot.park()`` (see the module docstring): the
    # awaiting coroutine delegates to the slot as to a sub-iterator.

    def __await__(self) -> Generator[object, Any, object]:
        # (the slot is the generator-like iterator the await delegates to: ``send``,
        # ``throw``, ``__next__``; not a subclass of Generator, hence the cast)
        return cast("Generator[object, Any, object]", self)

    def __next__(self) -> object:
        """The first step of the wait: the message Trio's run loop gets (its abort
        function is the slot itself, ``__call__``: no bound method per park)."""
        return _WAIT(self)

    def send(self, resumed: outcome.Outcome[object] | None) -> object:
        """Resume the wait: the first step (``None``), or Trio's outcome of it, which
        ends the wait with its value (``StopIteration``) or raises its error
        (``trio.Cancelled``) in the awaiting task."""
        if resumed is None:
            return self.__next__()
        raise StopIteration(resumed.unwrap())

    def throw(self, error: BaseException, *_: object) -> NoReturn:
        """An exception thrown into the waiting coroutine ends the wait with it."""
        raise error

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

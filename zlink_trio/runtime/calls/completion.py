"""A one-shot reply slot: completed exactly once, awaited under the caller's deadline.

A request's caller waits on its :class:`Completion`; the Spot's task completes it with
the reply or an error.  The first completion wins and later ones are ignored (and
reported as ``False``), so a request completes terminal-once even when a
deadline and a reply race.  The caller's wait is always bounded: it passes the
operation's deadline to :meth:`Completion.wait`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import trio

from zlink_trio.core.errors import DeadlineExceeded
from zlink_trio.lowlevel.parking import ParkingSlot

if TYPE_CHECKING:
    from zlink_trio.core.deadline import Deadline

__all__ = ("Completion", "DeadlineKeeper", "deadline_exceeded")


def deadline_exceeded(what: str) -> DeadlineExceeded:
    """The error a wait that reached its deadline ends with."""
    return DeadlineExceeded(
        f"{what} did not complete before its deadline; it may or may not have run. "
        "Use a longer .timeout() or check the Spot's state before retrying"
    )


class DeadlineKeeper(Protocol):
    """Keeps the deadlines of waiting completions (the node's ``calls.deadlines.Deadlines``)."""

    @property
    def running(self) -> bool:
        """Whether the keeper's task runs (else a wait bounds itself)."""
        ...

    def add(self, deadline: float, completion: Completion, what: str) -> None:
        """Fail ``completion`` with DeadlineExceeded at ``deadline`` unless answered first."""
        ...


class Completion(ParkingSlot):
    """One request's terminal result: a value or an exception, set once.

    At most one task waits (the caller): the completion is the caller's parking slot
    (``lowlevel.parking``), which is cheaper than a ``trio.Event`` per request.
    """

    __slots__ = ("_done", "_error", "_value")

    def __init__(self) -> None:
        super().__init__()
        self._done = False
        self._value: object = None
        self._error: BaseException | None = None

    @property
    def done(self) -> bool:
        """Whether a result was set."""
        return self._done

    def _finish(self) -> None:
        """Mark the result set and wake the caller (a subclass sends it on too)."""
        self._done = True
        self.wake()

    def set_result(self, value: object) -> bool:
        """Complete with ``value``; ``False`` (nothing changes) if already completed."""
        if self._done:
            return False
        self._value = value
        self._finish()
        return True

    def set_error(self, error: BaseException) -> bool:
        """Complete with ``error``; ``False`` (nothing changes) if already completed."""
        if self._done:
            return False
        self._error = error
        self._finish()
        return True

    async def wait(self, deadline: Deadline, what: str,
                   deadlines: DeadlineKeeper | None = None) -> object:
        """Return the value (or raise the error) once set; DeadlineExceeded at ``deadline``.

        A deadline that passes first completes the slot with the DeadlineExceeded it
        raises, so a late reply is dropped rather than delivered twice. Only one task
        may wait. With the node's running ``deadlines`` the
        deadline is kept there (no cancel scope per wait, see ``calls.deadlines``);
        otherwise a scope bounds it.
        """
        if self.occupied:
            raise RuntimeError("a Completion is awaited by one task only")
        if self._done:
            await trio.lowlevel.checkpoint()
        elif deadlines is not None and deadlines.running:
            deadlines.add(deadline.at, self, what)
            await self.park()
        else:
            with trio.move_on_at(deadline.at):
                await self.park()
            if not self._done:
                self.set_error(deadline_exceeded(what))
        if self._error is not None:
            raise self._error
        return self._value

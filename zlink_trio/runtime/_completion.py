"""A one-shot reply slot: completed exactly once, awaited under the caller's deadline.

A request's caller waits on its :class:`Completion`; the Spot's task completes it with
the reply or an error.  The first completion wins and later ones are ignored (and
reported as ``False``), so a request completes terminal-once (06 §5) even when a
deadline and a reply race.  The caller's wait is always bounded: it passes the
operation's deadline to :meth:`Completion.wait`.
"""

from __future__ import annotations

import trio

from zlink_trio.core.errors import DeadlineExceeded

__all__ = ("Completion",)


class Completion:
    """One request's terminal result: a value or an exception, set once."""

    __slots__ = ("_done", "_error", "_value")

    def __init__(self) -> None:
        self._done = trio.Event()
        self._value: object = None
        self._error: BaseException | None = None

    @property
    def done(self) -> bool:
        """Whether a result was set."""
        return self._done.is_set()

    def set_result(self, value: object) -> bool:
        """Complete with ``value``; ``False`` (nothing changes) if already completed."""
        if self._done.is_set():
            return False
        self._value = value
        self._done.set()
        return True

    def set_error(self, error: BaseException) -> bool:
        """Complete with ``error``; ``False`` (nothing changes) if already completed."""
        if self._done.is_set():
            return False
        self._error = error
        self._done.set()
        return True

    async def wait(self, deadline: float, what: str) -> object:
        """Return the value (or raise the error) once set; DeadlineExceeded at ``deadline``.

        A deadline that passes first completes the slot with the DeadlineExceeded it
        raises, so a late reply is dropped rather than delivered twice.
        """
        with trio.move_on_at(deadline):
            await self._done.wait()
        if not self._done.is_set():
            self.set_error(DeadlineExceeded(
                f"{what} did not complete before its deadline; it may or may not have run. "
                "Use a longer .timeout() or check the Spot's state before retrying"
            ))
        if self._error is not None:
            raise self._error
        return self._value

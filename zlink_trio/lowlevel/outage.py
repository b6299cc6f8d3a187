"""``Outage``: one WARNING when something this process reaches goes down, one INFO when
it is back, and a bounded count of the failures in between.

Theory of operation
-------------------
A peer's link or a store can fail every call made while it is unreachable; a line
per failed call buries the one fact an operator needs (X is down since T, and now it
is back) under hundreds of copies. An :class:`Outage` belongs to one thing -- the link
to one peer, one store's connection, one node's lease renewal -- and turns its
failures into *episodes*:

* the first failure (:meth:`Outage.failed`) opens an episode: one WARNING naming the
  thing and the reason;
* later failures are counted; at most once every ``interval`` seconds (30 by default)
  a failure that finds the count non-empty writes one WARNING saying how many more
  failed since the last line and the latest reason -- never one line per failure;
* the first success after that (:meth:`Outage.recovered`) closes the episode: one INFO
  saying how long it lasted and how many failures it saw. A success outside an
  episode writes nothing and costs one attribute test (:attr:`Outage.down`), so a hot
  path may call it on every success.

No task runs in the background: the count line is written by the failure that is due
to write it, so an episode with no further failures writes no further lines. Time is
read from ``clock`` -- Trio's clock by default, which makes
``trio.testing.MockClock`` move episodes exactly as it moves deadlines; pass
another clock to use one outside a Trio run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

if TYPE_CHECKING:
    import logging
    from collections.abc import Callable

__all__ = ("REPORT_INTERVAL", "Outage")

#: Seconds between two count lines of one episode, at most one per interval.
REPORT_INTERVAL: Final = 30.0


class Outage:
    """The outage episodes of one thing this process reaches; see the module docstring.

    ``what`` names the thing as the subject of a sentence ("the link to node 'b'",
    "the Redis store at redis://host:6379/0"); ``counted`` names what is counted
    ("failed calls", "failed renewal attempts").
    """

    __slots__ = ("_clock", "_counted", "_interval", "_last_line", "_logger", "_since",
                 "_total", "_unreported", "_what", "down")

    def __init__(self, logger: logging.Logger, what: str, *, counted: str = "failed calls",
                 interval: float = REPORT_INTERVAL,
                 clock: Callable[[], float] = trio.current_time) -> None:
        self._logger = logger
        self._what = what
        self._counted = counted
        self._interval = interval
        self._clock = clock
        #: Whether an episode is open (its first failure came, no success since).
        self.down = False
        self._since = 0.0  # when the episode began
        self._last_line = 0.0  # when its last line was written
        self._total = 0  # failures counted in the episode
        self._unreported = 0  # ... since its last line

    def failed(self, reason: str, count: int = 1) -> None:
        """``count`` calls (or attempts) just failed for ``reason``."""
        now = self._clock()
        if not self.down:
            self.down = True
            self._since = self._last_line = now
            self._total, self._unreported = count, 0
            self._logger.warning(
                "%s is unavailable: %s; further failures are counted here, at most one "
                "line every %g s, until it works again", self._what, reason, self._interval)
            return
        self._total += count
        self._unreported += count
        if self._unreported and now - self._last_line >= self._interval:
            self._logger.warning(
                "%s is still unavailable after %.0f s: %d more %s since the last line; "
                "the latest: %s", self._what, now - self._since, self._unreported,
                self._counted, reason)
            self._last_line = now
            self._unreported = 0

    def recovered(self) -> None:
        """It works again: close the open episode with one INFO (else nothing)."""
        if not self.down:
            return
        self.down = False
        self._logger.info("%s works again after %.1f s (%d %s in all)", self._what,
                          self._clock() - self._since, self._total, self._counted)

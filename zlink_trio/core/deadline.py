"""Deadline: the one end of an operation, on this process's clock and on the shared one.

Theory of operation
-------------------
Every operation has one end-to-end deadline, fixed when it is submitted and carried
unchanged through resolve, the Spot queue, a cold activation, a remote call and the
reply.  Two clocks need it:

* ``at`` -- the local Trio clock (``trio.current_time()``): cancel scopes, queue
  checks and waits use it, so tests can run on ``trio.testing.MockClock``.  It means
  nothing outside this process.
* ``wall_ms`` -- wall-clock milliseconds since the Unix epoch: what command 39/47/48
  carry (docs/wire.md) and what the durable activation envelope records (a route
  kind 2 frame's deadline must equal the one its recovery root in the Relocation
  Store records).  Every process
  -- a peer, or this node restarted after a crash -- reads it the same way.

A :class:`Deadline` holds both, computed once from the two clock readings passed in
(this module reads no clock): :meth:`Deadline.after` for a new operation,
:meth:`Deadline.from_wall_ms` for one that arrived from the wire or the store, which
keeps the received milliseconds exactly.  It is a ``NamedTuple``: immutable and as
cheap to build as a tuple, since every call makes one.
"""

from __future__ import annotations

import math
from typing import Final, NamedTuple

__all__ = ("MAX_WALL_MS", "Deadline")

#: The largest wall-clock deadline the wire carries (2**63 - 1 ms).
MAX_WALL_MS: Final = (1 << 63) - 1
# Every call builds a Deadline: skipping the NamedTuple's Python-level ``__new__`` (its
# fields are checked by the arithmetic that computes them) saves a frame per call.
_new_tuple: Final = tuple.__new__


def _clamped(ms: float) -> int:
    """``ms`` (already scaled) within the wire's 1..2**63-1, for the rare far-off value."""
    if not ms < MAX_WALL_MS:  # also NaN and infinities
        return MAX_WALL_MS
    return max(1, int(ms))


class Deadline(NamedTuple):
    """One deadline on the local Trio clock (``at``) and the wall clock (``wall_ms``)."""

    #: When it passes on this process's Trio clock (seconds).
    at: float
    #: The same moment as wall-clock milliseconds since the Unix epoch (1..2**63-1).
    wall_ms: int

    @classmethod
    def after(cls, seconds: float, *, now: float, wall_now: float) -> Deadline:
        """``seconds`` from now: ``now`` is the Trio clock, ``wall_now`` ``time.time()``."""
        ms = (wall_now + seconds) * 1000
        # Every call makes one: the common case is one multiplication and one int().
        return _new_tuple(cls, (now + seconds,
                                int(ms) if 1 <= ms < MAX_WALL_MS else _clamped(ms)))

    @classmethod
    def from_wall_ms(cls, wall_ms: int, *, now: float, wall_now: float) -> Deadline:
        """A deadline received as wall-clock milliseconds, placed on the local clock.

        ``wall_ms`` is kept exactly, so a deadline passed on (relayed, or recorded in a
        durable envelope) is the one that arrived.
        """
        if wall_ms >= MAX_WALL_MS:
            return cls(math.inf, MAX_WALL_MS)
        return cls(now + (wall_ms / 1000 - wall_now), wall_ms)

    def remaining(self, now: float) -> float:
        """Seconds left at Trio time ``now`` (negative once passed)."""
        return self.at - now

    def passed(self, now: float) -> bool:
        """Whether the deadline has passed at Trio time ``now``."""
        return now >= self.at

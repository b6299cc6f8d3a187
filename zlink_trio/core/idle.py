"""Idle cleanup of Instance Spots: which candidates a sweep examines, and what counts as idle.

Theory of operation
-------------------
Spec 09 §5: when the idle timeout is positive, the node's catalog checks its
active Spots periodically and closes the idle ones with reason IdleEvicted.
Two decisions live here, both pure:

* **Which Spots one sweep examines.** :class:`IdleSweep` examines at most
  ``batch_size`` (64) candidates per sweep, so maintenance never monopolises
  the node even with a very large catalog, and it carries its position over
  to the next sweep: it resumes right after the last key it examined,
  wrapping at the end. Every candidate is therefore examined within
  ``ceil(n / batch_size)`` sweeps of a stable candidate list. The caller
  passes the candidates in a stable order (for example the catalog's
  insertion order). If the last examined key has disappeared since, the
  sweep resumes at the index that key had, which is where its successor now
  sits when nothing before it changed; when keys before it also vanished, a
  few keys may wait one extra pass (they are not skipped for good).

* **Whether one Spot is idle** (:func:`is_idle`). Only Instance Spots qualify:
  Entry Spots belong to their node's lifecycle (09 §2) and User Spots are
  never recreated by an ordinary message (09 §5), so evicting either would
  lose it. An Instance Spot is idle only when *both* hold: no work is pending
  or running and it is not relocating (nor inside a Message Follow window),
  and at least ``timeout`` seconds have passed since its last application
  work finished. Time alone is not enough: that would evict a Spot with a
  long operation still in progress. A registered timer does not keep a Spot
  alive; a timer tick that is queued or running is pending or running work.

``timeout == 0`` disables idle cleanup: nothing is ever idle.

The catalog merges the eviction with other closes of the same Spot ID and
re-checks quiescence before the closing callback runs; that is the
runtime's job. This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final, Generic, TypeVar

import attrs

from zlink_trio.core.errors import InvalidConfiguration, InvalidOperation
from zlink_trio.core.identity import SpotKind

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = (
    "DEFAULT_SWEEP_BATCH",
    "DEFAULT_SWEEP_INTERVAL",
    "IdleSweep",
    "IdleSweepStatistics",
    "is_idle",
)

#: At most this many candidates are examined per sweep (09 §5).
DEFAULT_SWEEP_BATCH: Final = 64
#: Default seconds between two sweeps.
DEFAULT_SWEEP_INTERVAL: Final = 1.0

K = TypeVar("K")


def _finite(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidOperation(f"{what} must be a finite number of seconds, got {value!r}")
    return float(value)


def is_idle(
    kind: SpotKind,
    *,
    pending: int,
    running: int,
    relocating: bool,
    last_work_finished_at: float,
    now: float,
    timeout: float,
) -> bool:
    """Tell whether a Spot may be evicted as idle (09 §5).

    ``pending`` / ``running`` count its queued and executing work items (any
    lane, timer ticks included); ``relocating`` is true while it takes part in
    a relocation or a Message Follow window; ``last_work_finished_at`` is when
    its last application work finished (its activation time if none ran).

    True only for :attr:`SpotKind.INSTANCE` with no pending or running work,
    not relocating, ``timeout > 0`` and ``now - last_work_finished_at >=
    timeout``. Entry and User Spots are never idle. Raises
    :class:`InvalidConfiguration` for a negative or NaN ``timeout`` and
    :class:`InvalidOperation` for negative counts or non-finite times.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
        raise InvalidConfiguration(
            f"the idle timeout must be >= 0 seconds (0 disables idle cleanup), got {timeout!r}"
        )
    if pending < 0 or running < 0:
        raise InvalidOperation(
            f"pending and running are work-item counts and cannot be negative, got "
            f"pending={pending!r}, running={running!r}"
        )
    finished = _finite(last_work_finished_at, "last_work_finished_at")
    current = _finite(now, "now")
    if kind is not SpotKind.INSTANCE or timeout == 0:
        return False
    if pending or running or relocating:
        return False
    return current - finished >= timeout


@attrs.frozen(kw_only=True)
class IdleSweepStatistics:
    """A snapshot of an :class:`IdleSweep`."""

    batch_size: int
    interval: float
    #: Sweeps run so far.
    sweeps: int
    #: Candidates handed out for examination so far.
    examined: int
    #: ``now`` of the last sweep, or ``None`` before the first.
    last_sweep_at: float | None


class IdleSweep(Generic[K]):
    """Chooses which idle-cleanup candidates each sweep examines, resuming where it stopped.

    ``batch_size`` (default 64) bounds the candidates per sweep and
    ``interval`` (default 1 s) is the time between sweeps reported by
    :meth:`next_deadline`. With ``n`` Instance Spots, one is examined at
    least every ``ceil(n / batch_size) * interval`` seconds, so an idle Spot
    is evicted at most that long after its timeout. Raises
    :class:`InvalidConfiguration` for a ``batch_size`` that is not a positive
    int or an ``interval`` that is not finite and > 0.
    """

    __slots__ = ("_batch", "_examined", "_interval", "_last_at", "_last_index", "_last_key",
                 "_sweeps")

    def __init__(
        self, *, batch_size: int = DEFAULT_SWEEP_BATCH, interval: float = DEFAULT_SWEEP_INTERVAL
    ) -> None:
        if type(batch_size) is not int or batch_size <= 0:
            raise InvalidConfiguration(
                f"the idle sweep batch size must be a positive int, got {batch_size!r}"
            )
        if (
            isinstance(interval, bool)
            or not isinstance(interval, int | float)
            or not 0 < interval < math.inf
        ):
            raise InvalidConfiguration(
                f"the idle sweep interval must be a finite number of seconds > 0, got "
                f"{interval!r}"
            )
        self._batch: Final = batch_size
        self._interval: Final = float(interval)
        self._last_key: K | None = None
        self._last_index = -1
        self._last_at: float | None = None
        self._sweeps = 0
        self._examined = 0

    def _start(self, candidates: Sequence[K]) -> int:
        n = len(candidates)
        index = self._last_index
        if index < 0:
            return 0
        if index < n and candidates[index] == self._last_key:
            return (index + 1) % n  # the common case: nothing moved
        for position, key in enumerate(candidates):
            if key == self._last_key:
                return (position + 1) % n
        # The key is gone: its successor now sits at its old index.
        return index if index < n else 0

    def sweep(self, candidates: Sequence[K], now: float) -> list[K]:
        """Return the next at most ``batch_size`` candidates to examine, in list order.

        Starts right after the last key the previous sweep returned and wraps
        around; never returns a key twice in one sweep. An empty list resets
        the position. ``now`` is recorded for :meth:`next_deadline`. Raises
        :class:`InvalidOperation` if ``now`` is not finite.
        """
        current = _finite(now, "now")
        self._last_at = current
        self._sweeps += 1
        n = len(candidates)
        if n == 0:
            self._last_key, self._last_index = None, -1
            return []
        start = self._start(candidates)
        count = min(self._batch, n)
        chosen = [candidates[(start + offset) % n] for offset in range(count)]
        self._last_index = (start + count - 1) % n
        self._last_key = chosen[-1]
        self._examined += count
        return chosen

    def next_deadline(self) -> float | None:
        """When the next sweep is due: ``None`` before the first sweep (sweep now)."""
        return None if self._last_at is None else self._last_at + self._interval

    def statistics(self) -> IdleSweepStatistics:
        """Return a frozen snapshot. Never raises."""
        return IdleSweepStatistics(
            batch_size=self._batch,
            interval=self._interval,
            sweeps=self._sweeps,
            examined=self._examined,
            last_sweep_at=self._last_at,
        )

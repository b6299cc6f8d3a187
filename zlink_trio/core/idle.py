"""Idle cleanup of Instance Spots: which candidates a sweep examines, and what counts as idle.

Theory of operation
-------------------
When the idle timeout is positive, the node's catalog checks its
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

  :class:`IdleRing` is the same rule for a catalog too large to list on every
  sweep: it keeps the candidates itself, in the order they were added (``add``
  when a Spot registers, ``discard`` when it leaves), so a sweep costs
  O(batch_size) -- plus the entries of departed Spots it passes, each passed at
  most once -- however many Spots are resident; departed entries are compacted
  away once they outnumber the live ones (amortized O(1) per departure).

* **Whether one Spot is idle** (:func:`is_idle`). Only Instance Spots qualify:
  Entry Spots belong to their node's lifecycle and User Spots are
  never recreated by an ordinary message, so evicting either would
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
    from collections.abc import Callable, Sequence

__all__ = (
    "DEFAULT_SWEEP_BATCH",
    "DEFAULT_SWEEP_INTERVAL",
    "IdleRing",
    "IdleSweep",
    "IdleSweepStatistics",
    "is_idle",
)

#: At most this many candidates are examined per sweep.
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
    """Tell whether a Spot may be evicted as idle.

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

    def count_examined(self, count: int) -> None:
        """Count candidates a caller chose itself (:class:`IdleRing`) as examined."""
        self._examined += count

    def statistics(self) -> IdleSweepStatistics:
        """Return a frozen snapshot. Never raises."""
        return IdleSweepStatistics(
            batch_size=self._batch,
            interval=self._interval,
            sweeps=self._sweeps,
            examined=self._examined,
            last_sweep_at=self._last_at,
        )


class IdleRing(Generic[K]):
    """The idle sweep's candidates, kept in arrival order, handed out ``batch_size`` at a time.

    The same examination rule as :class:`IdleSweep` (at most ``batch_size`` per sweep,
    resuming after the last one, wrapping), without the candidate list a caller would
    rebuild on every sweep: :meth:`add` a key when its Spot registers, :meth:`discard`
    it when it leaves. A departed key is skipped (``alive`` says which keys still count)
    and compacted away with the others once they outnumber the live ones. A key added
    again while its old entry is still here is examined once per pass: compaction keeps
    the first of each. Raises :class:`InvalidConfiguration` as :class:`IdleSweep`.
    """

    __slots__ = ("_cursor", "_departed", "_keys", "_sweep")

    def __init__(
        self, *, batch_size: int = DEFAULT_SWEEP_BATCH, interval: float = DEFAULT_SWEEP_INTERVAL
    ) -> None:
        self._sweep: Final[IdleSweep[K]] = IdleSweep(batch_size=batch_size, interval=interval)
        self._keys: list[K] = []
        self._cursor = 0
        self._departed = 0

    def __len__(self) -> int:
        """Entries held, departed ones not yet compacted included."""
        return len(self._keys)

    def add(self, key: K) -> None:
        """A candidate arrived: it is examined in the pass after the current one at the latest."""
        self._keys.append(key)

    def discard(self, alive: Callable[[K], bool]) -> None:
        """A candidate left (its key no longer passes ``alive``); compacts when due."""
        self._departed += 1
        if self._departed * 2 > len(self._keys):
            self._compact(alive)

    def _compact(self, alive: Callable[[K], bool]) -> None:
        before = self._keys[:self._cursor]
        kept = list(dict.fromkeys(key for key in self._keys if alive(key)))
        self._cursor = len(dict.fromkeys(key for key in before if alive(key)))
        self._keys = kept
        self._departed = 0

    def sweep(self, now: float, alive: Callable[[K], bool]) -> list[K]:
        """The next at most ``batch_size`` live keys, resuming after the last sweep's.

        Passes each departed entry it meets at most once per pass. Raises
        :class:`InvalidOperation` if ``now`` is not finite.
        """
        record = self._sweep.sweep((), now)  # the timing and the sweep count
        assert record == []
        keys, batch = self._keys, self._sweep.statistics().batch_size
        chosen: list[K] = []
        n = len(keys)
        passed = 0
        while len(chosen) < batch and passed < n:
            if self._cursor >= n:
                self._cursor = 0
            key = keys[self._cursor]
            self._cursor += 1
            passed += 1
            if alive(key) and key not in chosen:
                chosen.append(key)
        self._sweep.count_examined(len(chosen))
        return chosen

    def next_deadline(self) -> float | None:
        """When the next sweep is due: ``None`` before the first sweep (sweep now)."""
        return self._sweep.next_deadline()

    def statistics(self) -> IdleSweepStatistics:
        """Return a frozen snapshot. Never raises."""
        return self._sweep.statistics()

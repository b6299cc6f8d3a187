"""Request deadlines of one node: one task and one heap instead of a cancel scope each.

Theory of operation
-------------------
Every request waits on a :class:`~.completion.Completion` until its reply or its
deadline. A ``trio.move_on_at`` around each wait costs a cancel scope per request
(~10 µs here, a tenth of a remote request's CPU), so the node keeps the deadlines of
waiting completions itself: :meth:`Deadlines.add` pushes ``(deadline, completion)``
on a heap, and the node's deadline task sleeps until the earliest one and completes
every due, still-open completion with :class:`DeadlineExceeded` -- which wakes its
waiter exactly as a reply would. The first completion wins (the slot is terminal
once), so a reply racing its deadline is either delivered or dropped, never both.

Entries of completions answered in time stay in the heap until they are popped or
the heap is compacted: each time the heap has doubled since the last look (and holds
more than :data:`COMPACT_AT` entries), it is rebuilt from the open entries. That costs
O(1) per request amortized and keeps the heap within a small multiple of the requests
in flight.

The task sleeps under one cancel scope whose deadline is the earliest entry; a new
earlier deadline moves that scope's deadline, so nothing waits longer than it
should (with ``trio.testing.MockClock`` too). When the task ends (the node stops),
every completion still open fails with :class:`Unavailable`, and later waits fall
back to a scope of their own (:attr:`Deadlines.running`), so no caller waits
without a deadline.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.core.deadline import Deadline
from zlink_trio.core.errors import Unavailable
from zlink_trio.runtime.calls.completion import deadline_exceeded

if TYPE_CHECKING:
    from zlink_trio.runtime.calls.completion import Completion

__all__ = ("COMPACT_AT", "Deadlines", "deadline_after", "deadline_from_wall_ms")

#: The heap is compacted only above this many entries.
COMPACT_AT: Final = 1_024


def deadline_after(seconds: float) -> Deadline:
    """The deadline ``seconds`` from now, on the Trio clock and the wall clock."""
    return Deadline.after(seconds, now=trio.current_time(), wall_now=time.time())


def deadline_from_wall_ms(wall_ms: int) -> Deadline:
    """A wall-clock millisecond deadline (from the wire or the store) on this process's clock."""
    return Deadline.from_wall_ms(wall_ms, now=trio.current_time(), wall_now=time.time())


class Deadlines:
    """The deadlines of a node's waiting completions; :meth:`run` is its task."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Completion, str]] = []
        self._order = itertools.count()
        self._scope: trio.CancelScope | None = None
        #: ``self._scope.deadline`` (read for every request; the property costs a call).
        self._scope_at = math.inf
        self._check_at = COMPACT_AT
        #: Whether the deadline task runs (else waits bound themselves).
        self.running = False

    def add(self, deadline: float, completion: Completion, what: str) -> None:
        """Fail ``completion`` with DeadlineExceeded at ``deadline`` unless answered first."""
        heap = self._heap
        heapq.heappush(heap, (deadline, next(self._order), completion, what))
        if deadline < self._scope_at and self._scope is not None:
            self._scope.deadline = self._scope_at = deadline
        if len(heap) > self._check_at:
            self._compact()

    def _compact(self) -> None:
        open_entries = [entry for entry in self._heap if not entry[2].done]
        heapq.heapify(open_entries)
        self._heap = open_entries
        self._check_at = max(COMPACT_AT, 2 * len(open_entries))

    async def run(self) -> None:
        """Forever: complete every due, open completion with DeadlineExceeded."""
        self.running = True
        try:
            while True:
                heap = self._heap
                now = trio.current_time()
                while heap and heap[0][0] <= now:
                    _, _, completion, what = heapq.heappop(heap)
                    if not completion.done:
                        completion.set_error(deadline_exceeded(what))
                at = heap[0][0] if heap else math.inf
                with trio.CancelScope(deadline=at) as scope:
                    self._scope, self._scope_at = scope, at
                    await trio.sleep_forever()
                self._scope, self._scope_at = None, math.inf
        finally:
            self.running = False
            self._scope, self._scope_at = None, math.inf
            heap, self._heap = self._heap, []
            for _, _, completion, _ in heap:
                completion.set_error(Unavailable(
                    "the node stopped while this request waited for its reply; it may or "
                    "may not have run. Check the Spot's state before retrying"))

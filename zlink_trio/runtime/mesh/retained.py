"""Terminal results of remote operations, kept so that a redelivery gets the same answer.

Commands 47 and 48 complete terminal-once per operation ID (one terminal reply each):
the target keeps each operation's outcome, keyed by (source NodeRid, operation ID), and
answers a redelivery with it instead of running the operation again.  The table is
bounded (the oldest entries go first); an operation still running has an entry with no
outcome yet.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Final

from zlink_trio.core.errors import Unavailable, ZLinkError
from zlink_trio.wire.frames import Failure

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.core.records import OwnerFence
    from zlink_trio.wire.frames import Outcome

__all__ = ("DEFAULT_RETAINED", "RetainedResults")

#: How many operation results a node keeps.
DEFAULT_RETAINED: Final = 4096


class RetainedResults:
    """Terminal replies of recent operations, by (source node, operation ID); bounded.

    An operation that is still running has an entry with no outcome yet: a redelivery
    then gets a failure saying so rather than a second run.
    """

    def __init__(self, limit: int = DEFAULT_RETAINED) -> None:
        self._limit = limit
        self._results: OrderedDict[tuple[bytes, int], Outcome | None] = OrderedDict()

    def begin(self, source: OwnerFence, operation_id: int) -> tuple[bool, Outcome | None]:
        """``(True, None)`` for a new operation (now running); ``(False, outcome)`` else."""
        key = (source.node_rid.value, operation_id)
        if key in self._results:
            return False, self._results[key]
        self._results[key] = None
        while len(self._results) > self._limit:
            self._results.popitem(last=False)
        return True, None

    def finish(self, source: OwnerFence, operation_id: int, outcome: Outcome) -> None:
        """Keep ``outcome`` as the terminal result of that operation."""
        self._results[(source.node_rid.value, operation_id)] = outcome

    async def run_once(self, source: OwnerFence, operation_id: int, what: str,
                       run: Callable[[], Awaitable[Outcome]]) -> Outcome:
        """The terminal outcome of one operation: ``run()`` once, a typed error as a
        Failure, and for a redelivery the retained outcome (or, while the first delivery
        still runs, a Failure saying so)."""
        new, retained = self.begin(source, operation_id)
        if not new:
            return retained if retained is not None else Failure.from_error(Unavailable(
                f"{what} (this operation) is still running; its result goes to the first "
                "request"))
        outcome: Outcome
        try:
            outcome = await run()
        except ZLinkError as exc:
            outcome = Failure.from_error(exc)
        self.finish(source, operation_id, outcome)
        return outcome

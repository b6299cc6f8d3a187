"""How an incarnation arrived by a planned relocation: what a followed message must name.

Theory of operation
-------------------
The target of a committed relocation opens its incarnation with an :class:`Arrival`
(``incarnation.arrival``; ``None`` for an incarnation that was activated, created or
recovered here).  It is what the receiver of a Message Follow message (command 39,
route kind 3) checks the frame against (``mesh.message_follow.check_followed``):
the owner generation the commit gave this incarnation, and the node it came from -- the
only node that relays to it, since every hop of a Message Follow chain is sent by the
Spot's previous owner along its committed route.

Until the source says it relayed its hold (command 62), the incarnation runs only the
moved queue and followed messages (``Incarnation.relay_wait``); :attr:`Arrival.relayed`
is set once it stopped waiting.

It also remembers the operation IDs that reached the incarnation along the move: the
moved queue's and every followed message's, each until its deadline.  A second message
with one of these IDs is a redelivery and does not run again (:meth:`first_delivery`):
a relayed operation runs at most once at the target.  The table is pruned of expired
IDs whenever it has doubled since the last pruning, so it holds no more than the
operations whose deadlines have not passed, about twice over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from zlink_trio.core.records import OwnerFence

__all__ = ("Arrival",)

#: The table's size below which it is never pruned.
_PRUNE_FLOOR = 64


class Arrival:
    """How one incarnation arrived here (see the module docstring)."""

    __slots__ = ("_prune_at", "_seen", "owner_generation", "relayed", "source", "waiting")

    def __init__(self, source: OwnerFence, owner_generation: int) -> None:
        #: The lifecycle that relocated the Spot here (the one node that relays to it).
        self.source = source
        #: The AuthorityOwnerGeneration the relocation's commit gave this incarnation.
        self.owner_generation = owner_generation
        #: Set once the source relayed its hold, or the target stopped waiting for it
        #: (``Incarnation.end_relay_wait``).
        self.relayed = trio.Event()
        #: Until the source relayed its hold: the messages admitted to the incarnation
        #: meanwhile other than followed ones, in arrival order
        #: (``Incarnation.open_moved`` makes the list, ``Incarnation.end_relay_wait``
        #: queues them and drops it).
        self.waiting: list[tuple[Any, int]] | None = None
        self._seen: dict[int, float] = {}
        self._prune_at = _PRUNE_FLOOR

    def first_delivery(self, operation_id: int, expires_at: float, now: float) -> bool:
        """Record ``operation_id`` until Trio time ``expires_at`` (its deadline); ``False``
        when it was recorded already and has not expired: a redelivery, not to be run."""
        seen = self._seen
        known = seen.get(operation_id)
        if known is not None and known > now:
            return False
        seen[operation_id] = expires_at
        if len(seen) >= self._prune_at:
            for op in [op for op, until in seen.items() if until <= now]:
                del seen[op]
            self._prune_at = max(_PRUNE_FLOOR, 2 * len(seen))
        return True

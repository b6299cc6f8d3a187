"""Placement's claims read again ahead of their expiry, once, in the node's nursery.

Theory of operation
-------------------
Placement (:mod:`.placement`) reuses the descriptor claims it read last for
``options.placement_max_age``.  Without more, the read expires in the middle of a burst
and every activation in flight then finds it stale and reads all descriptors itself
(with 100 in flight: 100 reads of the same list, each decoded -- a thundering herd,
worst exactly when the node is slow).

So an activation that uses a read older than half its max age asks for a refresh
(:meth:`ClaimsRefresh.ask`, synchronous, idempotent per read) and goes on with the
still-valid read.  :meth:`ClaimsRefresh.serve`, a task of the node's nursery, does the
one read: it replaces the claims (stamped with the store-clock time the read started, as
``placement._read_claims`` does) unless a newer read was stored meanwhile.  The read is
bounded by ``placement_max_age`` (a read that takes longer is expired once it
arrives).  A refresh that fails or is cut short changes nothing, and the read it was
asked for is not asked for again: its activations read the claims themselves once it
expires -- the behaviour without the refresh.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from zlink_trio.core.errors import ZLinkError
from zlink_trio.runtime.observe.logs import NODE as LOGGER

if TYPE_CHECKING:
    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.runtime.state import NodeState

__all__ = ("ClaimsRefresh",)


class ClaimsRefresh:
    """The wish for one refresh of the claims read last; see the module docstring."""

    __slots__ = ("_asked", "_wanted", "reads")

    def __init__(self) -> None:
        self._wanted = trio.Event()
        #: The read a refresh was last asked for (``rt.placement_claims``' tuple).
        self._asked: tuple[float, list[NodeClaim]] | None = None
        #: Refresh reads started (tests and the benchmark look at it).
        self.reads = 0

    def ask(self, seen: tuple[float, list[NodeClaim]]) -> None:
        """Ask for one refresh of read ``seen``; a second ask for the same read is a no-op."""
        if self._asked is not seen:
            self._asked = seen
            self._wanted.set()

    async def serve(self, rt: NodeState) -> None:
        """The node's refresh task: one bounded read per :meth:`ask`. Runs forever.

        ``rt`` is the node's state (``NodeRuntime``, which holds this object).
        """
        while True:
            await self._wanted.wait()  # idle until asked: nothing to bound
            self._wanted = trio.Event()
            self.reads += 1
            now = rt.now()
            with trio.move_on_after(rt.options.placement_max_age):
                try:
                    claims = await rt.store.location.descriptors(now=now)
                except ZLinkError as exc:
                    LOGGER.debug("node %r: refreshing the descriptor claims failed (%s); "
                                 "placement reads them itself once they expire", rt.node_id,
                                 exc.message)
                    continue
                seen = rt.placement_claims
                if seen is None or seen[0] <= now:  # never replace a newer read
                    rt.placement_claims = (now, claims)

"""The fence an incarnation writes its durable state and reminders with.

Theory of operation
-------------------
``ctx.state`` (``durable_state``) and ``ctx.remind`` (``reminders``) write through the
store with the incarnation's :class:`AuthorityFence`, and the store checks that fence
against the authority record in the same transaction (``store.state_steps``,
``store.reminder_steps``). :class:`OwnerWrites` is where the incarnation's side of that
rule lives, once for both:

A write happens only between the incarnation's opening (:meth:`OwnerWrites.serve`) and
its end (:meth:`OwnerWrites.end`): before, it does not serve yet (its factory,
``on_activate``); after, it ended, whatever the store would say. The fence needs the
record's owner generation, which a move raises; it is read once, at the first write, and
kept -- sound because one incarnation of a Spot is open on a node at a time, and an
incarnation never changes owner (a move ends it here and builds another at the target).

It keeps the incarnation's node, ID and generation, not the incarnation: an ended
incarnation is then freed by reference counting alone, with no cycle left for the
garbage collector (``runtime/collector.py`` freezes long-lived objects out of its view).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

from zlink_trio.core.errors import StaleFence, Unavailable
from zlink_trio.core.records import AuthorityFence

if TYPE_CHECKING:
    from zlink_trio.runtime.state import NodeState

__all__ = ("OwnerWrites", "WritingIncarnation")


class WritingIncarnation(Protocol):
    """What the fence reads of its incarnation (a Protocol: no import cycle)."""

    @property
    def rt(self) -> NodeState: ...
    @property
    def spot_id(self) -> str: ...
    @property
    def generation(self) -> int: ...


class OwnerWrites:
    """Whether the incarnation may write now, and its fence (module docstring)."""

    __slots__ = ("_ended", "_owner_generation", "_serving", "generation", "rt", "spot_id")

    def __init__(self, incarnation: WritingIncarnation) -> None:
        #: The node, Spot ID and generation of the incarnation that writes.
        self.rt: Final = incarnation.rt
        self.spot_id: Final = incarnation.spot_id
        self.generation: Final = incarnation.generation
        self._owner_generation: int | None = None
        self._serving = False
        self._ended = False

    @property
    def ended(self) -> bool:
        """Whether its incarnation has ended here (closed, moved away, or its activation
        failed): from then on the store refuses its writes."""
        return self._ended

    def end(self) -> None:
        """Its incarnation ended (called by the incarnation)."""
        self._ended = True

    def serve(self) -> None:
        """Its incarnation opened: it serves, and may write (called by the incarnation)."""
        self._serving = True

    async def fence(self, what: str) -> AuthorityFence:
        """The incarnation's fence for a write of ``what`` (e.g. "its state"); raises
        :class:`StaleFence` once it ended or another lifecycle owns the Spot, and
        :class:`Unavailable` before it serves (nothing written then)."""
        inc, rt = self, self.rt
        if self._ended:
            raise StaleFence(f"this incarnation of {inc.spot_id!r} (generation "
                             f"{inc.generation}) has ended; {what} was not written")
        if not self._serving:
            raise Unavailable(f"{inc.spot_id!r} does not serve yet: write {what} from "
                              "handlers and timers, not from its factory or on_activate "
                              "(docs/state.md)")
        if self._owner_generation is None:
            record = await rt.store.location.find(inc.spot_id)
            if (record is None or record.object_generation != inc.generation
                    or record.owner != rt.owner):
                raise StaleFence(
                    f"{inc.spot_id!r} generation {inc.generation} is no longer owned by "
                    f"this node's lifecycle {rt.owner}; {what} was not written")
            self._owner_generation = record.owner_generation
        return AuthorityFence(spot_id=inc.spot_id, object_generation=inc.generation,
                              owner_generation=self._owner_generation, owner=rt.owner)

"""The durable-state part of the Location Store protocol: a Spot's state, fenced by its
authority.

Theory of operation
-------------------
A Spot type may keep **durable state**: bytes the store holds under the Spot ID, in a
key space of their own, beside (never inside) its authority record. They outlive the
incarnation that wrote them -- idle eviction, a crash and restart recovery, a move --
and only ``clear_state`` (or the close of a User Spot, which clears it first) ends
them.

**Only the current owner writes.** ``save_state`` and ``clear_state`` take the
:class:`AuthorityFence` of the incarnation that writes, and check it against the
authority record **in the same transaction** as the write: the same Spot ID,
ObjectGeneration, owner generation and owner lifecycle, the record Ready, at a move's
source before relay-ready (Relocating, Sealed) or Closing -- the turn that was running
when a move sealed the Spot or a close began finishes there --, and the owner's lease
live at ``now``. Otherwise nothing is written and the call raises --
:class:`StaleFence` when the fence is not the record's (a successor activated or took
the Spot over: a zombie's write), :class:`Unavailable` when the owner cannot act now
(its lease expired, the Spot is not activated yet or past a move's relay-ready). So a
zombie owner -- paused past its lease, or cut off -- can never overwrite what its
successor saved, whether the successor saved yet or not. ``load_state`` reads without a fence.

The oracle is ``store.rules.state``; every backend passes
``tests/store/test_state_conformance.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from zlink_trio.core.records import AuthorityFence
    from zlink_trio.store.values import SavedState

__all__ = ("StateSteps",)


class StateSteps(Protocol):
    """A Spot's durable state, written only by its current owner (module docstring)."""

    async def save_state(self, fence: AuthorityFence, data: bytes, *,
                         now: float) -> SavedState:
        """Replace the state of ``fence.spot_id`` with ``data`` (at most
        ``MAX_STATE_BYTES``), if ``fence`` is the record's owning incarnation, Ready,
        Relocating, Sealed or Closing, with a live lease at ``now``. The state saved (its
        version one more than the last)."""
        ...

    async def load_state(self, spot_id: str) -> SavedState | None:
        """The state of ``spot_id``, or ``None`` when none was saved (or it was cleared)."""
        ...

    async def clear_state(self, fence: AuthorityFence, *, now: float) -> bool:
        """Delete the state of ``fence.spot_id`` under the checks of :meth:`save_state`;
        whether there was one."""
        ...

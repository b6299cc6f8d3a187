"""Synchronous transactions: a store whose cold-activation path never waits.

Theory of operation
-------------------
A networked store answers after a round trip, so every one of its methods awaits.
The ``memory://`` store has nothing to wait for: its transactions are pure
functions over dicts (``store.rules``), and its ``async`` methods only add a
checkpoint in front of them.  For the four store calls of a cold activation
(06 §4.1: Find, root + Reserve, first record + CommitReady, the first record's
cleanup) :class:`ImmediateTransactions` offers the same transactions as plain
calls -- same checks, same typed errors and fences, same writes, one critical
section each -- so the runtime can run a whole activation in one synchronous
continuation with nothing awaited (``runtime.coordinators.activation``).

:func:`immediate_of` is how the runtime asks for them: a store offers them as its
``immediate`` attribute, or ``None``; a store without the attribute (SQLite,
Redis, a split store, a timing proxy, a test's fake) offers none, and every
call then goes through the ``async`` methods as before.  Only the store's *class*
is asked for the attribute, so a proxy that forwards unknown attributes to the
store it wraps (``timed``, ``separate``, the test kit's faults) offers none.  A
store whose ``async`` methods were replaced (a subclass, a test's patch, a
counting or timing wrapper) must return ``None`` too, so whatever wraps those
methods still sees every call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from zlink_trio.core.identity import SpotKind
    from zlink_trio.core.records import (
        AuthorityRecord,
        OwnerFence,
        ReservationFence,
        RootReceipt,
    )
    from zlink_trio.store.values import FirstRecordCleanup

__all__ = ("ImmediateTransactions", "immediate_of")


class ImmediateTransactions(Protocol):
    """The cold activation's store calls as synchronous transactions.

    Each has the contract of the ``async`` method of the same name
    (``LocationStore.find`` and ``CombinedTransactions``); none yields to the
    scheduler, so none is a cancellation point.
    """

    def find(self, spot_id: str) -> AuthorityRecord | None:
        """``LocationStore.find``."""

    def reserve_with_root(self, spot_id: str, root: bytes, *, kind: SpotKind,
                          stable_type: str, mesh: str, owner: OwnerFence,
                          now: float) -> tuple[ReservationFence, RootReceipt]:
        """``CombinedTransactions.reserve_with_root``."""

    def commit_ready_with_first_record(self, fence: ReservationFence, record: bytes, *,
                                       now: float) -> tuple[AuthorityRecord, int]:
        """``CombinedTransactions.commit_ready_with_first_record``."""

    def finish_first_record(self, spot_id: str, object_generation: int, *, seq: int,
                            expected_version: int, root: RootReceipt) -> FirstRecordCleanup:
        """``CombinedTransactions.finish_first_record``."""


def immediate_of(store: object) -> ImmediateTransactions | None:
    """``store``'s synchronous transactions, or ``None`` when it has none (see above)."""
    if getattr(type(store), "immediate", None) is None:
        return None
    immediate: ImmediateTransactions | None = getattr(store, "immediate", None)
    return immediate

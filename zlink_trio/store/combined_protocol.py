"""The combined transactions of a cold activation: three groups, one transaction each.

Theory of operation
-------------------
A cold activation (``statecharts.cold_activation``) writes to both stores in three
groups -- root and Reserve; first inbox record and CommitReady; cursor, pointer removal
and root deletion -- which every ``Store`` offers as :class:`CombinedTransactions`
(``store.combined``). A backend holding both stores (one process, SQLite file or Redis
server) runs each group as one transaction **with the guarantees of the methods it
merges**: every check of every merged step, in the documented order, before the first
write, so a refusal raises the same typed error and writes nothing (``rules.combined``:
what merging changes). A store whose halves are not shared gets them as separate calls
(``separate.SeparateSteps``, ``with_combined``). The merged methods are the
``LocationStore`` and ``RelocationStore`` methods of :mod:`zlink_trio.store.protocol`,
whose outcome rules hold here too.

A networked store answers after a round trip, so awaiting one of its transactions
suspends the caller.  A store that has nothing to wait for may also offer them as
:class:`ImmediateTransactions` (its ``immediate`` attribute; ``memory://`` does): the
same transactions, plus ``find``, whose coroutines run to their end without
suspending -- same checks, same typed errors, same writes, one critical section
each, only no checkpoint.  The runtime then drives a whole cold activation in the
caller's continuation (``runtime.coordinators.activation``).  :func:`immediate_of`
is how it asks: only the store's *class* is asked for the attribute, so a proxy
that forwards unknown attributes to the store it wraps (``timed``, ``separate``,
the test kit's faults) offers none.  Immediate transactions must never suspend: a
store whose transactions a test steers (a double, a transaction that waits on
purpose) offers none, so that every call takes the awaited path.
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

__all__ = ("CombinedTransactions", "ImmediateTransactions", "immediate_of")


class CombinedTransactions(Protocol):
    """The three groups of a cold activation, one transaction each (see the module docstring)."""

    async def reserve_with_root(self, spot_id: str, root: bytes, *, kind: SpotKind,
                                stable_type: str, mesh: str, owner: OwnerFence,
                                now: float) -> tuple[ReservationFence, RootReceipt]:
        """PutRoot(``root``) + Reserve with the recovery pointer naming it, atomically.

        Checks, in order: ``root`` is bytes of at most 64 MiB (as ``put_root``:
        :class:`InvalidOperation` / :class:`CapacityExceeded`), then every check of
        ``LocationStore.reserve`` in its order (:class:`AuthorityExists` carrying
        the current record, :class:`StaleFence`, :class:`Unavailable`,
        :class:`InvalidOperation`, :class:`CapacityExceeded`). On any refusal
        nothing is written: no root, no record, no generation consumed. Then it
        stores the root (content addressed; an identical root already there is
        kept) and the Creating record whose recovery pointer is
        ``RecoveryPointer.from_receipt(receipt)``, and returns the reservation
        fence and the root's receipt. Not idempotent, as Reserve.
        """

    async def commit_ready_with_first_record(self, fence: ReservationFence, record: bytes, *,
                                             now: float) -> tuple[AuthorityRecord, int]:
        """InboxAppend(``record``) to the fence's incarnation + CommitReady, atomically.

        Checks, in order: ``record`` is bytes of at most 64 MiB
        (:class:`InvalidOperation` / :class:`CapacityExceeded`), then every check of
        ``LocationStore.commit_ready`` (:class:`StaleFence`, :class:`Unavailable`).
        Nothing is written on a refusal. Otherwise the record is appended to the
        inbox of ``(fence.spot_id, fence.object_generation)`` and the authority
        becomes Ready in the same transaction; returns the Ready record and the
        appended sequence. Idempotent as CommitReady: when the record already is
        the Ready result of this very commit, nothing is written and the sequence
        returned is the inbox's last one (0 when it has none).
        """

    async def finish_first_record(self, spot_id: str, object_generation: int, *, seq: int,
                                  expected_version: int,
                                  root: RootReceipt) -> FirstRecordCleanup:
        """InboxSetCursor(``seq``) + RemoveRecoveryPointer CAS + DeleteRoot, atomically.

        The cleanup after the first record's handler completed (cold activation step 12).
        Checks, in order: the arguments (:class:`InvalidOperation`); the root as
        ``delete_root`` (:class:`RootIntegrityError` when the stored bytes do not
        match ``root``); the cursor move as ``inbox_set_cursor``
        (:class:`InvalidOperation` backwards or past the last sequence); the pointer
        removal as ``remove_recovery_pointer`` (:class:`InvalidOperation` while
        Creating, :class:`StaleFence` when the StoreVersion is not
        ``expected_version``). Nothing is written on a refusal (the caller may then
        fall back to the separate steps, ``SeparateSteps``, which re-read). Each part
        is idempotent on its own, so a retry succeeds and reports ``False`` for what
        was already done.
        """


class ImmediateTransactions(CombinedTransactions, Protocol):
    """:class:`CombinedTransactions` and ``find`` whose coroutines never suspend.

    Each has the contract of the method of the same name (``LocationStore.find`` for
    ``find``); awaiting one is not a checkpoint, so a caller may drive it to its end
    in one ``send`` (see the module docstring).
    """

    async def find(self, spot_id: str) -> AuthorityRecord | None:
        """``LocationStore.find``, without suspending."""


def immediate_of(store: object) -> ImmediateTransactions | None:
    """``store``'s :class:`ImmediateTransactions`, or ``None`` when it offers none."""
    if getattr(type(store), "immediate", None) is None:
        return None
    immediate: ImmediateTransactions | None = getattr(store, "immediate", None)
    return immediate

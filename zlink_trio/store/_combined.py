"""Combined cold-activation transactions: an optional capability of a :class:`Store`.

Theory of operation
-------------------
A cold activation (06 §4.1) writes to both stores: the envelope root and Reserve,
the first inbox record and CommitReady, then the inbox cursor, the pointer removal
and the root deletion. Where the Location and the Relocation Store live in **one
backend** -- one process (``memory://``), one SQLite file, one Redis server -- each
of those groups can be one transaction of that backend. A store that can do so
exposes a ``combined`` attribute implementing :class:`CombinedTransactions`; the
runtime probes it once per call with :func:`combined_of` and otherwise makes the
separate calls (a store whose two halves are not shared, or a wrapper that does not
forward ``combined``, simply keeps the old path).

Every combined method is **one atomic transaction with the same guarantees as the
methods it merges**: it checks every precondition of every merged step -- in the
order documented on each method -- before its first write, so a refusal raises the
same typed error the separate method would and writes nothing at all. The two key
spaces stay separate (``loc_*`` / ``rel_*`` tables, ``<prefix>:loc:`` /
``<prefix>:rel:`` keys); only the transaction spans both.

What merging changes for recovery (06 §4.1.1): the envelope root now exists exactly
when the Creating record that points to it does (no orphan root after a kill
between PutRoot and Reserve), and the first inbox record is durable exactly when
the authority becomes Ready.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from zlink_trio.store.values import FirstRecordCleanup

if TYPE_CHECKING:
    from zlink_trio.core.identity import SpotKind
    from zlink_trio.core.records import (
        AuthorityRecord,
        OwnerFence,
        ReservationFence,
        RootReceipt,
    )

__all__ = ("CombinedTransactions", "FirstRecordCleanup", "combined_of")


class CombinedTransactions(Protocol):
    """The three merged transactions of a cold activation (see the module docstring)."""

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
        ...

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
        ...

    async def finish_first_record(self, spot_id: str, object_generation: int, *, seq: int,
                                  expected_version: int,
                                  root: RootReceipt) -> FirstRecordCleanup:
        """InboxSetCursor(``seq``) + RemoveRecoveryPointer CAS + DeleteRoot, atomically.

        The cleanup after the first record's handler completed (06 §4.1 step 12).
        Checks, in order: the arguments (:class:`InvalidOperation`); the root as
        ``delete_root`` (:class:`RootIntegrityError` when the stored bytes do not
        match ``root``); the cursor move as ``inbox_set_cursor``
        (:class:`InvalidOperation` backwards or past the last sequence); the pointer
        removal as ``remove_recovery_pointer`` (:class:`InvalidOperation` while
        Creating, :class:`StaleFence` when the StoreVersion is not
        ``expected_version``).
        Nothing is written on a refusal (the caller may then fall back to the
        separate steps). Each part is idempotent on its own, so a retry succeeds
        and reports ``False`` for what was already done.
        """
        ...


def combined_of(store: object) -> CombinedTransactions | None:
    """The store's combined transactions, or ``None`` when it offers none."""
    combined: CombinedTransactions | None = getattr(store, "combined", None)
    return combined

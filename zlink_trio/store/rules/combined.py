"""The combined cold-activation transactions as pure functions (the oracle).

Theory of operation
-------------------
Each ``txn_*`` here spans a :class:`LocationState` and a :class:`RelocationState`
(``memory://`` keeps both in one process) and is one transaction in the sense of
``location``: every check of every merged step first -- argument checks, then
the state checks in the order ``protocol.CombinedTransactions`` documents -- and
only then the writes -- the write halves of the single-store ``txn_*`` functions
(``store_root``, ``append``, ``move_cursor``, ``remove_pointer``), so nothing is
checked twice. The SQLite and Redis backends implement the same
contracts in one SQL transaction / one Lua script; the conformance suite and the
differential model hold them to these outcomes.

The two key spaces stay separate (``loc_*`` / ``rel_*`` tables, ``<prefix>:loc:`` /
``<prefix>:rel:`` keys); only the transaction spans both. What merging changes for
restart recovery (docs/stores.md, "Crash recovery"): the envelope root now exists
exactly when the Creating record that points to it does (no orphan root after a kill
between PutRoot and Reserve), and the first inbox record is durable exactly when the
authority becomes Ready.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zlink_trio.core._checks import MAX_GENERATION, check_generation, check_int
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import MAX_ID_BYTES, validate_spot_id
from zlink_trio.core.records import RecoveryPointer, ReservationFence, RootReceipt
from zlink_trio.store.rules import location as loc
from zlink_trio.store.rules import relocation_store as rel
from zlink_trio.store.values import FirstRecordCleanup

if TYPE_CHECKING:
    from zlink_trio.core.identity import SpotKind
    from zlink_trio.core.records import AuthorityRecord, OwnerFence

__all__ = (
    "check_finish_args",
    "txn_commit_ready_with_first_record",
    "txn_finish_first_record",
    "txn_reserve_with_root",
)


def check_finish_args(spot_id: str, object_generation: int, seq: int, expected_version: int,
                      root: RootReceipt) -> None:
    """``finish_first_record``'s argument checks, shared by every backend (InvalidOperation)."""
    if (type(spot_id) is str and spot_id.isascii() and 0 < len(spot_id) <= MAX_ID_BYTES
            and type(object_generation) is int and 0 < object_generation <= MAX_GENERATION
            and type(seq) is int and 0 <= seq <= rel.MAX_SEQ
            and type(expected_version) is int and 0 < expected_version <= MAX_GENERATION
            and type(root) is RootReceipt):
        return  # the common case, tested first: every check below passes
    validate_spot_id(spot_id)
    check_generation(object_generation, "object_generation")
    check_int(seq, "seq", 0, rel.MAX_SEQ)
    check_generation(expected_version, "expected_version")
    if not isinstance(root, RootReceipt):
        raise InvalidOperation(f"expected a RootReceipt, got {type(root).__name__}")


def txn_reserve_with_root(lstate: loc.LocationState, rstate: rel.RelocationState,
                          spot_id: str, root: bytes, *, kind: SpotKind, stable_type: str,
                          mesh: str, owner: OwnerFence,
                          now: float) -> tuple[ReservationFence, RootReceipt]:
    """PutRoot + Reserve; see ``CombinedTransactions.reserve_with_root``."""
    raw = rel.check_bytes(root, "root")
    receipt = rel.receipt_of(raw)
    # txn_reserve checks everything before it writes; put_root cannot refuse after check_bytes
    # (its write alone: the bytes are checked and their receipt is made once).
    fence = loc.txn_reserve(lstate, spot_id, kind=kind, stable_type=stable_type, mesh=mesh,
                            owner=owner, now=now,
                            recovery_pointer=RecoveryPointer.from_receipt(receipt))
    rel.store_root(rstate, raw, receipt)
    return fence, receipt


def txn_commit_ready_with_first_record(lstate: loc.LocationState,
                                       rstate: rel.RelocationState, fence: ReservationFence,
                                       record: bytes, *,
                                       now: float) -> tuple[AuthorityRecord, int]:
    """InboxAppend + CommitReady; see ``CombinedTransactions.commit_ready_with_first_record``."""
    # A ReservationFence's ID and generation passed these checks when it was built.
    key = ((fence.spot_id, fence.object_generation) if type(fence) is ReservationFence
           else rel.inbox_key(fence.spot_id, fence.object_generation))
    raw = rel.check_bytes(record, "inbox record")
    before = lstate.records.get(fence.spot_id)
    ready = loc.txn_commit_ready(lstate, fence, now=now)  # checks first, then writes
    if ready is before:  # this very commit already happened: nothing more is written
        inbox = rstate.inboxes.get(key)
        return ready, 0 if inbox is None else inbox.last_seq
    return ready, rel.append(rstate, key, raw)


def txn_finish_first_record(lstate: loc.LocationState, rstate: rel.RelocationState,
                            spot_id: str, object_generation: int, *, seq: int,
                            expected_version: int, root: RootReceipt) -> FirstRecordCleanup:
    """Cursor + pointer CAS + root deletion; see ``CombinedTransactions.finish_first_record``."""
    check_finish_args(spot_id, object_generation, seq, expected_version, root)
    delete = rel.verified_root(rstate, root) is not None  # RootIntegrityError first
    key = (spot_id, object_generation)
    inbox = rstate.inboxes.get(key)
    last, cursor = (0, 0) if inbox is None else (inbox.last_seq, inbox.cursor)
    rel.check_cursor_move(spot_id, object_generation, seq, last, cursor)
    record = lstate.records.get(spot_id)
    remove = loc.pointer_removal(record, object_generation, expected_version)
    # -- writes (the single-store transactions' writes: every check above passed) --
    moved = rel.move_cursor(rstate, key, inbox, seq)
    if remove:
        assert record is not None
        loc.remove_pointer(lstate, record)
    if delete:
        del rstate.roots[root.ref]
    return FirstRecordCleanup(moved, remove, delete)

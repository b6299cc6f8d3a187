"""The combined cold-activation transactions as pure functions (the oracle).

Theory of operation
-------------------
Each ``txn_*`` here spans a :class:`LocationState` and a :class:`RelocationState`
(``memory://`` keeps both in one process) and is one transaction in the sense of
``_location_state``: every check of every merged step first -- argument checks, then
the state checks in the order ``_combined.CombinedTransactions`` documents -- and
only then the writes, which reuse the single-store ``txn_*`` functions (they check
again and cannot refuse any more). The SQLite and Redis backends implement the same
contracts in one SQL transaction / one Lua script; the conformance suite and the
differential model hold them to these outcomes.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from zlink_trio.core._checks import check_generation, check_int
from zlink_trio.core.errors import InvalidOperation, StaleFence
from zlink_trio.core.identity import validate_spot_id
from zlink_trio.core.records import AuthorityState, RecoveryPointer, RootReceipt
from zlink_trio.store import _location_state as loc
from zlink_trio.store import _relocation_state as rel
from zlink_trio.store._combined import FirstRecordCleanup

if TYPE_CHECKING:
    from zlink_trio.core.identity import SpotKind
    from zlink_trio.core.records import AuthorityRecord, OwnerFence, ReservationFence

__all__ = (
    "check_cursor_move",
    "pointer_removal",
    "receipt_of",
    "txn_commit_ready_with_first_record",
    "txn_finish_first_record",
    "txn_reserve_with_root",
)

_MAX_SEQ = 2**63 - 1


def receipt_of(raw: bytes) -> RootReceipt:
    """The content-addressed receipt of root bytes (as ``put_root`` issues it)."""
    digest = hashlib.sha256(raw).hexdigest()
    return RootReceipt(ref=f"sha256:{digest}", sha256=digest, size=len(raw))


def check_cursor_move(spot_id: str, object_generation: int, seq: int, last: int,
                      cursor: int) -> None:
    """``inbox_set_cursor``'s state checks (InvalidOperation backwards or past the end)."""
    if seq < cursor:
        raise InvalidOperation(
            f"the inbox cursor of {spot_id!r} generation {object_generation} is at {cursor}; "
            f"moving it back to {seq} is refused (handled records are gone)"
        )
    if seq > last:
        raise InvalidOperation(
            f"the inbox of {spot_id!r} generation {object_generation} ends at sequence {last}; "
            f"the cursor cannot pass it ({seq})"
        )


def pointer_removal(record: AuthorityRecord | None, object_generation: int,
                    expected_version: int) -> bool:
    """Whether ``remove_recovery_pointer`` would remove; raises what it would raise."""
    if record is None or record.object_generation != object_generation:
        return False
    if record.state is AuthorityState.CREATING:
        raise InvalidOperation(
            f"{record.spot_id!r} is Creating; its recovery pointer is still needed")
    if record.recovery_pointer is None:
        return False
    if record.store_version != expected_version:
        raise StaleFence(
            f"{record.spot_id!r} is at StoreVersion {record.store_version}, not "
            f"{expected_version}; re-read the record before removing its recovery pointer"
        )
    return True


def txn_reserve_with_root(lstate: loc.LocationState, rstate: rel.RelocationState,
                          spot_id: str, root: bytes, *, kind: SpotKind, stable_type: str,
                          mesh: str, owner: OwnerFence,
                          now: float) -> tuple[ReservationFence, RootReceipt]:
    """PutRoot + Reserve; see ``CombinedTransactions.reserve_with_root``."""
    raw = rel._bytes(root, "root")
    receipt = receipt_of(raw)
    # txn_reserve checks everything before it writes; put_root cannot refuse after _bytes.
    fence = loc.txn_reserve(lstate, spot_id, kind=kind, stable_type=stable_type, mesh=mesh,
                            owner=owner, now=now,
                            recovery_pointer=RecoveryPointer.from_receipt(receipt))
    rel.txn_put_root(rstate, raw)
    return fence, receipt


def txn_commit_ready_with_first_record(lstate: loc.LocationState,
                                       rstate: rel.RelocationState, fence: ReservationFence,
                                       record: bytes, *,
                                       now: float) -> tuple[AuthorityRecord, int]:
    """InboxAppend + CommitReady; see ``CombinedTransactions.commit_ready_with_first_record``."""
    key = rel._key(fence.spot_id, fence.object_generation)
    raw = rel._bytes(record, "inbox record")
    before = lstate.records.get(fence.spot_id)
    ready = loc.txn_commit_ready(lstate, fence, now=now)  # checks first, then writes
    if ready is before:  # this very commit already happened: nothing more is written
        inbox = rstate.inboxes.get(key)
        return ready, 0 if inbox is None else inbox.last_seq
    return ready, rel.txn_inbox_append(rstate, key[0], key[1], raw)


def txn_finish_first_record(lstate: loc.LocationState, rstate: rel.RelocationState,
                            spot_id: str, object_generation: int, *, seq: int,
                            expected_version: int, root: RootReceipt) -> FirstRecordCleanup:
    """Cursor + pointer CAS + root deletion; see ``CombinedTransactions.finish_first_record``."""
    validate_spot_id(spot_id)
    check_generation(object_generation, "object_generation")
    check_int(seq, "seq", 0, _MAX_SEQ)
    check_generation(expected_version, "expected_version")
    if not isinstance(root, RootReceipt):
        raise InvalidOperation(f"expected a RootReceipt, got {type(root).__name__}")
    delete = rel._verified(rstate, root) is not None  # RootIntegrityError first
    inbox = rstate.inboxes.get((spot_id, object_generation))
    last, cursor = (0, 0) if inbox is None else (inbox.last_seq, inbox.cursor)
    check_cursor_move(spot_id, object_generation, seq, last, cursor)
    remove = pointer_removal(lstate.records.get(spot_id), object_generation, expected_version)
    # -- writes (each re-checks and can no longer refuse) --
    moved = rel.txn_inbox_set_cursor(rstate, spot_id, object_generation, seq)
    if remove:
        loc.txn_remove_recovery_pointer(lstate, spot_id, object_generation=object_generation,
                                        expected_version=expected_version)
    if delete:
        rel.txn_delete_root(rstate, root)
    return FirstRecordCleanup(moved, remove, delete)

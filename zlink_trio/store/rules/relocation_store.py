"""The Relocation Store's transactions as pure functions over a plain state object.

Theory of operation
-------------------
Roots are content addressed: the ref is ``"sha256:" + hex digest``, so
putting identical bytes twice yields the same receipt and stores nothing new.
Reads and deletes re-hash the stored bytes and compare SHA-256 *and* size with
the receipt, so a receipt that names other bytes (or damaged bytes) never
returns or deletes anything.

An inbox is keyed by ``(spot_id, object_generation)``: an append gets the
next sequence (1-based, never reused while the inbox exists); the replay
cursor only moves forward and trims the records at or below it. ObjectGenerations
are never reused, so a dropped inbox is never appended to again by the same
incarnation's successor.
"""

from __future__ import annotations

import hashlib
from typing import Final

import attrs

from zlink_trio.core._checks import check_generation, check_int
from zlink_trio.core._roots import receipt_of_digest
from zlink_trio.core.errors import CapacityExceeded, InvalidOperation, NotFound
from zlink_trio.core.identity import validate_spot_id
from zlink_trio.core.records import MAX_ROOT_BYTES, RootReceipt
from zlink_trio.store.values import (
    MAX_INBOX_READ,
    InboxRecord,
    RelocationStatistics,
    RootIntegrityError,
)

__all__ = (
    "HANDLED_FIRST",
    "MAX_SEQ",
    "Inbox",
    "InboxKey",
    "RelocationState",
    "check_bytes",
    "check_cursor_move",
    "check_root",
    "inbox_key",
    "receipt_of",
    "txn_delete_root",
    "txn_get_root",
    "txn_inbox_append",
    "txn_inbox_cursor",
    "txn_inbox_drop",
    "txn_inbox_read",
    "txn_inbox_set_cursor",
    "txn_put_root",
    "txn_statistics",
    "verified_root",
)

#: An inbox is keyed by ``(spot_id, object_generation)``.
InboxKey = tuple[str, int]
#: Largest inbox sequence (and cursor).
MAX_SEQ: Final = 2**63 - 1


@attrs.define
class Inbox:
    """One incarnation's durable activation inbox."""

    #: ``None`` while it holds none: every resident Spot keeps its inbox, and most hold
    #: no record once the first one is handled (an empty dict is 64 B).
    records: dict[int, bytes] | None = None
    last_seq: int = 0
    cursor: int = 0


#: The inbox of an incarnation whose first (and only) record is handled: no record,
#: sequence 1, cursor 1 -- what nearly every resident Spot keeps after its cold
#: activation. One shared instance stands for all of them (a GC-tracked object and
#: 56 B less per Spot); it is never changed: :func:`append` replaces it before it
#: writes, and :func:`move_cursor` has nothing to move on it.
HANDLED_FIRST: Final = Inbox(None, 1, 1)


@attrs.define
class RelocationState:
    """Everything a memory Relocation Store holds."""

    roots: dict[str, bytes] = attrs.Factory(dict)
    inboxes: dict[InboxKey, Inbox] = attrs.Factory(dict)


def check_bytes(data: object, what: str) -> bytes:
    """``data`` as ``bytes`` of at most 64 MiB: InvalidOperation / CapacityExceeded."""
    if type(data) is bytes and len(data) <= MAX_ROOT_BYTES:  # the common case
        return data
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidOperation(f"{what} must be bytes, got {type(data).__name__}")
    raw = bytes(data)
    if len(raw) > MAX_ROOT_BYTES:
        raise CapacityExceeded(f"{what} is {len(raw)} bytes, above the {MAX_ROOT_BYTES} bound")
    return raw


def inbox_key(spot_id: str, object_generation: int) -> InboxKey:
    """The validated key of an inbox (InvalidOperation for a bad ID or generation)."""
    return (validate_spot_id(spot_id), check_generation(object_generation, "object_generation"))


def receipt_of(raw: bytes) -> RootReceipt:
    """The content-addressed receipt of root bytes (as ``put_root`` issues it)."""
    return receipt_of_digest(hashlib.sha256(raw).hexdigest(), len(raw))


def check_root(raw: bytes, receipt: RootReceipt) -> bytes:
    """``raw``, if its size and SHA-256 are the receipt's; else :class:`RootIntegrityError`."""
    if len(raw) != receipt.size or hashlib.sha256(raw).hexdigest() != receipt.sha256:
        raise RootIntegrityError(
            f"root {receipt.ref!r} holds {len(raw)} bytes that do not match the receipt "
            f"(size {receipt.size}, sha256 {receipt.sha256}); the receipt names other bytes"
        )
    return raw


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


def txn_put_root(state: RelocationState, data: bytes) -> RootReceipt:
    """PutRoot; see ``RelocationStore.put_root``."""
    raw = check_bytes(data, "root")
    receipt = receipt_of(raw)
    store_root(state, raw, receipt)
    return receipt


def store_root(state: RelocationState, raw: bytes, receipt: RootReceipt) -> None:
    """PutRoot's write, for bytes :func:`check_bytes` passed and their :func:`receipt_of`."""
    state.roots.setdefault(receipt.ref, raw)


def verified_root(state: RelocationState, receipt: RootReceipt) -> bytes | None:
    """The bytes of ``receipt``'s root after :func:`check_root`, or ``None`` when gone."""
    if type(receipt) is not RootReceipt and not isinstance(receipt, RootReceipt):
        raise InvalidOperation(f"expected a RootReceipt, got {type(receipt).__name__}")
    raw = state.roots.get(receipt.ref)
    return None if raw is None else check_root(raw, receipt)


def txn_get_root(state: RelocationState, receipt: RootReceipt) -> bytes:
    """GetRoot; see ``RelocationStore.get_root``."""
    raw = verified_root(state, receipt)
    if raw is None:
        raise NotFound(f"no root {receipt.ref!r}; it was deleted or never stored")
    return raw


def txn_delete_root(state: RelocationState, receipt: RootReceipt) -> bool:
    """DeleteRoot; see ``RelocationStore.delete_root``."""
    if verified_root(state, receipt) is None:
        return False
    del state.roots[receipt.ref]
    return True


def txn_inbox_append(state: RelocationState, spot_id: str, object_generation: int,
                     record: bytes) -> int:
    """InboxAppend; see ``RelocationStore.inbox_append``."""
    key = inbox_key(spot_id, object_generation)
    raw = check_bytes(record, "inbox record")
    return append(state, key, raw)


def append(state: RelocationState, key: InboxKey, raw: bytes) -> int:
    """InboxAppend's write, for a validated key and checked bytes; the new sequence."""
    inbox = state.inboxes.get(key)
    seq = (0 if inbox is None else inbox.last_seq) + 1
    if inbox is None:
        inbox = state.inboxes[key] = Inbox()
    elif inbox is HANDLED_FIRST:  # shared: this inbox gets its own again
        inbox = state.inboxes[key] = Inbox(None, HANDLED_FIRST.last_seq, HANDLED_FIRST.cursor)
    if inbox.records is None:
        inbox.records = {}
    inbox.records[seq] = raw
    inbox.last_seq = seq
    return seq


def txn_inbox_read(state: RelocationState, spot_id: str, object_generation: int, *,
                   after: int = 0, limit: int) -> list[InboxRecord]:
    """InboxRead; see ``RelocationStore.inbox_read``."""
    key = inbox_key(spot_id, object_generation)
    check_int(after, "after", 0, MAX_SEQ)
    check_int(limit, "limit", 1, MAX_INBOX_READ)
    inbox = state.inboxes.get(key)
    if inbox is None:
        return []
    # Records are kept in ascending sequence (dict insertion order).
    held = inbox.records or {}
    return [InboxRecord(seq, data) for seq, data in held.items() if seq > after][:limit]


def txn_inbox_set_cursor(state: RelocationState, spot_id: str, object_generation: int,
                         seq: int) -> bool:
    """InboxSetCursor; see ``RelocationStore.inbox_set_cursor``."""
    key = inbox_key(spot_id, object_generation)
    check_int(seq, "seq", 0, MAX_SEQ)
    inbox = state.inboxes.get(key)
    cursor = 0 if inbox is None else inbox.cursor
    last = 0 if inbox is None else inbox.last_seq
    check_cursor_move(spot_id, object_generation, seq, last, cursor)
    return move_cursor(state, key, inbox, seq)


def move_cursor(state: RelocationState, key: InboxKey, inbox: Inbox | None, seq: int) -> bool:
    """InboxSetCursor's write, after :func:`check_cursor_move` passed: whether it moved.

    ``inbox`` is ``state.inboxes.get(key)``; once it holds nothing at sequence and
    cursor 1, :data:`HANDLED_FIRST` stands for it.
    """
    if inbox is None or seq == inbox.cursor:  # (always so for HANDLED_FIRST)
        return False
    records = inbox.records
    if records is not None:
        for handled in [s for s in records if s <= seq]:
            del records[handled]
        if not records:
            inbox.records = None
    inbox.cursor = seq
    if seq == 1 and inbox.records is None and inbox.last_seq == 1:
        state.inboxes[key] = HANDLED_FIRST
    return True


def txn_inbox_cursor(state: RelocationState, spot_id: str, object_generation: int) -> int:
    """InboxCursor; see ``RelocationStore.inbox_cursor``."""
    inbox = state.inboxes.get(inbox_key(spot_id, object_generation))
    return 0 if inbox is None else inbox.cursor


def txn_inbox_drop(state: RelocationState, spot_id: str, object_generation: int) -> bool:
    """InboxDrop; see ``RelocationStore.inbox_drop``."""
    return state.inboxes.pop(inbox_key(spot_id, object_generation), None) is not None


def txn_statistics(state: RelocationState) -> RelocationStatistics:
    """Statistics; see ``RelocationStore.statistics``."""
    return RelocationStatistics(
        roots=len(state.roots), root_bytes=sum(len(r) for r in state.roots.values()),
        inboxes=len(state.inboxes),
        inbox_records=sum(len(i.records or ()) for i in state.inboxes.values()),
    )

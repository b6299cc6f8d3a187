"""Redis store: the combined cold-activation transactions, one Lua script each.

Theory of operation
-------------------
Both stores live on one Redis server under two prefixes (``<prefix>:loc:`` and
``<prefix>:rel:``), so one script may touch both key spaces without merging them
(the scripts are ``lua.combined``'s). Arguments are checked here first, with the
oracle's own checks (``store.rules``), so a bad argument costs no round trip; each
script then does every state check of the steps it merges, in the order
``protocol.CombinedTransactions`` documents, before its first write, and
``raise_status`` maps a refusal to the oracle's typed error.

The Spot's record and inbox keys share the ``{<spot_id>}`` hash tag; the root key is
tagged by its content ref, and Reserve already reads node and index keys, so these
scripts need one server, like every multi-key script here. Redis Cluster runs the same
class and scripts in one bucket's slot: its root keys name the Spot's bucket
(``_root_receipt``; ``store.redis_cluster.relocation``). Root integrity is checked as
``delete_root`` does: SHA-256 in Python on a verified read, then the script deletes
only if the bytes' SHA-1 still matches (``CHANGED`` otherwise, and the call starts over
a bounded number of times).
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Final

from zlink_trio.core._checks import check_finite
from zlink_trio.core._json_fields import encode_kind
from zlink_trio.core.records import RecoveryPointer, ReservationFence, RootReceipt
from zlink_trio.store.redis.codec import decode_ready, optional_fields, raise_status, text
from zlink_trio.store.rules.combined import check_finish_args
from zlink_trio.store.rules.location import check_reserve_args
from zlink_trio.store.rules.relocation_store import (
    MAX_SEQ,
    check_bytes,
    check_cursor_move,
    inbox_key,
    receipt_of,
)
from zlink_trio.store.values import FirstRecordCleanup, RootIntegrityError

if TYPE_CHECKING:
    from zlink_trio.core.identity import SpotKind
    from zlink_trio.core.records import AuthorityRecord, OwnerFence
    from zlink_trio.store.redis.client import ScriptRunner
    from zlink_trio.store.redis.codec import Keys
    from zlink_trio.store.redis.relocation import RedisRelocationStore

__all__ = ("RedisCombined",)

_ATTEMPTS: Final = 3
#: Bound of RedisCombined._written (roots reserved here and not yet finished).
_WRITTEN_MAX: Final = 65_536

def _seq(reply: object) -> list[Any]:
    assert isinstance(reply, list), reply
    return reply


class RedisCombined:
    """The combined transactions of a :class:`RedisStore`; see the protocol."""

    def __init__(self, runner: ScriptRunner, keys: Keys,
                 relocation: RedisRelocationStore) -> None:
        self._run = runner
        self._keys = keys
        self._relocation = relocation
        #: Receipt (ref, hash, size) -> SHA-1 of the bytes ``reserve_with_root`` stored, until
        #: ``finish_first_record`` deletes that root: the script can then check the
        #: stored bytes itself, which saves the verified read's round trip.
        self._written: dict[str, str] = {}

    async def reserve_with_root(self, spot_id: str, root: bytes, *, kind: SpotKind,
                                stable_type: str, mesh: str, owner: OwnerFence,
                                now: float) -> tuple[ReservationFence, RootReceipt]:
        """PutRoot + Reserve (one script); see ``CombinedTransactions``."""
        raw = check_bytes(root, "root")
        receipt = receipt_of(raw)
        pointer = RecoveryPointer.from_receipt(receipt)
        check_reserve_args(spot_id, kind=kind, stable_type=stable_type, mesh=mesh, owner=owner,
                           now=now, creation_intent=None, recovery_pointer=pointer)
        placed = self._root_receipt(spot_id, receipt)  # after the checks: a valid Spot ID
        if placed is not receipt:
            receipt, pointer = placed, RecoveryPointer.from_receipt(placed)
        what = f"reserve of {spot_id!r}"
        # The runner's coroutine is awaited here (no helper coroutine): one frame less.
        reply = _seq(await self._run.script(
            what, "reserve_with_root", [self._keys.spot(spot_id), self._keys.root(receipt.ref)],
            [spot_id, encode_kind(kind), stable_type, mesh, str(owner.node_rid),
             owner.lifecycle_generation, repr(float(now)), raw,
             *optional_fields(None, pointer)]))
        raise_status(reply, what)
        if len(self._written) >= _WRITTEN_MAX:  # roots never finished here: forget them
            self._written.clear()
        self._written[receipt_key(receipt)] = hashlib.sha1(raw,
                                                           usedforsecurity=False).hexdigest()
        fence = ReservationFence(spot_id=spot_id, store_version=1,
                                 object_generation=int(text(reply[1])), owner_generation=1,
                                 owner=owner, owner_lease_expires_at=float(text(reply[2])))
        return fence, receipt

    def _root_receipt(self, spot_id: str, receipt: RootReceipt) -> RootReceipt:
        """The receipt the root of ``spot_id``'s creation is kept under, given its content
        receipt (``rules.relocation_store``): that one here; a layout may also name where
        it lives."""
        return receipt

    async def commit_ready_with_first_record(self, fence: ReservationFence, record: bytes, *,
                                             now: float) -> tuple[AuthorityRecord, int]:
        """InboxAppend + CommitReady (one script); see ``CombinedTransactions``."""
        key = inbox_key(fence.spot_id, fence.object_generation)
        raw = check_bytes(record, "inbox record")
        check_finite(now, "now")
        what = f"commit_ready of {fence.spot_id!r}"
        reply = _seq(await self._run.script(
            what, "commit_ready_with_first_record",
            [self._keys.spot(fence.spot_id), *self._keys.inbox(*key)],
            [fence.object_generation, fence.owner_generation, str(fence.owner.node_rid),
             fence.owner.lifecycle_generation, fence.store_version, fence.store_version + 1,
             repr(float(now)), raw]))
        raise_status(reply, what)
        return decode_ready(reply[1], fence), int(text(reply[2]))

    async def finish_first_record(self, spot_id: str, object_generation: int, *, seq: int,
                                  expected_version: int,
                                  root: RootReceipt) -> FirstRecordCleanup:
        """One script; see ``CombinedTransactions``.

        The script deletes the root only if its bytes have the SHA-1 of what this
        store wrote for it (``reserve_with_root``); otherwise -- a root this store
        did not write, or one that changed -- it reads and verifies the root first
        (``RootIntegrityError`` for bytes that do not match the receipt), then runs
        the script with the SHA-1 of what it read.
        """
        check_finish_args(spot_id, object_generation, seq, expected_version, root)
        what = f"finish_first_record of {spot_id!r}"
        keys = [*self._keys.inbox(spot_id, object_generation), self._keys.spot(spot_id),
                self._keys.root(root.ref)]
        # Only the very receipt written here skips the read: one with another size or
        # hash is checked against the bytes (RootIntegrityError first, as the oracle).
        written = self._written.pop(receipt_key(root), None)
        for _ in range(_ATTEMPTS + (written is not None)):
            if written is not None:
                sha1, written = written, None
            else:
                raw = await self._relocation.read_verified(root)  # RootIntegrityError first
                sha1 = ("" if raw is None
                        else hashlib.sha1(raw, usedforsecurity=False).hexdigest())
            reply = _seq(await self._run.script(what, "finish_first_record", keys,
                                                [object_generation, seq, expected_version,
                                                 sha1]))
            code = text(reply[0])
            if code == "CHANGED":
                continue
            if code in ("BACK", "PAST"):
                value = int(text(reply[1]))
                last, cursor = (value, 0) if code == "PAST" else (MAX_SEQ, value)
                check_cursor_move(spot_id, object_generation, seq, last, cursor)
            raise_status(reply, what)
            return FirstRecordCleanup(cursor_moved=bool(int(reply[1])),
                                      pointer_removed=bool(int(reply[2])),
                                      root_deleted=bool(int(reply[3])))
        raise RootIntegrityError(
            f"root {root.ref!r} kept changing while it was deleted; it is damaged or "
            "written by a foreign client, treat it as lost"
        )


def receipt_key(receipt: RootReceipt) -> str:
    """What a remembered root is found by: the whole receipt, not only its ref."""
    return f"{receipt.ref}|{receipt.sha256}|{receipt.size}"

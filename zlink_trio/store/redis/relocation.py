"""The Redis Relocation Store: roots and inboxes under their own key prefix.

Theory of operation
-------------------
Arguments are checked in Python exactly as the memory oracle checks them
(``store.rules.relocation_store``'s checks); state is checked and written by one
Lua script per transaction (``lua.relocation``). Reads of a single
key (``get_root``, ``inbox_cursor``) are one command. SHA-256 is computed
and verified in Python, since Redis Lua has no SHA-256: ``get_root``
verifies what it read; ``delete_root`` verifies, then deletes with a script
that refuses if the bytes changed in between (impossible for a content
addressed root unless it was damaged), and starts over a bounded number of
times.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Final

from zlink_trio.core._checks import check_int
from zlink_trio.core.errors import InvalidOperation, NotFound
from zlink_trio.core.records import RootReceipt
from zlink_trio.store.redis.codec import text
from zlink_trio.store.rules.relocation_store import (
    MAX_SEQ,
    check_bytes,
    check_root,
    inbox_key,
    receipt_of,
)
from zlink_trio.store.values import (
    MAX_INBOX_READ,
    InboxRecord,
    RelocationStatistics,
    RootIntegrityError,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from zlink_trio.store.redis.client import ScriptRunner
    from zlink_trio.store.redis.codec import Keys

__all__ = ("RedisRelocationStore",)

#: How many times delete_root re-verifies when the bytes changed under it.
_DELETE_ATTEMPTS: Final = 3


class RedisRelocationStore:
    """A :class:`~zlink_trio.store.RelocationStore` on Redis; see the protocol for contracts."""

    def __init__(self, runner: ScriptRunner, keys: Keys) -> None:
        self._run = runner
        self._keys = keys

    async def _script(self, what: str, name: str, keys: Sequence[str],
                      *args: str | int | bytes, write: bool = True) -> Any:
        return await self._run.script(what, f"rel_{name}", keys, args, write=write)

    async def put_root(self, data: bytes) -> RootReceipt:
        """PutRoot (one script); see ``RelocationStore.put_root``."""
        raw = check_bytes(data, "root")
        receipt = receipt_of(raw)
        await self._script(f"put_root {receipt.ref}", "put_root",
                           [self._keys.root(receipt.ref)], raw)
        return receipt

    async def read_verified(self, receipt: RootReceipt) -> bytes | None:
        """The root's bytes, checked against ``receipt`` (one ``GET``), or ``None`` when gone.

        :class:`RootIntegrityError` when they do not match. Also used by the combined
        ``finish_first_record`` before it deletes a root it did not write.
        """
        if not isinstance(receipt, RootReceipt):
            raise InvalidOperation(f"expected a RootReceipt, got {type(receipt).__name__}")
        key = self._keys.root(receipt.ref)
        raw: bytes | None = await self._run.command(f"get_root {receipt.ref}", ["GET", key])
        return None if raw is None else check_root(raw, receipt)

    async def get_root(self, receipt: RootReceipt) -> bytes:
        """GetRoot (one read, verified here); see ``RelocationStore.get_root``."""
        raw = await self.read_verified(receipt)
        if raw is None:
            raise NotFound(f"no root {receipt.ref!r}; it was deleted or never stored")
        return raw

    async def delete_root(self, receipt: RootReceipt) -> bool:
        """DeleteRoot (verified read, then one guarded script); see the protocol."""
        for _ in range(_DELETE_ATTEMPTS):
            raw = await self.read_verified(receipt)
            if raw is None:
                return False
            done = await self._script(f"delete_root {receipt.ref}", "delete_root",
                                      [self._keys.root(receipt.ref)],
                                      hashlib.sha1(raw, usedforsecurity=False).hexdigest())
            if int(done) >= 0:
                return bool(done)
        raise RootIntegrityError(
            f"root {receipt.ref!r} kept changing while it was deleted; it is damaged or "
            "written by a foreign client, treat it as lost"
        )

    async def inbox_append(self, spot_id: str, object_generation: int, record: bytes) -> int:
        """InboxAppend (one script); see ``RelocationStore.inbox_append``."""
        keys = self._keys.inbox(*inbox_key(spot_id, object_generation))
        raw = check_bytes(record, "inbox record")
        seq = await self._script(f"inbox_append of {spot_id!r}", "inbox_append", keys, raw)
        return int(text(seq))

    async def inbox_read(self, spot_id: str, object_generation: int, *, after: int = 0,
                         limit: int) -> list[InboxRecord]:
        """InboxRead (one read-only script); see ``RelocationStore.inbox_read``."""
        keys = self._keys.inbox(*inbox_key(spot_id, object_generation))
        check_int(after, "after", 0, MAX_SEQ)
        check_int(limit, "limit", 1, MAX_INBOX_READ)
        reply = await self._script(f"inbox_read of {spot_id!r}", "inbox_read", keys, after,
                                   limit, write=False)
        if not reply:
            return []
        first, values = int(text(reply[0])), reply[1]
        return [InboxRecord(first + i, bytes(v)) for i, v in enumerate(values)]

    async def inbox_set_cursor(self, spot_id: str, object_generation: int, seq: int) -> bool:
        """InboxSetCursor (one script); see ``RelocationStore.inbox_set_cursor``."""
        keys = self._keys.inbox(*inbox_key(spot_id, object_generation))
        check_int(seq, "seq", 0, MAX_SEQ)
        status, value = await self._script(f"inbox_set_cursor of {spot_id!r}",
                                           "inbox_set_cursor", keys, seq)
        code = text(status)
        if code == "BACK":
            raise InvalidOperation(
                f"the inbox cursor of {spot_id!r} generation {object_generation} is at "
                f"{text(value)}; moving it back to {seq} is refused (handled records are gone)"
            )
        if code == "PAST":
            raise InvalidOperation(
                f"the inbox of {spot_id!r} generation {object_generation} ends at sequence "
                f"{text(value)}; the cursor cannot pass it ({seq})"
            )
        return bool(value)

    async def inbox_cursor(self, spot_id: str, object_generation: int) -> int:
        """InboxCursor (one ``HGET``); see ``RelocationStore.inbox_cursor``."""
        key, _ = self._keys.inbox(*inbox_key(spot_id, object_generation))
        value = await self._run.command(f"inbox_cursor of {spot_id!r}",
                                        ["HGET", key, "cursor"])
        return 0 if value is None else int(value)

    async def inbox_drop(self, spot_id: str, object_generation: int) -> bool:
        """InboxDrop (one script); see ``RelocationStore.inbox_drop``."""
        keys = self._keys.inbox(*inbox_key(spot_id, object_generation))
        return bool(await self._script(f"inbox_drop of {spot_id!r}", "inbox_drop", keys))

    async def statistics(self) -> RelocationStatistics:
        """A snapshot of counts (one read-only script); see the protocol."""
        reply = await self._script("statistics", "statistics",
                                   [self._keys.relocation + "meta:{m}:stats"], write=False)
        roots, root_bytes, inboxes, records = (0 if v is None else int(v) for v in reply)
        return RelocationStatistics(roots=roots, root_bytes=root_bytes, inboxes=inboxes,
                                    inbox_records=records)

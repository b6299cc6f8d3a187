"""SQLite store: the Relocation Store (``rel_*`` tables): roots, inboxes, statistics.

Theory of operation
-------------------
Roots are ``rel_roots`` rows ``(ref, data)``. Their transactions run the memory
oracle's ``txn_*`` functions (``store.rules.relocation_store``) over a lazy
:class:`Rows` view of that table (``view``), then write the rows it changed, so
content addressing and the integrity checks are the oracle's by construction.

An inbox is one ``rel_inboxes`` row per ``(spot_id, object_generation)``
holding ``last_seq`` and the replay ``cursor``, plus its records in
``rel_inbox_records``. Each method mirrors the memory oracle
(``store.rules.relocation_store``) check for check and in the same order -- the same
validators are called first -- then touches only the rows of that one inbox:
an append reads ``last_seq`` and writes one record; moving the cursor deletes
the records at or below it in the same transaction, so a reader never sees a
handled record. Reads are bounded by ``limit``.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Final, TypeVar, cast

from zlink_trio.core._checks import check_int
from zlink_trio.store.rules import relocation_store as rel
from zlink_trio.store.rules.relocation_store import check_cursor_move
from zlink_trio.store.sqlite.rowcache import ABSENT, cache_of, put
from zlink_trio.store.sqlite.session import Prefetch
from zlink_trio.store.sqlite.view import Rows
from zlink_trio.store.values import MAX_INBOX_READ, InboxRecord, RelocationStatistics

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.core.records import RootReceipt
    from zlink_trio.store.sqlite.session import SqlDatabase, SqlSession

__all__ = (
    "SqliteRelocationStore",
    "append_sync",
    "delete_root",
    "inbox_state",
    "insert_root",
    "load_root",
    "set_cursor_sync",
    "write_cursor_sync",
)

T = TypeVar("T")

_KEY = "spot_id = ? AND object_generation = ?"


def inbox_state(conn: SqlSession, key: tuple[str, int]) -> tuple[int, int] | None:
    """``(last_seq, cursor)`` of an inbox, or ``None`` when it does not exist.

    Inside a write transaction the row cache (``rowcache``) is asked first and filled.
    """
    cache = cache_of(conn)
    if cache is not None:
        found = cache.inboxes.get(key)
        if found is not None:
            return None if found is ABSENT else found
    row = conn.execute(f"SELECT last_seq, cursor FROM rel_inboxes WHERE {_KEY}", key).fetchone()
    state = None if row is None else (int(row[0]), int(row[1]))
    if cache is not None:
        put(cache.inboxes, key, ABSENT if state is None else state)
    return state


_inbox = inbox_state


def load_root(conn: SqlSession, ref: str) -> bytes | None:
    """The stored bytes of root ``ref``, or ``None`` (one primary-key read, unless the
    row cache of a write transaction holds it)."""
    cache = cache_of(conn)
    if cache is not None:
        data = cache.roots.get(ref)
        if data is not None:
            return None if data is ABSENT else data
    row = conn.execute("SELECT data FROM rel_roots WHERE ref = ?", (ref,)).fetchone()
    if row is None:
        return None
    data = bytes(row[0])
    if cache is not None:
        cache.put_root(ref, data)
    return data


_INSERT_ROOT: Final = ("INSERT INTO rel_roots VALUES (?, ?)",
                       "INSERT INTO rel_roots VALUES (?, ?) ON CONFLICT DO NOTHING")


def insert_root(conn: SqlSession, ref: str, data: bytes, *,
                or_ignore: bool = False) -> None:
    """Store root ``ref`` (``or_ignore``: unless a row for ``ref`` exists).

    Inside a write transaction whose row cache knows whether the row exists, no count is
    read back (on PostgreSQL, reading one waits for the server).
    """
    cache = cache_of(conn)
    known = None if cache is None else cache.roots.get(ref)
    if or_ignore and known is not None and known is not ABSENT:
        return  # the row exists: DO NOTHING would change nothing
    if or_ignore and known is None:
        inserted = conn.execute(_INSERT_ROOT[True], (ref, data)).rowcount == 1
    else:  # a plain INSERT: it inserts, or raises
        conn.execute(_INSERT_ROOT[False], (ref, data))
        inserted = True
    if cache is not None:
        if inserted:
            cache.put_root(ref, data)
        else:  # an existing row: not read here
            cache.roots.pop(ref, None)


def delete_root(conn: SqlSession, ref: str) -> None:
    """Delete root ``ref``'s row (if any)."""
    conn.execute("DELETE FROM rel_roots WHERE ref = ?", (ref,))
    cache = cache_of(conn)
    if cache is not None:
        put(cache.roots, ref, ABSENT)


#: ``UPSERT … RETURNING`` (SQLite 3.35): an append's inbox row in one statement.
_RETURNING: Final = sqlite3.sqlite_version_info >= (3, 35, 0)


def append_sync(conn: SqlSession, key: tuple[str, int], raw: bytes) -> int:
    """InboxAppend's body (inside the caller's write transaction): the new sequence."""
    cache = cache_of(conn)
    if _RETURNING and (cache is None or key not in cache.inboxes):
        # Create the inbox at 1 or count on from its last_seq, one statement.
        seq, cursor = conn.execute(
            "INSERT INTO rel_inboxes VALUES (?, ?, 1, 0) ON CONFLICT (spot_id, "
            "object_generation) DO UPDATE SET last_seq = rel_inboxes.last_seq + 1 "
            "RETURNING last_seq, cursor", key).fetchone()
        seq, cursor = int(seq), int(cursor)
    else:
        found = _inbox(conn, key)
        seq, cursor = (1, 0) if found is None else (found[0] + 1, found[1])
        if found is None:
            conn.execute("INSERT INTO rel_inboxes VALUES (?, ?, ?, 0)", (*key, seq))
        else:
            conn.execute(f"UPDATE rel_inboxes SET last_seq = ? WHERE {_KEY}", (seq, *key))
    if cache is not None:  # the row as written
        put(cache.inboxes, key, (seq, cursor))
    conn.execute("INSERT INTO rel_inbox_records VALUES (?, ?, ?, ?)", (*key, seq, raw))
    return seq



def set_cursor_sync(conn: SqlSession, key: tuple[str, int], seq: int, *,
                    check_only: bool = False) -> bool:
    """InboxSetCursor's body (inside the caller's write transaction); see the protocol.

    With ``check_only`` it only checks (raising as the move would) and returns
    whether the move would change anything.
    """
    found = _inbox(conn, key)
    last, cursor = (0, 0) if found is None else found
    check_cursor_move(key[0], key[1], seq, last, cursor)
    if seq == cursor or found is None:
        return False
    if not check_only:
        write_cursor_sync(conn, key, seq)
    return True


def write_cursor_sync(conn: SqlSession, key: tuple[str, int], seq: int) -> None:
    """The writes of a cursor move that ``set_cursor_sync(check_only=True)`` approved."""
    conn.execute(f"DELETE FROM rel_inbox_records WHERE {_KEY} AND seq <= ?", (*key, seq))
    conn.execute(f"UPDATE rel_inboxes SET cursor = ? WHERE {_KEY}", (seq, *key))
    cache = cache_of(conn)
    if cache is not None:
        found = cache.inboxes.pop(key, None)
        if found is not None and found is not ABSENT:  # the row as written
            put(cache.inboxes, key, (found[0], seq))


class SqliteRelocationStore:
    """A :class:`~zlink_trio.store.RelocationStore` on SQLite; see the protocol for contracts."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    async def _roots(self, fn: Callable[[rel.RelocationState], T], *, write: bool,
                     size: int) -> T:
        def body(conn: SqlSession) -> T:
            roots: Rows[str, bytes] = Rows(lambda ref: load_root(conn, ref))
            result = fn(rel.RelocationState(roots=cast("dict[str, bytes]", roots)))
            for ref, data in roots.changes():
                if data is None:
                    delete_root(conn, ref)
                else:
                    insert_root(conn, ref, data)
            return result
        if write:
            return await self._db.write(body, size=size)
        return await self._db.read(body, size=size)

    async def put_root(self, data: bytes) -> RootReceipt:
        """PutRoot (one transaction); see ``RelocationStore.put_root``."""
        size = len(data) if isinstance(data, bytes | bytearray | memoryview) else 0
        return await self._roots(lambda s: rel.txn_put_root(s, data), write=True, size=size)

    async def get_root(self, receipt: RootReceipt) -> bytes:
        """GetRoot (one read); see ``RelocationStore.get_root``."""
        return await self._roots(lambda s: rel.txn_get_root(s, receipt), write=False,
                                 size=_size(receipt))

    async def delete_root(self, receipt: RootReceipt) -> bool:
        """DeleteRoot (one transaction); see ``RelocationStore.delete_root``."""
        return await self._roots(lambda s: rel.txn_delete_root(s, receipt), write=True,
                                 size=_size(receipt))

    async def inbox_append(self, spot_id: str, object_generation: int, record: bytes) -> int:
        """InboxAppend (one transaction); see ``RelocationStore.inbox_append``."""
        key = rel.inbox_key(spot_id, object_generation)
        raw = rel.check_bytes(record, "inbox record")

        return await self._db.write(lambda conn: append_sync(conn, key, raw), size=len(raw))

    async def inbox_read(self, spot_id: str, object_generation: int, *, after: int = 0,
                         limit: int) -> list[InboxRecord]:
        """InboxRead (one read); see ``RelocationStore.inbox_read``."""
        key = rel.inbox_key(spot_id, object_generation)
        check_int(after, "after", 0, rel.MAX_SEQ)
        check_int(limit, "limit", 1, MAX_INBOX_READ)

        def body(conn: SqlSession) -> list[InboxRecord]:
            rows = conn.execute(
                f"SELECT seq, data FROM rel_inbox_records WHERE {_KEY} AND seq > ? "
                "ORDER BY seq LIMIT ?", (*key, after, limit)).fetchall()
            return [InboxRecord(int(seq), bytes(data)) for seq, data in rows]
        return await self._db.read(body)

    async def inbox_set_cursor(self, spot_id: str, object_generation: int, seq: int) -> bool:
        """InboxSetCursor (one transaction); see ``RelocationStore.inbox_set_cursor``."""
        key = rel.inbox_key(spot_id, object_generation)
        check_int(seq, "seq", 0, rel.MAX_SEQ)

        return await self._db.write(lambda conn: set_cursor_sync(conn, key, seq))

    async def inbox_cursor(self, spot_id: str, object_generation: int) -> int:
        """InboxCursor (one read); see ``RelocationStore.inbox_cursor``."""
        key = rel.inbox_key(spot_id, object_generation)

        def body(conn: SqlSession) -> int:
            found = _inbox(conn, key)
            return 0 if found is None else found[1]
        return await self._db.read(body)

    async def inbox_drop(self, spot_id: str, object_generation: int) -> bool:
        """InboxDrop (one transaction); see ``RelocationStore.inbox_drop``."""
        key = rel.inbox_key(spot_id, object_generation)

        def body(conn: SqlSession) -> bool:
            conn.execute(f"DELETE FROM rel_inbox_records WHERE {_KEY}", key)
            cache = cache_of(conn)
            known = None if cache is None else cache.inboxes.get(key)
            if known is None:
                dropped = conn.execute(f"DELETE FROM rel_inboxes WHERE {_KEY}",
                                       key).rowcount > 0
            else:  # the cache knows whether the row is there: no count to wait for
                conn.execute(f"DELETE FROM rel_inboxes WHERE {_KEY}", key)
                dropped = known is not ABSENT
            if cache is not None:
                put(cache.inboxes, key, ABSENT)
            return dropped
        return await self._db.write(body, reads=Prefetch(inboxes=(key,)))

    async def statistics(self) -> RelocationStatistics:
        """A snapshot of counts (one read); see ``RelocationStore.statistics``."""
        def body(conn: SqlSession) -> RelocationStatistics:
            roots, size = conn.execute(
                "SELECT count(*), coalesce(sum(length(data)), 0) FROM rel_roots").fetchone()
            (inboxes,) = conn.execute("SELECT count(*) FROM rel_inboxes").fetchone()
            (records,) = conn.execute("SELECT count(*) FROM rel_inbox_records").fetchone()
            return RelocationStatistics(roots=roots, root_bytes=size, inboxes=inboxes,
                                        inbox_records=records)
        return await self._db.read(body)


def _size(receipt: RootReceipt) -> int:
    return receipt.size if isinstance(getattr(receipt, "size", None), int) else 0

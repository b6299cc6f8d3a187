"""SQLite store: rows a connection keeps from one write transaction to its next.

Theory of operation
-------------------
The three write transactions of a cold activation (``combined``) each read rows the
one before wrote: CommitReady reads the record Reserve wrote; the first record's
cleanup reads the record CommitReady wrote, the root Reserve stored and the inbox
row CommitReady created. A :class:`RowCache` keeps what this connection last read
or wrote of ``loc_records``, ``rel_roots`` and ``rel_inboxes``, so the next
transaction finds those rows without a ``SELECT`` (four statements of fifteen per
activation).

**Valid only while no other connection wrote the file.** Every write transaction,
right after its ``BEGIN IMMEDIATE`` -- it holds the write lock, so its snapshot is
the newest -- reads ``PRAGMA data_version`` (:meth:`RowCache.open`). SQLite changes
that value whenever another connection (another process, or another connection of
this one) committed since this connection last looked; this connection's own commits
leave it alone, and a checkpoint may change it (that only empties the cache). A
changed value empties the cache. Inside the transaction:

- every read of a cached table asks :func:`cache_of` first and fills the entry from
  the table (a missing row too, as :data:`ABSENT`);
- every write of such a row sets its entry to exactly the row the SQL wrote, or
  drops the entry when that row is not known, and only after the SQL succeeded;
- a transaction, a group, or one body of a group that raises -- whether or not it
  wrote -- empties the cache, so no row a rollback undid survives in it.

So a cached row is always the row the table holds in the transaction's snapshot,
and every check of the oracle sees what it would read from the table. Reads outside
write transactions (``find``, ``get_root``) never use the cache: they take no write
lock, so no version check would hold for them. The cache is bounded
(:data:`CACHE_ROWS` rows per table, :data:`CACHE_ROOT_BYTES` per root; a full table is
emptied).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import sqlite3

    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.store.sqlite.session import SqlSession

__all__ = ("ABSENT", "CACHE_ROOT_BYTES", "CACHE_ROWS", "RowCache", "cache_of", "put")

#: A cache entry: the row does not exist.
ABSENT: Final[Any] = object()
#: Most rows kept per table (a full table is emptied).
CACHE_ROWS: Final = 4096
#: Largest root kept (bigger ones are read from the table again).
CACHE_ROOT_BYTES: Final = 16 * 1024


def put(table: dict[Any, Any], key: object, value: object) -> None:
    """Set one entry of a cache table (emptied first when full)."""
    if len(table) >= CACHE_ROWS and key not in table:
        table.clear()
    table[key] = value


class RowCache:
    """The cached rows of one connection; see the module docstring."""

    __slots__ = ("enabled", "inboxes", "records", "roots", "version")

    def __init__(self) -> None:
        #: spot_id -> record or :data:`ABSENT`.
        self.records: dict[str, AuthorityRecord] = {}
        #: ref -> data (roots of at most :data:`CACHE_ROOT_BYTES`; no absent entries).
        self.roots: dict[str, bytes] = {}
        #: (spot_id, object_generation) -> (last_seq, cursor) or :data:`ABSENT`.
        self.inboxes: dict[tuple[str, int], tuple[int, int]] = {}
        #: ``PRAGMA data_version`` when the entries were last known valid.
        self.version: int | None = None
        #: Off: every transaction reads the tables (the general path, for tests).
        self.enabled = True

    def open(self, conn: sqlite3.Connection) -> None:
        """A write transaction began on ``conn`` (after ``BEGIN IMMEDIATE``)."""
        if not self.enabled:
            return
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self.version:
            self.clear()
            self.version = version
        _open[conn] = self

    def close(self, conn: sqlite3.Connection) -> None:
        """The write transaction on ``conn`` ended (committed or rolled back)."""
        _open.pop(conn, None)

    def clear(self) -> None:
        """Forget every row (a rollback, or another connection wrote)."""
        self.records.clear()
        self.roots.clear()
        self.inboxes.clear()

    def put_root(self, ref: str, data: bytes) -> None:
        """Remember a root this transaction read or wrote (small ones only)."""
        if len(data) <= CACHE_ROOT_BYTES:
            put(self.roots, ref, data)
        else:
            self.roots.pop(ref, None)


#: The cache of each connection inside a write transaction (set by :meth:`RowCache.open`).
_open: dict[object, RowCache] = {}


def cache_of(conn: SqlSession) -> RowCache | None:
    """The cache to use inside the write transaction running on ``conn``, or ``None``
    (always outside a SQLite write transaction, and on PostgreSQL)."""
    return _open.get(conn) if _open else None

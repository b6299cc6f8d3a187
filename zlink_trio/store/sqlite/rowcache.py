"""SQL stores: rows a connection keeps from one write transaction to its next.

Theory of operation
-------------------
The three write transactions of a cold activation (``combined``) each read rows the
one before wrote: CommitReady reads the record Reserve wrote; the first record's
cleanup reads the record CommitReady wrote, the root Reserve stored and the inbox
row CommitReady created. A :class:`RowCache` keeps what this connection last read
or wrote of ``loc_records``, ``rel_roots`` and ``rel_inboxes``, so the next
transaction finds those rows without a ``SELECT`` (four statements of fifteen per
activation).

**Valid only while no other connection wrote the store.** Every write transaction,
right after it took the store's write lock -- so its snapshot is the newest -- reads
the backend's *write version* and hands it to :meth:`RowCache.open`; a value other
than the one the cache last saw empties the cache. On SQLite the version is ``PRAGMA
data_version``: SQLite changes it whenever another connection (another process, or
another connection of this one) committed since this connection last looked; this
connection's own commits leave it alone, and a checkpoint may change it (that only
empties the cache). On PostgreSQL it is the store's write counter
(``store.postgres.connection``): every write transaction of every process adds one to
it under the write lock, and the connection sets :attr:`RowCache.version` to the value
its own commit left, so the next transaction finds that value again only when no
other writer committed in between. Inside the transaction:

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

from zlink_trio.store.rules.location import capacity_key
from zlink_trio.store.sqlite.codec import decode_claim, decode_record
from zlink_trio.store.sqlite.group_rows import SEQUENCE
from zlink_trio.store.sqlite.session import padded

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from zlink_trio.core.identity import NodeRid
    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.store.rules.location import CapacityKey
    from zlink_trio.store.sqlite.group_rows import GroupRows
    from zlink_trio.store.sqlite.session import Prefetch, SqlSession

__all__ = ("ABSENT", "CACHE_ROOT_BYTES", "CACHE_ROWS", "RowCache", "cache_of", "prefetch", "put")

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
        #: ref -> data (roots of at most :data:`CACHE_ROOT_BYTES`) or :data:`ABSENT`.
        self.roots: dict[str, bytes] = {}
        #: (spot_id, object_generation) -> (last_seq, cursor) or :data:`ABSENT`.
        self.inboxes: dict[tuple[str, int], tuple[int, int]] = {}
        #: The write version when the entries were last known valid.
        self.version: object = None
        #: Off: every transaction reads the tables (the general path, for tests).
        self.enabled = True

    def open(self, conn: SqlSession, version: object) -> None:
        """A write transaction began on ``conn`` holding the write lock; ``version``: the
        backend's write version read after the lock was taken (see the module docstring)."""
        if not self.enabled:
            return
        if version != self.version:
            self.clear()
            self.version = version
        _open[conn] = self

    def close(self, conn: SqlSession) -> None:
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


def _in(column: str, keys: list[str]) -> str:
    return f"{column} IN ({', '.join('?' * len(keys))})"


def prefetch(conn: SqlSession, cache: RowCache, wanted: Iterable[Prefetch],
             group: GroupRows) -> Callable[[], None]:
    """Send the reads of every row ``wanted`` names that ``cache`` does not hold, and of
    the claims, capacity counters and sequence it names; the function returned reads
    their answers into ``cache`` (a missing row as :data:`ABSENT`) and the ``group``'s
    shared rows. On a pipelined session that is one round trip, the caller's to make
    between the two (a sync). Inside a write transaction that holds the store's write
    lock, after :meth:`RowCache.open` and ``group_rows.open_group``."""
    if not cache.enabled:
        return _nothing
    records: set[str] = set()
    inboxes: set[tuple[str, int]] = set()
    roots: set[str] = set()
    claims: set[tuple[str, NodeRid]] = set()
    capacity: set[CapacityKey] = set()
    sequence = False
    for hint in wanted:
        records.update(hint.records)
        inboxes.update(hint.inboxes)
        roots.update(hint.roots)
        claims.update(hint.claims)
        capacity.update(hint.capacity)
        sequence = sequence or hint.sequence
        for spot_id in hint.owners:
            record = cache.records.get(spot_id)
            if record is not None and record is not ABSENT:
                claims.add((record.mesh, record.owner.node_rid))
                capacity.add(capacity_key(record.mesh, record.owner))
    claim_rows = [(key, conn.execute("SELECT body FROM loc_claims WHERE mesh = ? AND "
                                     "node_rid = ?", (key[0], str(key[1]))))
                  for key in claims if key not in group.claims]
    capacity_rows = [(key, conn.execute(
        "SELECT pending, active FROM loc_capacity WHERE mesh = ? AND node_rid = ? AND "
        "lifecycle = ?", (key[0], str(key[1]), key[2])))
        for key in capacity if key not in group.capacity]
    sequence_row = (conn.execute("SELECT value FROM loc_sequence WHERE name = ?",
                                 (SEQUENCE,))
                    if sequence and group.generation is None else None)
    wanted_records = [key for key in records if key not in cache.records]
    wanted_inboxes = [key for key in inboxes if key not in cache.inboxes]
    wanted_roots = [ref for ref in roots if ref not in cache.roots]
    record_rows = inbox_rows = root_rows = None
    if wanted_records:
        keys = padded(wanted_records)
        record_rows = conn.execute(f"SELECT spot_id, body FROM loc_records WHERE "
                                   f"{_in('spot_id', keys)}", keys)
    if wanted_inboxes:
        keys = padded(sorted({spot_id for spot_id, _ in wanted_inboxes}))
        inbox_rows = conn.execute(
            f"SELECT spot_id, object_generation, last_seq, cursor FROM rel_inboxes "
            f"WHERE {_in('spot_id', keys)}", keys)
    if wanted_roots:
        keys = padded(wanted_roots)
        # A root too big to keep comes back as NULL: known to exist, not kept.
        root_rows = conn.execute(
            f"SELECT ref, CASE WHEN length(data) <= {CACHE_ROOT_BYTES} THEN data END "
            f"FROM rel_roots WHERE {_in('ref', keys)}", keys)

    def load() -> None:  # the answers into the cache and the group's rows
        if record_rows is not None:
            found = dict(record_rows.fetchall())
            for spot_id in wanted_records:
                body = found.get(spot_id)
                put(cache.records, spot_id, ABSENT if body is None else decode_record(body))
        if inbox_rows is not None:
            rows = {(spot_id, int(generation)): (int(last_seq), int(cursor))
                    for spot_id, generation, last_seq, cursor in inbox_rows.fetchall()}
            for key in wanted_inboxes:
                put(cache.inboxes, key, rows.get(key, ABSENT))
        if root_rows is not None:
            small = dict(root_rows.fetchall())
            for ref in wanted_roots:
                if ref not in small:
                    put(cache.roots, ref, ABSENT)
                elif small[ref] is not None:
                    cache.put_root(ref, bytes(small[ref]))
        for claim_key, answer in claim_rows:  # the rows as the views would have read them
            row = answer.fetchone()
            group.claims[claim_key] = None if row is None else decode_claim(row[0])
        for counter_key, answer in capacity_rows:
            row = answer.fetchone()
            group.capacity[counter_key] = (0, 0) if row is None else (row[0], row[1])
        if sequence_row is not None:
            row = sequence_row.fetchone()
            group.generation = 0 if row is None else int(row[0])
    return load


def _nothing() -> None:
    pass


#: The cache of each connection inside a write transaction (set by :meth:`RowCache.open`).
_open: dict[object, RowCache] = {}


def cache_of(conn: SqlSession) -> RowCache | None:
    """The cache to use inside the write transaction running on ``conn``, or ``None``
    (always outside a write transaction)."""
    return _open.get(conn) if _open else None

"""SQLite store: the Location Store's tables seen as a :class:`LocationState`.

Theory of operation
-------------------
The SQLite backend does not re-implement the Location Store's checks: it
runs the very ``txn_*`` functions of the memory backend (the oracle) over a
:class:`LocationState` whose dicts are :class:`Rows` -- lazy views of one
table each, valid for one transaction:

- ``get(key)`` (and ``[key]``, ``in``) loads the row on first use with one
  primary-key ``SELECT`` and caches the decoded value, so repeated reads return
  the *same object* (the oracle compares Entry records by identity);
- ``[key] = value``, ``del``, ``pop`` change only the cache and remember the key;
- enumerating a view is refused (no ``__iter__``): a transaction that would
  scan a table must be written as a bounded SQL query instead.

The oracle checks every precondition before its first write, and all its
writes land in the views; :meth:`LocationView.flush` then writes the remembered
keys back with ``INSERT OR REPLACE`` / ``DELETE``. Everything happens inside
one ``BEGIN IMMEDIATE`` transaction (``connection``), so a raise anywhere --
in a check, a constructor, or SQLite itself -- rolls back whole, and two
processes never interleave. Same checks, same order, same errors and same
return values as ``memory://`` by construction.
"""

from __future__ import annotations

import json
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, cast

from zlink_trio.core.descriptor import NodeClaim
from zlink_trio.core.records import AuthorityRecord
from zlink_trio.store.rules.location import CapacityKey, LocationState

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterator

    from zlink_trio.core.identity import NodeRid

__all__ = (
    "LocationView",
    "Rows",
    "decode_claim",
    "decode_record",
    "dumps",
    "encode_claim",
    "encode_record",
)

K = TypeVar("K")
V = TypeVar("V")

_SEQUENCE = "object_generation"
_MISSING: Any = object()
_CACHE_SIZE = 512


# One encoder for every call: json.dumps with options builds a new encoder each time.
_ENCODE: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def dumps(value: object) -> str:
    """Compact JSON text, the stored form of records and claims."""
    return _ENCODE(value)


# Records and claims are immutable values fully determined by their stored text,
# so decoded values are cached by that text (bounded; cleared when full). A
# record written by one transaction is read back by the next without decoding.
_records: dict[str, AuthorityRecord] = {}
_claims: dict[str, NodeClaim] = {}


def _remember(cache: dict[str, V], body: str, value: V) -> V:
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    cache[body] = value
    return value


def decode_record(body: str) -> AuthorityRecord:
    """An authority record from its stored JSON."""
    record = _records.get(body)
    if record is None:
        record = _remember(_records, body, AuthorityRecord.from_json(json.loads(body)))
    return record


def encode_record(record: AuthorityRecord) -> str:
    """The stored JSON of ``record`` (and remember the pair for the next read)."""
    body = dumps(record.to_json())
    _remember(_records, body, record)
    return body


def encode_claim(claim: NodeClaim) -> str:
    """The stored JSON of ``claim`` (and remember the pair for the next read)."""
    body = dumps(claim.to_json())
    _remember(_claims, body, claim)
    return body


def decode_claim(body: str) -> NodeClaim:
    """A claim from its stored JSON."""
    claim = _claims.get(body)
    if claim is None:
        claim = _remember(_claims, body, NodeClaim.from_json(json.loads(body)))
    return claim


class Rows(Generic[K, V]):
    """A lazy, write-remembering view of one table for one transaction."""

    __slots__ = ("_known", "_load", "_rows", "changed")

    def __init__(self, load: Callable[[K], V | None]) -> None:
        self._load = load
        self._rows: dict[K, V] = {}
        self._known: set[K] = set()
        self.changed: set[K] = set()

    def _resolve(self, key: K) -> None:
        if key not in self._known:
            self._known.add(key)
            value = self._load(key)
            if value is not None:
                self._rows[key] = value

    def get(self, key: K, default: Any = None) -> Any:
        """The value at ``key`` (loaded on first use) or ``default``."""
        self._resolve(key)
        return self._rows.get(key, default)

    def __getitem__(self, key: K) -> V:
        self._resolve(key)
        return self._rows[key]

    def __contains__(self, key: object) -> bool:
        self._resolve(cast("K", key))
        return key in self._rows

    def __setitem__(self, key: K, value: V) -> None:
        self._known.add(key)
        self.changed.add(key)
        self._rows[key] = value

    def __delitem__(self, key: K) -> None:
        self._resolve(key)
        del self._rows[key]
        self.changed.add(key)

    def pop(self, key: K, default: Any = _MISSING) -> Any:
        """Remove and return ``key``'s value (``default`` when absent)."""
        self._resolve(key)
        if key in self._rows:
            self.changed.add(key)
        return self._rows.pop(key) if default is _MISSING else self._rows.pop(key, default)

    def setdefault(self, key: K, default: V) -> V:
        """The value at ``key``, storing ``default`` first when absent."""
        self._resolve(key)
        if key not in self._rows:
            self[key] = default
        return self._rows[key]

    def changes(self) -> Iterator[tuple[K, V | None]]:
        """Every written key with its final value (``None``: delete the row)."""
        for key in self.changed:
            yield key, self._rows.get(key)


def _one(conn: sqlite3.Connection, sql: str, args: tuple[object, ...]) -> Any:
    row = conn.execute(sql, args).fetchone()
    return None if row is None else row[0]


def _load_claim(conn: sqlite3.Connection, key: tuple[str, NodeRid]) -> NodeClaim | None:
    body = _one(conn, "SELECT body FROM loc_claims WHERE mesh = ? AND node_rid = ?",
                (key[0], str(key[1])))
    return None if body is None else decode_claim(body)


def _load_record(conn: sqlite3.Connection, spot_id: str) -> AuthorityRecord | None:
    body = _one(conn, "SELECT body FROM loc_records WHERE spot_id = ?", (spot_id,))
    return None if body is None else decode_record(body)


def _load_lifecycle(conn: sqlite3.Connection, node_id: str) -> int | None:
    value = _one(conn, "SELECT generation FROM loc_lifecycles WHERE node_id = ?", (node_id,))
    return None if value is None else int(value)


def _load_capacity(conn: sqlite3.Connection, rows: dict[CapacityKey, tuple[int, int]],
                   column: int, key: CapacityKey) -> int | None:
    row = rows.get(key)
    if row is None:  # one SELECT serves both counters of the key
        found = conn.execute(
            "SELECT pending, active FROM loc_capacity WHERE mesh = ? AND node_rid = ? "
            "AND lifecycle = ?", (key[0], str(key[1]), key[2])).fetchone()
        row = rows[key] = (0, 0) if found is None else (found[0], found[1])
    return row[column] or None


class LocationView:
    """The oracle's :class:`LocationState` over the ``loc_*`` tables of one transaction."""

    def __init__(self, conn: sqlite3.Connection, *, generation: bool = True) -> None:
        """A view for one transaction; ``generation=False`` skips reading the sequence.

        Only transactions that issue an ObjectGeneration (NewClaim, Reserve) need the
        sequence row; the others save that statement. :meth:`flush` refuses to write
        a sequence that was never read.
        """
        self._conn = conn
        # The loaders hold the connection, never the view: a view referenced from its
        # own Rows would be a reference cycle, garbage that only the cyclic collector
        # frees (three per activation, a third of SQLite's CPU in GC before this).
        capacity: dict[CapacityKey, tuple[int, int]] = {}
        self.claims: Rows[tuple[str, NodeRid], NodeClaim] = Rows(partial(_load_claim, conn))
        self.records: Rows[str, AuthorityRecord] = Rows(partial(_load_record, conn))
        self.lifecycles: Rows[str, int] = Rows(partial(_load_lifecycle, conn))
        self.pending: Rows[CapacityKey, int] = Rows(partial(_load_capacity, conn, capacity, 0))
        self.active: Rows[CapacityKey, int] = Rows(partial(_load_capacity, conn, capacity, 1))
        self._read_generation = generation
        self._generation = int(_one(conn, "SELECT value FROM loc_sequence WHERE name = ?",
                                    (_SEQUENCE,)) or 0) if generation else 0
        self.state = LocationState(
            claims=cast("dict[tuple[str, NodeRid], NodeClaim]", self.claims),
            records=cast("dict[str, AuthorityRecord]", self.records),
            lifecycles=cast("dict[str, int]", self.lifecycles),
            last_generation=self._generation,
            pending=cast("dict[CapacityKey, int]", self.pending),
            active=cast("dict[CapacityKey, int]", self.active),
        )

    def flush(self) -> None:
        """Write every change the oracle made back to the tables (same transaction)."""
        conn = self._conn
        for (mesh, rid), claim in self.claims.changes():
            if claim is None:
                conn.execute("DELETE FROM loc_claims WHERE mesh = ? AND node_rid = ?",
                             (mesh, str(rid)))
            else:
                conn.execute("INSERT OR REPLACE INTO loc_claims VALUES (?, ?, ?, ?, ?)",
                             (mesh, str(rid), claim.lifecycle_generation,
                              claim.lease_expires_at, encode_claim(claim)))
        for spot_id, record in self.records.changes():
            if record is None:
                conn.execute("DELETE FROM loc_records WHERE spot_id = ?", (spot_id,))
            else:
                conn.execute(
                    "INSERT OR REPLACE INTO loc_records VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (spot_id, record.state.value, record.mesh, str(record.owner.node_rid),
                     record.owner.lifecycle_generation, record.object_generation,
                     encode_record(record)))
        for node_id, generation in self.lifecycles.changes():
            assert generation is not None  # lifecycle generations are never deleted
            conn.execute("INSERT OR REPLACE INTO loc_lifecycles VALUES (?, ?)",
                         (node_id, generation))
        for key in self.pending.changed | self.active.changed:
            pending, active = self.pending.get(key, 0), self.active.get(key, 0)
            if pending or active:
                conn.execute("INSERT OR REPLACE INTO loc_capacity VALUES (?, ?, ?, ?, ?)",
                             (key[0], str(key[1]), key[2], pending, active))
            else:
                conn.execute("DELETE FROM loc_capacity WHERE mesh = ? AND node_rid = ? AND "
                             "lifecycle = ?", (key[0], str(key[1]), key[2]))
        if self.state.last_generation != self._generation:
            assert self._read_generation, "a generation was issued without reading the sequence"
            conn.execute("INSERT OR REPLACE INTO loc_sequence VALUES (?, ?)",
                         (_SEQUENCE, self.state.last_generation))

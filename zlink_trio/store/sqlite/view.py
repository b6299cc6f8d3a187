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

**Rows shared by a group commit** (:class:`GroupRows`). The transactions of one group
(``connection``, *Group commit*) run inside one ``BEGIN IMMEDIATE``, so nothing but
them can change the file meanwhile. Concurrent activations touch the same few rows --
the ObjectGeneration sequence, the owner's claim and its capacity counters -- so
while a group runs, those rows are read once and kept in its :class:`GroupRows`;
the sequence and the capacity counters are also written once, by
:meth:`GroupRows.write` just before the group's ``COMMIT`` (claims are written at
once, as every other row). Each body's changes to these rows are undone when the
body is rolled back to its savepoint (:meth:`GroupRows.undo`), so every body sees
exactly what it would have read from the tables. Only the views touch these tables
inside a write transaction (the one raw read, ``new_claim``'s scan of
``loc_claims``, sees claims, which are written at once).
"""

from __future__ import annotations

import json
from functools import partial
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, cast

from zlink_trio.core.descriptor import NodeClaim
from zlink_trio.core.records import AuthorityRecord
from zlink_trio.store.rules.location import CapacityKey, LocationState

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterator

    from zlink_trio.core.identity import NodeRid

__all__ = (
    "GroupRows",
    "LocationView",
    "Rows",
    "close_group",
    "decode_claim",
    "decode_record",
    "dumps",
    "encode_claim",
    "encode_record",
    "open_group",
)

K = TypeVar("K")
V = TypeVar("V")

_SEQUENCE = "object_generation"
_MISSING: Any = object()
_CACHE_SIZE = 512


# One encoder for every call: json.dumps with options builds a new encoder each time,
# and JSONEncoder.encode builds its C encoder on every call too; this one is built once
# (the same options, so the same text).
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_C_ENCODE: Final[Any] = (
    None if c_make_encoder is None else c_make_encoder(
        {}, _ENCODER.default, encode_basestring, None, ":", ",", False, False, True))


def dumps(value: object) -> str:
    """Compact JSON text, the stored form of records and claims."""
    if _C_ENCODE is None:
        return _ENCODER.encode(value)
    return "".join(_C_ENCODE(value, 0))


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


#: In a :class:`Rows` cache: the row was loaded and does not exist.
_ABSENT: Any = object()


class Rows(Generic[K, V]):
    """A lazy, write-remembering view of one table for one transaction.

    One dict holds what is known (a loaded row, or :data:`_ABSENT`); the set of written
    keys is made on the first write (most views only read most of their tables).
    """

    __slots__ = ("_load", "_rows", "changed")

    def __init__(self, load: Callable[[K], V | None]) -> None:
        self._load = load
        self._rows: dict[K, Any] = {}
        self.changed: set[K] | None = None

    def _value(self, key: K) -> Any:
        """The row at ``key`` or :data:`_ABSENT`, loaded on first use."""
        value = self._rows.get(key, _MISSING)
        if value is _MISSING:
            loaded = self._load(key)
            value = self._rows[key] = _ABSENT if loaded is None else loaded
        return value

    def _changed(self, key: K) -> None:
        if self.changed is None:
            self.changed = {key}
        else:
            self.changed.add(key)

    def get(self, key: K, default: Any = None) -> Any:
        """The value at ``key`` (loaded on first use) or ``default``."""
        value = self._rows.get(key, _MISSING)
        if value is _MISSING:  # _value, inlined: the hottest call of a view
            loaded = self._load(key)
            value = self._rows[key] = _ABSENT if loaded is None else loaded
        return default if value is _ABSENT else value

    def __getitem__(self, key: K) -> V:
        value = self._value(key)
        if value is _ABSENT:
            raise KeyError(key)
        return cast("V", value)

    def __contains__(self, key: object) -> bool:
        return self._value(cast("K", key)) is not _ABSENT

    def __setitem__(self, key: K, value: V) -> None:
        self._changed(key)
        self._rows[key] = value

    def __delitem__(self, key: K) -> None:
        if self._value(key) is _ABSENT:
            raise KeyError(key)
        self._rows[key] = _ABSENT
        self._changed(key)

    def pop(self, key: K, default: Any = _MISSING) -> Any:
        """Remove and return ``key``'s value (``default`` when absent)."""
        value = self._value(key)
        if value is _ABSENT:
            if default is _MISSING:
                raise KeyError(key)
            return default
        self._rows[key] = _ABSENT
        self._changed(key)
        return value

    def setdefault(self, key: K, default: V) -> V:
        """The value at ``key``, storing ``default`` first when absent."""
        value = self._value(key)
        if value is _ABSENT:
            self[key] = default
            return default
        return cast("V", value)

    def changes(self) -> Iterator[tuple[K, V | None]]:
        """Every written key with its final value (``None``: delete the row)."""
        if self.changed is None:
            return
        for key in self.changed:
            value = self._rows[key]
            yield key, None if value is _ABSENT else value


class GroupRows:
    """The sequence, claim and capacity rows of one group commit (see the module docstring).

    ``claims`` and ``capacity`` hold every row read or written so far in the group
    (``None`` / ``(0, 0)``: no row); ``generation`` the sequence once read. The
    sequence and the capacity rows changed are written by :meth:`write`.
    """

    __slots__ = ("capacity", "claims", "dirty", "generation", "generation_dirty", "log")

    def __init__(self) -> None:
        self.claims: dict[tuple[str, NodeRid], NodeClaim | None] = {}
        self.capacity: dict[CapacityKey, tuple[int, int]] = {}
        self.generation: int | None = None
        self.dirty: set[CapacityKey] = set()
        self.generation_dirty = False
        #: The current body's changes, oldest first, as (table, key, previous value).
        self.log: list[tuple[str, Any, Any]] = []

    def begin(self) -> None:
        """A body starts (after its ``SAVEPOINT``)."""
        self.log.clear()

    def undo(self) -> None:
        """The body was rolled back to its savepoint: forget its changes."""
        for table, key, previous in reversed(self.log):
            if table == "claims":
                if previous is _MISSING:  # never read: the table has it (rolled back)
                    del self.claims[key]
                else:
                    self.claims[key] = previous
            elif table == "capacity":
                if previous is _MISSING:  # never read, so no earlier body changed it
                    del self.capacity[key]
                    self.dirty.discard(key)
                else:
                    self.capacity[key] = previous  # written by write(): the same row
            else:
                self.generation = previous
        self.log.clear()

    def set_claim(self, key: tuple[str, NodeRid], claim: NodeClaim | None) -> None:
        self.log.append(("claims", key, self.claims.get(key, _MISSING)))
        self.claims[key] = claim

    def set_capacity(self, key: CapacityKey, row: tuple[int, int]) -> None:
        self.log.append(("capacity", key, self.capacity.get(key, _MISSING)))
        self.capacity[key] = row
        self.dirty.add(key)

    def set_generation(self, value: int) -> None:
        self.log.append(("generation", None, self.generation))
        self.generation = value
        self.generation_dirty = True

    def write(self, conn: sqlite3.Connection) -> None:
        """Write the sequence and the capacity rows the group changed (before COMMIT)."""
        for key in self.dirty:
            pending, active = self.capacity[key]
            _write_capacity(conn, key, pending, active)
        if self.generation_dirty:
            conn.execute("INSERT OR REPLACE INTO loc_sequence VALUES (?, ?)",
                         (_SEQUENCE, self.generation))


#: The group commit each connection is running, if any (set by ``connection``).
_groups: dict[sqlite3.Connection, GroupRows] = {}


def open_group(conn: sqlite3.Connection) -> GroupRows:
    """Start sharing rows between the transactions of a group on ``conn``."""
    rows = _groups[conn] = GroupRows()
    return rows


def close_group(conn: sqlite3.Connection) -> None:
    """The group on ``conn`` ended (committed or rolled back)."""
    _groups.pop(conn, None)


def _write_capacity(conn: sqlite3.Connection, key: CapacityKey, pending: int,
                    active: int) -> None:
    if pending or active:
        conn.execute("INSERT OR REPLACE INTO loc_capacity VALUES (?, ?, ?, ?, ?)",
                     (key[0], str(key[1]), key[2], pending, active))
    else:
        conn.execute("DELETE FROM loc_capacity WHERE mesh = ? AND node_rid = ? AND "
                     "lifecycle = ?", (key[0], str(key[1]), key[2]))


def _one(conn: sqlite3.Connection, sql: str, args: tuple[object, ...]) -> Any:
    row = conn.execute(sql, args).fetchone()
    return None if row is None else row[0]


def _load_claim(conn: sqlite3.Connection, key: tuple[str, NodeRid]) -> NodeClaim | None:
    body = _one(conn, "SELECT body FROM loc_claims WHERE mesh = ? AND node_rid = ?",
                (key[0], str(key[1])))
    return None if body is None else decode_claim(body)


def _load_group_claim(conn: sqlite3.Connection, group: GroupRows,
                      key: tuple[str, NodeRid]) -> NodeClaim | None:
    claims = group.claims
    if key in claims:
        return claims[key]
    claim = claims[key] = _load_claim(conn, key)
    return claim


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
        a sequence that was never read. Inside a group commit the view reads and
        writes the group's shared rows (:class:`GroupRows`).
        """
        self._conn = conn
        self._group = group = _groups.get(conn) if _groups else None
        # The loaders hold the connection, never the view: a view referenced from its
        # own Rows would be a reference cycle, garbage that only the cyclic collector
        # frees (three per activation, a third of SQLite's CPU in GC before this).
        capacity: dict[CapacityKey, tuple[int, int]] = (
            {} if group is None else group.capacity)
        self.claims: Rows[tuple[str, NodeRid], NodeClaim] = Rows(
            partial(_load_claim, conn) if group is None
            else partial(_load_group_claim, conn, group))
        self.records: Rows[str, AuthorityRecord] = Rows(partial(_load_record, conn))
        self.lifecycles: Rows[str, int] = Rows(partial(_load_lifecycle, conn))
        self.pending: Rows[CapacityKey, int] = Rows(partial(_load_capacity, conn, capacity, 0))
        self.active: Rows[CapacityKey, int] = Rows(partial(_load_capacity, conn, capacity, 1))
        self._read_generation = generation
        if not generation:
            self._generation = 0
        elif group is not None and group.generation is not None:
            self._generation = group.generation
        else:
            self._generation = int(_one(conn, "SELECT value FROM loc_sequence WHERE name = ?",
                                        (_SEQUENCE,)) or 0)
            if group is not None:
                group.generation = self._generation
        self.state = LocationState(
            claims=self.claims,  # type: ignore[arg-type]  # a Rows stands for the dict
            records=self.records,  # type: ignore[arg-type]
            lifecycles=self.lifecycles,  # type: ignore[arg-type]
            last_generation=self._generation,
            pending=self.pending,  # type: ignore[arg-type]
            active=self.active,  # type: ignore[arg-type]
        )

    def flush(self) -> None:
        """Write every change the oracle made back to the tables (same transaction)."""
        conn = self._conn
        group = self._group
        for claim_key, claim in self.claims.changes():
            mesh, rid = claim_key
            if claim is None:
                conn.execute("DELETE FROM loc_claims WHERE mesh = ? AND node_rid = ?",
                             (mesh, str(rid)))
            else:
                conn.execute("INSERT OR REPLACE INTO loc_claims VALUES (?, ?, ?, ?, ?)",
                             (mesh, str(rid), claim.lifecycle_generation,
                              claim.lease_expires_at, encode_claim(claim)))
            if group is not None:
                group.set_claim(claim_key, claim)
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
        pending_changed, active_changed = self.pending.changed, self.active.changed
        changed = ((pending_changed or set()) | active_changed if active_changed
                   else pending_changed or ())
        for key in changed:
            pending, active = self.pending.get(key, 0), self.active.get(key, 0)
            if group is None:
                _write_capacity(conn, key, pending, active)
            else:  # written once, before the group's COMMIT
                group.set_capacity(key, (pending, active))
        if self.state.last_generation != self._generation:
            assert self._read_generation, "a generation was issued without reading the sequence"
            if group is None:
                conn.execute("INSERT OR REPLACE INTO loc_sequence VALUES (?, ?)",
                             (_SEQUENCE, self.state.last_generation))
            else:
                group.set_generation(self.state.last_generation)

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
- ``[key] = value``, ``del``, ``pop`` change only the cache and remember the key
  (``saved``, a Spot's durable state, is one more such table: ``loc_state``;
  ``reminders``, a Spot's reminders, is the rows of one Spot ID in ``loc_reminders``,
  loaded as one tuple sorted by name and written back whole: its rows deleted, the new
  tuple's inserted);
- enumerating a view is refused (no ``__iter__``): a transaction that would
  scan a table must be written as a bounded SQL query instead.

The oracle checks every precondition before its first write, and all its
writes land in the views; :meth:`LocationView.flush` then writes the remembered
keys back. Everything happens inside one ``BEGIN IMMEDIATE`` transaction
(``connection``), so a raise anywhere -- in a check, a constructor, or SQLite
itself -- rolls back whole, and two processes never interleave. Same checks, same
order, same errors and same return values as ``memory://`` by construction.

**Actor membership.** ``members`` (container -> the IDs of the Actors whose records
name it, as container or as a moving Actor's next container) is not a table but two
indexes of ``loc_records``: the ``container`` and ``next_container`` columns, which
every record write sets from the record itself (NULL on a Spot's row), each under a
partial index (``members``). A container's entry loads with one ``SELECT`` (a range of
each index) and is then overlaid with this transaction's record writes that the view
has not flushed yet, so the oracle reads the members its own records imply at every
moment. Its writes to ``members`` (``add_member`` / ``drop_member``, always beside the
record write they index) are not flushed: the record rows carry them.
:meth:`LocationView.flush` asserts that both agree on every record written.

Inside a group commit the sequence, claim and capacity rows come from the group's
shared rows (``group_rows``); records come from the connection's row cache
(``rowcache``) when it holds them. A record row that existed when the view loaded it
and keeps its owner columns is written with an ``UPDATE`` of the columns that changed
(``state`` and ``body``, or ``body`` alone; ``container`` and ``next_container`` too
when either changes: an Actor's Join or Leave, its move's begin or abort), which leaves
the owner index untouched;
any other record write is an upsert of the whole row, as is an ``UPDATE``
that finds no row (never expected; the whole row is then written).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, cast

from zlink_trio.store.rules.location import CapacityKey, LocationState
from zlink_trio.store.sqlite.codec import (
    REMINDER_COLUMNS,
    decode_claim,
    decode_record,
    decode_reminder,
    encode_claim,
    encode_record,
    reminder_row,
)
from zlink_trio.store.sqlite.group_rows import (
    SEQUENCE,
    UPSERT_SEQUENCE,
    GroupRows,
    group_of,
    write_capacity,
)
from zlink_trio.store.sqlite.members import member_ids
from zlink_trio.store.sqlite.rowcache import ABSENT, cache_of, put
from zlink_trio.store.sqlite.session import updated_known_row
from zlink_trio.store.values import SavedState

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.core.identity import NodeRid
    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.store.sqlite.session import SqlSession
    from zlink_trio.store.values import StoredReminder

__all__ = ("LocationView", "Rows")

K = TypeVar("K")
V = TypeVar("V")

_MISSING: Any = object()


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


def _one(conn: SqlSession, sql: str, args: tuple[object, ...]) -> Any:
    row = conn.execute(sql, args).fetchone()
    return None if row is None else row[0]


def _load_claim(conn: SqlSession, key: tuple[str, NodeRid]) -> NodeClaim | None:
    body = _one(conn, "SELECT body FROM loc_claims WHERE mesh = ? AND node_rid = ?",
                (key[0], str(key[1])))
    return None if body is None else decode_claim(body)


def _load_group_claim(conn: SqlSession, group: GroupRows,
                      key: tuple[str, NodeRid]) -> NodeClaim | None:
    claims = group.claims
    if key in claims:
        return claims[key]
    claim = claims[key] = _load_claim(conn, key)
    return claim


def _load_record(conn: SqlSession, cached: dict[str, Any] | None,
                 loaded: dict[str, AuthorityRecord | None],
                 spot_id: str) -> AuthorityRecord | None:
    """The record row (``cached``: the row cache's records, asked first and filled);
    ``loaded`` remembers what the table held, for :meth:`LocationView.flush`."""
    if cached is not None:
        record = cached.get(spot_id, _MISSING)
        if record is not _MISSING:
            record = loaded[spot_id] = None if record is ABSENT else record
            return cast("AuthorityRecord | None", record)
    body = _one(conn, "SELECT body FROM loc_records WHERE spot_id = ?", (spot_id,))
    record = loaded[spot_id] = None if body is None else decode_record(body)
    if cached is not None:
        put(cached, spot_id, ABSENT if record is None else record)
    return record


def _load_members(conn: SqlSession, records: Rows[str, AuthorityRecord],
                  container: str) -> frozenset[str] | None:
    """The IDs of the Actors whose records name ``container`` (``None``: none).

    The rows the table holds, through the two membership indexes (``members``: one
    range of each, no row read), as ``records`` -- the same transaction's view --
    changed them: a record written but not flushed yet counts by its new value, a
    deleted one not at all.
    """
    ids = member_ids(conn, container)
    for spot_id, record in records.changes():
        if record is not None and _names(record, container):
            ids.add(spot_id)
        else:
            ids.discard(spot_id)
    return frozenset(ids) if ids else None


def _names(record: AuthorityRecord, container: str) -> bool:
    """Whether ``record`` makes its Actor a member of ``container`` (the oracle's rule:
    its container, or its next container while it moves)."""
    return record.container == container or record.next_container == container


def _members_agree(members: Rows[str, frozenset[str]],
                   records: Rows[str, AuthorityRecord]) -> bool:
    """Whether every container entry written lists exactly the written records naming it."""
    written = list(records.changes())
    for container, ids in members.changes():
        for spot_id, record in written:
            names_it = record is not None and _names(record, container)
            if names_it != (ids is not None and spot_id in ids):
                return False
    return True


def _load_saved(conn: SqlSession, spot_id: str) -> SavedState | None:
    row = conn.execute("SELECT version, object_generation, data FROM loc_state "
                       "WHERE spot_id = ?", (spot_id,)).fetchone()
    return None if row is None else SavedState(spot_id=spot_id, data=bytes(row[2]),
                                               version=row[0], object_generation=row[1])


def _load_reminders(conn: SqlSession,
                    spot_id: str) -> tuple[StoredReminder, ...] | None:
    """The reminders of ``spot_id``, sorted by name (``None``: it keeps none)."""
    rows = conn.execute(f"SELECT {REMINDER_COLUMNS} FROM loc_reminders WHERE spot_id = ?",
                        (spot_id,)).fetchall()
    return tuple(sorted(map(decode_reminder, rows), key=lambda r: r.name)) or None


_INSERT_REMINDER: Final = (
    f"INSERT INTO loc_reminders ({REMINDER_COLUMNS}) "
    f"VALUES ({', '.join('?' * (REMINDER_COLUMNS.count(',') + 1))})")


def _load_lifecycle(conn: SqlSession, node_id: str) -> int | None:
    value = _one(conn, "SELECT generation FROM loc_lifecycles WHERE node_id = ?", (node_id,))
    return None if value is None else int(value)


def _load_capacity(conn: SqlSession, rows: dict[CapacityKey, tuple[int, int]],
                   column: int, key: CapacityKey) -> int | None:
    row = rows.get(key)
    if row is None:  # one SELECT serves both counters of the key
        found = conn.execute(
            "SELECT pending, active FROM loc_capacity WHERE mesh = ? AND node_rid = ? "
            "AND lifecycle = ?", (key[0], str(key[1]), key[2])).fetchone()
        row = rows[key] = (0, 0) if found is None else (found[0], found[1])
    return row[column] or None


def _write_record(conn: SqlSession, spot_id: str, record: AuthorityRecord,
                  before: AuthorityRecord | None) -> None:
    """Write one record row; ``before``: the row the table holds, if known."""
    body = encode_record(record)
    container, next_container = record.container, record.next_container
    if (before is not None and before.mesh == record.mesh
            and before.object_generation == record.object_generation
            and before.owner.node_rid == record.owner.node_rid
            and before.owner.lifecycle_generation == record.owner.lifecycle_generation):
        # The owner columns stay: update only what changed (no owner-index write).
        if before.container != container or before.next_container != next_container:
            # An Actor's Join or Leave, or its move's begin or abort.
            updated = updated_known_row(
                conn, "UPDATE loc_records SET state = ?, body = ?, container = ?, "
                "next_container = ? WHERE spot_id = ?",
                (record.state.value, body, container, next_container, spot_id))
        elif before.state is record.state:
            updated = updated_known_row(conn, "UPDATE loc_records SET body = ? WHERE spot_id = ?",
                                        (body, spot_id))
        else:
            updated = updated_known_row(
                conn, "UPDATE loc_records SET state = ?, body = ? WHERE spot_id = ?",
                (record.state.value, body, spot_id))
        if updated:
            return
    conn.execute("INSERT INTO loc_records (spot_id, state, mesh, owner_rid, "
                 "owner_lifecycle, object_generation, body, container, next_container) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (spot_id) DO UPDATE SET "
                 "state = excluded.state, mesh = excluded.mesh, "
                 "owner_rid = excluded.owner_rid, owner_lifecycle = excluded.owner_lifecycle, "
                 "object_generation = excluded.object_generation, body = excluded.body, "
                 "container = excluded.container, next_container = excluded.next_container",
                 (spot_id, record.state.value, record.mesh, str(record.owner.node_rid),
                  record.owner.lifecycle_generation, record.object_generation, body,
                  container, next_container))


class LocationView:
    """The oracle's :class:`LocationState` over the ``loc_*`` tables of one transaction."""

    def __init__(self, conn: SqlSession, *, generation: bool = True) -> None:
        """A view for one transaction; ``generation=False`` skips reading the sequence.

        Only transactions that issue an ObjectGeneration (NewClaim, Reserve) need the
        sequence row; the others save that statement. :meth:`flush` refuses to write
        a sequence that was never read. Inside a group commit the view reads and
        writes the group's shared rows (``group_rows``); inside a write transaction
        it reads and keeps records in the connection's row cache (``rowcache``).
        """
        self._conn = conn
        self._group = group = group_of(conn)
        cache = cache_of(conn)
        self._cached = cached = None if cache is None else cache.records
        self._loaded: dict[str, AuthorityRecord | None] = {}
        # The loaders hold the connection, never the view: a view referenced from its
        # own Rows would be a reference cycle, garbage that only the cyclic collector
        # frees (three per activation, a third of SQLite's CPU in GC before this).
        capacity: dict[CapacityKey, tuple[int, int]] = (
            {} if group is None else group.capacity)
        self.claims: Rows[tuple[str, NodeRid], NodeClaim] = Rows(
            partial(_load_claim, conn) if group is None
            else partial(_load_group_claim, conn, group))
        self.records: Rows[str, AuthorityRecord] = Rows(
            partial(_load_record, conn, cached, self._loaded))
        self.lifecycles: Rows[str, int] = Rows(partial(_load_lifecycle, conn))
        self.pending: Rows[CapacityKey, int] = Rows(partial(_load_capacity, conn, capacity, 0))
        self.active: Rows[CapacityKey, int] = Rows(partial(_load_capacity, conn, capacity, 1))
        # Reads the records view, never the view itself (no cycle, as above).
        self.members: Rows[str, frozenset[str]] = Rows(
            partial(_load_members, conn, self.records))
        self.saved: Rows[str, SavedState] = Rows(partial(_load_saved, conn))
        self.reminders: Rows[str, tuple[StoredReminder, ...]] = Rows(
            partial(_load_reminders, conn))
        self._read_generation = generation
        if not generation:
            self._generation = 0
        elif group is not None and group.generation is not None:
            self._generation = group.generation
        else:
            self._generation = int(_one(conn, "SELECT value FROM loc_sequence WHERE name = ?",
                                        (SEQUENCE,)) or 0)
            if group is not None:
                group.generation = self._generation
        self.state = LocationState(
            claims=self.claims,  # type: ignore[arg-type]  # a Rows stands for the dict
            records=self.records,  # type: ignore[arg-type]
            lifecycles=self.lifecycles,  # type: ignore[arg-type]
            last_generation=self._generation,
            pending=self.pending,  # type: ignore[arg-type]
            active=self.active,  # type: ignore[arg-type]
            members=self.members,  # type: ignore[arg-type]
            saved=self.saved,  # type: ignore[arg-type]
            reminders=self.reminders,  # type: ignore[arg-type]
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
                conn.execute("INSERT INTO loc_claims VALUES (?, ?, ?, ?, ?) ON CONFLICT "
                             "(mesh, node_rid) DO UPDATE SET lifecycle = excluded.lifecycle, "
                             "lease_expires_at = excluded.lease_expires_at, "
                             "body = excluded.body",
                             (mesh, str(rid), claim.lifecycle_generation,
                              claim.lease_expires_at, encode_claim(claim)))
            if group is not None:
                group.set_claim(claim_key, claim)
        cached, loaded = self._cached, self._loaded
        # The members index is the records' container columns: nothing of it to write,
        # but it must be what the records written say (the oracle writes both together).
        assert not self.members.changed or _members_agree(self.members, self.records), (
            "the members index disagrees with the records written in this transaction")
        for spot_id, record in self.records.changes():
            if record is None:
                conn.execute("DELETE FROM loc_records WHERE spot_id = ?", (spot_id,))
            else:
                _write_record(conn, spot_id, record, loaded.get(spot_id))
            if cached is not None:  # after the SQL: the row the table now holds
                put(cached, spot_id, ABSENT if record is None else record)
        for spot_id, saved in self.saved.changes():
            if saved is None:
                conn.execute("DELETE FROM loc_state WHERE spot_id = ?", (spot_id,))
            else:
                conn.execute("INSERT INTO loc_state VALUES (?, ?, ?, ?) ON CONFLICT (spot_id) "
                             "DO UPDATE SET version = excluded.version, "
                             "object_generation = excluded.object_generation, "
                             "data = excluded.data",
                             (spot_id, saved.version, saved.object_generation, saved.data))
        for spot_id, kept in self.reminders.changes():
            # The Spot's tuple is written whole (the oracle replaces it at each write).
            conn.execute("DELETE FROM loc_reminders WHERE spot_id = ?", (spot_id,))
            if kept:
                conn.executemany(_INSERT_REMINDER, map(reminder_row, kept))
        for node_id, generation in self.lifecycles.changes():
            assert generation is not None  # lifecycle generations are never deleted
            conn.execute("INSERT INTO loc_lifecycles VALUES (?, ?) ON CONFLICT (node_id) "
                         "DO UPDATE SET generation = excluded.generation",
                         (node_id, generation))
        pending_changed, active_changed = self.pending.changed, self.active.changed
        changed = ((pending_changed or set()) | active_changed if active_changed
                   else pending_changed or ())
        for key in changed:
            pending, active = self.pending.get(key, 0), self.active.get(key, 0)
            if group is None:
                write_capacity(conn, key, pending, active)
            else:  # written once, before the group's COMMIT
                group.set_capacity(key, (pending, active))
        if self.state.last_generation != self._generation:
            assert self._read_generation, "a generation was issued without reading the sequence"
            if group is None:
                conn.execute(UPSERT_SEQUENCE,
                             (SEQUENCE, self.state.last_generation))
            else:
                group.set_generation(self.state.last_generation)

"""SQL stores: the rows the transactions of one group commit share.

Theory of operation
-------------------
The transactions of one group (SQLite's ``connection``, *Group commit*; PostgreSQL's
``store.postgres.connection``) run inside one transaction that holds the store's write
lock (``BEGIN IMMEDIATE``; the prefix's advisory lock), so nothing but them can change
the tables meanwhile. Concurrent activations touch the same few rows -- the
ObjectGeneration sequence, the owner's claim and its capacity counters -- so while a
group runs, those rows are read once and kept in its :class:`GroupRows`; the sequence
and the capacity counters are also written once, by :meth:`GroupRows.write` just before
the group's ``COMMIT`` (claims are written at once, as every other row). Each body's
changes to these rows are undone when the body is rolled back to its savepoint
(:meth:`GroupRows.undo`), so every body sees exactly what it would have read from the
tables. Only the views (``view``) touch these tables inside a write transaction (the one
raw read, ``new_claim``'s scan of ``loc_claims``, sees claims, which are written at
once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.core.identity import NodeRid
    from zlink_trio.store.rules.location import CapacityKey
    from zlink_trio.store.sqlite.session import SqlSession

__all__ = ("SEQUENCE", "UPSERT_SEQUENCE", "GroupRows", "close_group", "group_of", "open_group",
           "write_capacity")

#: The name of the ObjectGeneration sequence's row in ``loc_sequence``.
SEQUENCE: Final = "object_generation"
#: Writes the sequence's row: ``(SEQUENCE, last ObjectGeneration)``.
UPSERT_SEQUENCE: Final = ("INSERT INTO loc_sequence VALUES (?, ?) ON CONFLICT (name) DO UPDATE "
                          "SET value = excluded.value")
_MISSING: Any = object()


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

    def write(self, conn: SqlSession) -> None:
        """Write the sequence and the capacity rows the group changed (before COMMIT)."""
        for key in self.dirty:
            pending, active = self.capacity[key]
            write_capacity(conn, key, pending, active)
        if self.generation_dirty:
            conn.execute(UPSERT_SEQUENCE,
                         (SEQUENCE, self.generation))


#: The group commit each connection is running, if any (set by ``connection``).
_groups: dict[SqlSession, GroupRows] = {}


def open_group(conn: SqlSession) -> GroupRows:
    """Start sharing rows between the transactions of a group on ``conn``."""
    rows = _groups[conn] = GroupRows()
    return rows


def group_of(conn: SqlSession) -> GroupRows | None:
    """The rows of the group running on ``conn``, or ``None`` outside a group."""
    return _groups.get(conn) if _groups else None


def close_group(conn: SqlSession) -> None:
    """The group on ``conn`` ended (committed or rolled back)."""
    _groups.pop(conn, None)


def write_capacity(conn: SqlSession, key: CapacityKey, pending: int,
                   active: int) -> None:
    """Write one capacity row (deleted when both counters are zero)."""
    if pending or active:
        conn.execute("INSERT INTO loc_capacity VALUES (?, ?, ?, ?, ?) ON CONFLICT "
                     "(mesh, node_rid, lifecycle) DO UPDATE SET pending = excluded.pending, "
                     "active = excluded.active",
                     (key[0], str(key[1]), key[2], pending, active))
    else:
        conn.execute("DELETE FROM loc_capacity WHERE mesh = ? AND node_rid = ? AND "
                     "lifecycle = ?", (key[0], str(key[1]), key[2]))

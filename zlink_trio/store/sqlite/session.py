"""``SqlSession``: the SQL a transaction body runs, on SQLite or on PostgreSQL.

The bodies of the SQL backends' transactions (``view``, ``location``, ``relocation``,
``combined``, ``members``, ``group_rows``) use a connection for two things only:
``execute`` and ``executemany`` with ``?`` placeholders, and a cursor's ``fetchone``,
``fetchall``, iteration and ``rowcount``. A ``sqlite3.Connection`` is one;
``store.postgres.session.PostgresSession`` is the other, over a psycopg connection. The
statements are written in the SQL both accept (standard upserts, ``CAST(? AS TEXT) IS
NULL`` for an optional parameter, columns of the target qualified in ``DO UPDATE``), so
one copy of each serves both backends.

A statement whose count or rows the body reads waits for the answer; on PostgreSQL, whose
write transactions send their statements without waiting (``store.postgres.session``),
that is a round trip to the server. :func:`updated_known_row` is the one write whose
count a body reads on the hot path: an ``UPDATE`` of a row the transaction knows exists.

``SqlDatabase`` is what the stores built on those bodies (``location``, ``relocation``,
``combined``) ask of a backend's connection: run a body as one write transaction, or as
one read. ``connection.SqliteConnection`` and ``store.postgres.connection.
PostgresConnection`` are the two.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar, cast

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from zlink_trio.core.identity import NodeRid
    from zlink_trio.store.rules.location import CapacityKey

__all__ = ("PipelinedSession", "Prefetch", "SqlCursor", "SqlDatabase", "SqlSession", "padded",
           "updated_known_row")

T = TypeVar("T")


class SqlCursor(Protocol):
    """What a body reads of a statement's result."""

    @property
    def rowcount(self) -> int:
        """Rows the statement changed."""
        ...

    def fetchone(self) -> Any:
        """The next row, or ``None``."""
        ...

    def fetchall(self) -> list[Any]:
        """The remaining rows."""
        ...

    def __iter__(self) -> Iterator[Any]:
        """The remaining rows, one by one."""
        ...


class SqlSession(Protocol):
    """A connection inside a transaction the backend opened (see the module docstring)."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> SqlCursor:
        """Run one statement with ``?`` placeholders."""
        ...

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /,
                    ) -> SqlCursor:
        """Run one statement once per parameter row."""
        ...


class Prefetch(NamedTuple):  # made for every write: a tuple is the cheapest to make
    """The rows a write transaction's body will read, named before it runs.

    A backend whose every read is a round trip to a server (PostgreSQL) loads the rows
    the bodies of a group name into the row cache with one statement per table
    (``rowcache.prefetch``), before the first body runs. A hint only saves reads: a row it
    leaves out is read when the body asks for it, a row it names in vain costs a lookup.
    """

    #: Spot IDs whose ``loc_records`` rows the body reads.
    records: tuple[str, ...] = ()
    #: ``(spot_id, object_generation)`` of the ``rel_inboxes`` rows it reads.
    inboxes: tuple[tuple[str, int], ...] = ()
    #: Refs of the ``rel_roots`` rows it reads or inserts.
    roots: tuple[str, ...] = ()
    #: ``(mesh, node_rid)`` of the claims, and the capacity keys, it reads (rows a group
    #: shares: ``group_rows``), and whether it reads the ObjectGeneration sequence.
    claims: tuple[tuple[str, NodeRid], ...] = ()
    capacity: tuple[CapacityKey, ...] = ()
    sequence: bool = False
    #: Spot IDs whose owner's claim and capacity counters the body reads (those of the
    #: record the cache holds then: a caller that knows no mesh names the Spot).
    owners: tuple[str, ...] = ()


class PipelinedSession(SqlSession, Protocol):
    """A session that sends writes without waiting for their answers (PostgreSQL's)."""

    def updated_known_row(self, sql: str, parameters: Sequence[Any], /) -> bool:
        """:func:`updated_known_row` for this session."""
        ...


def updated_known_row(conn: SqlSession, sql: str, parameters: Sequence[Any]) -> bool:
    """Run ``sql``, an ``UPDATE`` of one row this write transaction read or wrote (it
    holds the write lock, so the row exists); whether it changed that row.

    ``False`` is never expected (the caller then writes the row whole). A pipelined
    session answers ``True`` without waiting and sends the statement so that the server
    refuses it unless it changed that row: the transaction then runs again without
    pipelining, where this answers what the statement did (``store.postgres.connection``).
    """
    if isinstance(conn, sqlite3.Connection):
        return bool(conn.execute(sql, parameters).rowcount == 1)
    return cast("PipelinedSession", conn).updated_known_row(sql, parameters)


def padded(keys: list[str]) -> list[str]:
    """``keys`` (at least one) repeated up to the next of a few sizes (1, 4, 16, ...), so
    the statements that read them by ``IN (...)`` are few distinct texts (a server
    prepares each text once)."""
    size = 1
    while size < len(keys):
        size *= 4
    return keys + [keys[-1]] * (size - len(keys))


class SqlDatabase(Protocol):
    """A backend's transactions (see the module docstring)."""

    async def write(self, body: Callable[[SqlSession], T], *, size: int = 0,
                    checks_first: bool = False, reads: Prefetch | None = None) -> T:
        """Run ``body`` as one write transaction; what it returns, or what it raised.

        ``reads``: the rows ``body`` will read, for a backend that loads them ahead
        (``rowcache.prefetch``); the others ignore it.
        """
        ...

    async def read(self, body: Callable[[SqlSession], T], *, size: int = 0,
                   single: bool = False) -> T:
        """Run ``body`` as one read (a consistent snapshot; ``single``: one statement)."""
        ...

    async def read_keyed(self, select: str, key: str) -> Any:
        """The second column of the row ``select`` finds for ``key``, or ``None``.

        ``select`` is ``SELECT key_column, value_column FROM table WHERE key_column IN
        ({})``, ``{}`` standing for the keys' placeholders. A backend whose reads are
        round trips answers the concurrent lookups of one ``select`` with one statement;
        the others run it for ``key`` alone.
        """
        ...

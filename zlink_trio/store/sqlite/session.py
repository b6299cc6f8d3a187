"""``SqlSession``: the SQL a transaction body runs, on SQLite or on PostgreSQL.

The bodies of the SQL backends' transactions (``view``, ``location``, ``relocation``,
``combined``, ``members``, ``group_rows``) use a connection for two things only:
``execute`` and ``executemany`` with ``?`` placeholders, and a cursor's ``fetchone``,
``fetchall``, iteration and ``rowcount``. A ``sqlite3.Connection`` is one;
``store.postgres.session.PostgresSession`` is the other, over a psycopg connection. The
statements are written in the SQL both accept (standard upserts, ``CAST(? AS TEXT) IS
NULL`` for an optional parameter, columns of the target qualified in ``DO UPDATE``), so
one copy of each serves both backends.

``SqlDatabase`` is what the stores built on those bodies (``location``, ``relocation``,
``combined``) ask of a backend's connection: run a body as one write transaction, or as
one read. ``connection.SqliteConnection`` and ``store.postgres.connection.
PostgresConnection`` are the two.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

__all__ = ("SqlCursor", "SqlDatabase", "SqlSession")

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


class SqlDatabase(Protocol):
    """A backend's transactions (see the module docstring)."""

    async def write(self, body: Callable[[SqlSession], T], *, size: int = 0,
                    checks_first: bool = False) -> T:
        """Run ``body`` as one write transaction; what it returns, or what it raised."""
        ...

    async def read(self, body: Callable[[SqlSession], T], *, size: int = 0,
                   single: bool = False) -> T:
        """Run ``body`` as one read (a consistent snapshot; ``single``: one statement)."""
        ...

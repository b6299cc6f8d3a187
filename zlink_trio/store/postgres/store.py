"""PostgreSQL store: :class:`PostgresStore` and :func:`open_postgres_store`.

Theory of operation
-------------------
Both stores live in one PostgreSQL schema (``?prefix=``, ``schema``) and share one
:class:`~zlink_trio.store.postgres.connection.PostgresConnection`. The transactions are
the SQLite backend's, unchanged: its Location Store, Relocation Store and combined
transactions are written against ``store.sqlite.session.SqlDatabase`` /
``SqlSession`` -- the memory oracle (``store.rules``) run over lazy views of the tables,
with statements both databases accept -- and run here on the PostgreSQL connection
instead of a SQLite file. So the checks, their order, the errors and the return values
are the oracle's on both, by construction; what differs is below the transaction:
the write lock is PostgreSQL's advisory lock of the prefix instead of SQLite's file
lock, durability is the server's (``synchronous_commit``), and any number of hosts can
share it.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from zlink_trio.store.postgres.connection import PostgresConnection
from zlink_trio.store.postgres.schema import parse_url
from zlink_trio.store.sqlite.store import SqlStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from zlink_trio.store.postgres.schema import PostgresOptions

__all__ = ("PostgresStore", "open_postgres_store")


class PostgresStore(SqlStore):
    """A Location Store and a Relocation Store in one PostgreSQL schema."""

    def __init__(self, db: PostgresConnection) -> None:
        super().__init__(db)
        self._db = db

    @property
    def options(self) -> PostgresOptions:
        """What the URL selected (server, prefix, timeout, connections)."""
        return self._db.options

    @property
    def connection(self) -> PostgresConnection:
        """The store's connections (its group-commit statistics)."""
        return self._db


@asynccontextmanager
async def open_postgres_store(url: str) -> AsyncIterator[PostgresStore]:
    """Open ``postgresql://...``: connect, create or check the schema.

    Raises :class:`InvalidConfiguration` for a malformed URL, a schema of another
    application or a newer version; :class:`StoreUnavailable` when the server cannot
    be reached. The store's writer task (``connection``) runs in a nursery of its own
    here. The connections are closed when the block exits, after the writes queued by
    then finished.
    """
    options = parse_url(url)
    db = await trio.to_thread.run_sync(PostgresConnection.open_sync, options)
    async with trio.open_nursery() as nursery:
        await nursery.start(db.run_writes)  # ends with aclose, after the queued writes
        try:
            yield PostgresStore(db)
        finally:
            with trio.CancelScope(shield=True):
                await db.aclose()


"""The ``sqlite:///path.db`` backend: both store protocols in one SQLite file.

Theory of operation
-------------------
Several processes on **one host** share the file: SQLite in WAL mode lets
readers run beside the single writer, and every write transaction starts with
``BEGIN IMMEDIATE``, so it takes the write lock before its first read and two
writers never interleave (no lost updates, no upgrade deadlock).

Each store method is one transaction (``connection``): the Location Store's
writes run the memory backend's pure ``txn_*`` functions -- the oracle of
``store.rules`` -- over lazy views of the ``loc_*`` tables (``view``), so the
checks, their order, the errors and the return values are the memory backend's
by construction; reads are bounded SQL queries fed to the same functions. The
Relocation Store (``rel_*`` tables, never shared with ``loc_*``) keeps roots
through the same views and inboxes in SQL that mirrors
``store.rules.relocation_store`` check for check (``relocation``). Both live in
one file, so the combined cold-activation transactions are one transaction
each (``combined``). :class:`SqlStore` is the three stores over any ``SqlDatabase``
(``session``); :class:`SqliteStore` is it on a SQLite file, and ``store.postgres`` on a
PostgreSQL schema.

Durability: a committed transaction survives an application crash with
``synchronous=normal`` (the default) and also a power loss with
``?synchronous=full``. Waiting for another process's lock is bounded by
``?busy_timeout=`` (seconds) and never happens on the Trio thread; past it the
method raises :class:`Unavailable` and nothing was written. See docs/stores.md.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from zlink_trio.store.sqlite.checkpoint import Checkpointer
from zlink_trio.store.sqlite.combined import SqliteCombined
from zlink_trio.store.sqlite.connection import SqliteConnection
from zlink_trio.store.sqlite.location import SqliteLocationStore
from zlink_trio.store.sqlite.relocation import SqliteRelocationStore
from zlink_trio.store.sqlite.schema import parse_url

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from zlink_trio.store.sqlite.schema import SqliteOptions
    from zlink_trio.store.sqlite.session import SqlDatabase

__all__ = ("SqlStore", "SqliteStore", "open_sqlite_store")


class SqlStore:
    """A Location Store and a Relocation Store sharing one SQL database's transactions
    (``session.SqlDatabase``): the SQLite file here, a PostgreSQL schema in
    ``store.postgres``."""

    def __init__(self, db: SqlDatabase) -> None:
        self._location = SqliteLocationStore(db)
        self._relocation = SqliteRelocationStore(db)
        self._combined = SqliteCombined(db)

    @property
    def combined(self) -> SqliteCombined:
        """Both stores share the database: the combined transactions (``combined``)."""
        return self._combined

    @property
    def location(self) -> SqliteLocationStore:
        """The Location Store (``loc_*`` tables)."""
        return self._location

    @property
    def relocation(self) -> SqliteRelocationStore:
        """The Relocation Store (``rel_*`` tables, a separate key space)."""
        return self._relocation


class SqliteStore(SqlStore):
    """A Location Store and a Relocation Store sharing one SQLite connection (and file)."""

    def __init__(self, db: SqliteConnection) -> None:
        super().__init__(db)
        self._db = db

    @property
    def options(self) -> SqliteOptions:
        """What the URL selected (path, synchronous, busy timeout, dispatch)."""
        return self._db.options


@asynccontextmanager
async def open_sqlite_store(url: str) -> AsyncIterator[SqliteStore]:
    """Open ``sqlite:///path.db?...``: WAL, pragmas, schema created or migrated.

    Raises :class:`InvalidConfiguration` for a malformed URL, a file of another
    application or a newer schema version; :class:`Unavailable` when the file
    cannot be opened or stays locked past the busy timeout. The connection is
    closed when the block exits, after any running transaction finished.
    """
    options = parse_url(url)
    db = await trio.to_thread.run_sync(SqliteConnection.open_sync, options)
    if options.dispatch == "inline":
        db.checkpointer = Checkpointer(options, db.limiter)
    try:
        yield SqliteStore(db)
    finally:
        with trio.CancelScope(shield=True):
            await db.aclose()


if TYPE_CHECKING:
    from zlink_trio.store.protocol import (
        CombinedTransactions,
        LocationStore,
        RelocationStore,
        Store,
    )

    def _conforms(store: SqlStore) -> tuple[LocationStore, RelocationStore, Store,
                                            CombinedTransactions]:
        # mypy proves here that the SQL stores (SQLite's, PostgreSQL's) satisfy the
        # protocols.
        return store.location, store.relocation, store, store.combined

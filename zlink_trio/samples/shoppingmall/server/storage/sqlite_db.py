"""One SQLite connection for an application store: WAL, whole transactions off the Trio thread.

Theory of operation
-------------------
The framework's SQLite backend is internal (the sample may use only what
``zlink_trio`` exports), so this is the sample's own, smaller copy of its
pattern:

- ``sqlite3.connect(path, timeout=busy_timeout, isolation_level=None,
  check_same_thread=False)``: autocommit mode, we issue ``BEGIN``/``COMMIT``;
  ``journal_mode = WAL`` (several processes on one host read beside the one
  writer) and ``synchronous = NORMAL`` (a commit survives an application crash).
- A transaction is a plain function ``body(conn) -> T`` run **whole** --
  ``BEGIN IMMEDIATE`` (writes) or ``BEGIN`` (reads), the body, ``COMMIT`` -- in
  one ``trio.to_thread.run_sync`` call under a ``CapacityLimiter(1)``: one
  transaction of this connection at a time, and never a wait for another
  process's lock on the Trio thread. Any exception rolls the transaction back,
  so it is all or nothing even when the body raises halfway.
- The thread is never abandoned: a cancelled caller waits for it (at most the
  busy timeout plus the body) and then sees the cancellation; the transaction
  committed or rolled back whole.
- ``BEGIN IMMEDIATE`` takes the write lock before the first read, so two
  writers (in any process) never interleave: a read-check-write body is a
  compare-and-set.

Failures: ``sqlite3`` errors (a lock held past the busy timeout, a broken
file) become :class:`zlink_trio.StoreUnavailable` chained with ``from``;
errors the body raises on purpose pass through after the rollback.

Each store brings its schema as ``CREATE TABLE IF NOT EXISTS`` statements run
at open in one write transaction, with table names prefixed per store, so the
stores may share a file or use one each (``store_url``: the sample's default is
one file per resource). The framework's Location Store refuses a file holding
other tables: never point a sample store at the Location Store's file.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

import trio

import zlink_trio as zl

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from zlink_trio.samples.shoppingmall.server.storage.store_url import (
        SqliteTarget,
    )

__all__ = ("SqliteDb", "open_sqlite_db")

T = TypeVar("T")


class SqliteDb:
    """One connection and its limiter; see the module docstring."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self._conn = conn
        self.path = path
        self._limiter = trio.CapacityLimiter(1)
        self._closed = False

    async def write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``body`` as one ``BEGIN IMMEDIATE`` transaction and return its result."""
        return await self._run(body, write=True)

    async def read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``body`` as one read transaction (a consistent snapshot)."""
        return await self._run(body, write=False)

    async def _run(self, body: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        if self._closed:
            raise zl.StoreUnavailable(f"SQLite store {self.path!r} is closed; open it again")
        return await trio.to_thread.run_sync(self._transaction, body, write,
                                             limiter=self._limiter)

    def _transaction(self, body: Callable[[sqlite3.Connection], T], write: bool) -> T:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = body(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            raise _unavailable(self.path, error) from error
        return result

    async def aclose(self) -> None:
        """Close after the running transaction, if any, finished (never abandoned)."""
        async with self._limiter:
            if not self._closed:
                self._closed = True
                await trio.to_thread.run_sync(self._conn.close)


def _connect(target: SqliteTarget, schema: Sequence[str]) -> SqliteDb:
    """Open, set the pragmas and create the tables (blocking: run in a worker thread).

    A locked open is tried again every 10-50 ms until ``busy_timeout``: SQLite answers
    "database is locked" at once, without its busy handler, while another process
    switches a fresh file to WAL (the processes of one deployment start together).
    """
    give_up = time.monotonic() + target.busy_timeout
    pause = 0.01
    while True:
        try:
            return _connect_once(target, schema)
        except zl.StoreUnavailable as error:
            if "locked" not in error.message or time.monotonic() + pause > give_up:
                raise
        time.sleep(pause)  # a worker thread: no Trio task waits on this
        pause = min(pause * 2, 0.05)


def _connect_once(target: SqliteTarget, schema: Sequence[str]) -> SqliteDb:
    try:
        conn = sqlite3.connect(target.path, timeout=target.busy_timeout,
                               isolation_level=None, check_same_thread=False)
    except sqlite3.Error as error:
        raise _unavailable(target.path, error) from error
    try:
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise zl.StoreUnavailable(
                    f"SQLite store {target.path!r} refused WAL mode ({mode}); use a file on "
                    "a local filesystem")
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as error:
            raise _unavailable(target.path, error) from error
        db = SqliteDb(conn, target.path)

        def create(c: sqlite3.Connection) -> None:
            for statement in schema:
                c.execute(statement)

        db._transaction(create, write=True)
    except BaseException:
        conn.close()
        raise
    return db


@asynccontextmanager
async def open_sqlite_db(target: SqliteTarget, schema: Sequence[str]) -> AsyncIterator[SqliteDb]:
    """Open ``target`` with ``schema`` created; closed (after any transaction) on exit.

    Raises :class:`zlink_trio.StoreUnavailable` when the file cannot be opened,
    refuses WAL, or stays locked past the busy timeout.
    """
    db = await trio.to_thread.run_sync(_connect, target, tuple(schema))
    try:
        yield db
    finally:
        with trio.CancelScope(shield=True):
            await db.aclose()


def _unavailable(path: str, error: sqlite3.Error) -> zl.StoreUnavailable:
    text = str(error)
    if isinstance(error, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return zl.StoreUnavailable(
            f"SQLite store {path!r} is locked by another connection past the busy timeout "
            f"({error}); nothing was written, retry later or raise ?busy_timeout=")
    return zl.StoreUnavailable(f"SQLite store {path!r} failed: {error}; nothing was written")

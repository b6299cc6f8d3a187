"""PostgreSQL store: the connections, every transaction, and the group commit of writes.

Theory of operation
-------------------
psycopg has no Trio backend (psycopg issue #29), so the store keeps synchronous psycopg
connections and runs every transaction in a Trio worker thread: the loop never waits on
the server. Each connection is in autocommit mode with the transaction statements
issued here, its ``search_path`` the prefix's schema, its ``application_name``
``zlink_trio:<prefix>`` (what an operator sees in ``pg_stat_activity``), and
``statement_timeout`` and ``lock_timeout`` the URL's ``timeout``, so a statement or a
lock wait that takes longer fails with :class:`StoreUnavailable` instead of hanging.

**Writes** (:meth:`PostgresConnection.write`) go through one writer connection. Every
write transaction first takes the prefix's transaction-scoped advisory lock
(``pg_advisory_xact_lock``): the writers of every process on this prefix run one at a
time, exactly as SQLite's ``BEGIN IMMEDIATE`` makes them, so the oracle
(``store.rules``) run over the tables (``store.sqlite.view``) reads rows that nobody can
change before its transaction commits -- no lost update is possible, whatever the
isolation level, because no two write transactions overlap. Concurrent writes of this
process are *grouped*: the first becomes the leader and runs every write queued by then
(up to :data:`MAX_GROUP`) in one transaction, each body in a savepoint of its own, so a
body's refusal rolls back that body only, and one commit (one WAL flush) serves the
group. A failure of the transaction itself (the connection lost, a lock or statement
timeout) fails every body of the group, nothing of it written.

**Reads** (:meth:`PostgresConnection.read`) use a pool of ``connections`` read
connections: one statement runs on its own (``single``), several in a ``REPEATABLE READ
READ ONLY`` transaction (one snapshot). Reads never wait for writers.

A connection that failed is closed and opened again at its next use. A write or read in
progress when its caller is cancelled runs to its end (it is bounded by the timeouts):
a write then still reports its outcome, as a SQLite write in the worker thread does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import psycopg
import trio

from zlink_trio.core.errors import StoreUnavailable, Unavailable
from zlink_trio.store.postgres.schema import migrate
from zlink_trio.store.postgres.session import PostgresSession

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.store.postgres.schema import PostgresOptions
    from zlink_trio.store.sqlite.session import SqlSession

__all__ = ("MAX_GROUP", "PostgresConnection", "unavailable")

T = TypeVar("T")

#: The most write bodies one group transaction runs.
MAX_GROUP: Final = 256

Conn = psycopg.Connection[Any]


class _WriteLockHeld(Exception):
    """Internal: the prefix's write lock stayed held by another connection past the timeout."""


def unavailable(options: PostgresOptions, error: BaseException) -> StoreUnavailable:
    """The typed error for a PostgreSQL failure of the store ``options`` names."""
    if isinstance(error, _WriteLockHeld):
        return StoreUnavailable(
            f"PostgreSQL store {options.where}: another connection held the store's write "
            f"lock (the prefix's advisory lock) past ?timeout={options.timeout:g} s; nothing "
            "was written, retry later (a process frozen inside a write holds it until its "
            "connection ends)")
    if isinstance(error, psycopg.errors.LockNotAvailable):
        return StoreUnavailable(
            f"PostgreSQL store {options.where}: a lock another connection holds was not "
            f"released within ?timeout={options.timeout:g} s ({error}); nothing was written, "
            "retry later")
    if isinstance(error, psycopg.errors.QueryCanceled):
        return StoreUnavailable(
            f"PostgreSQL store {options.where}: a statement ran past ?timeout="
            f"{options.timeout:g} s ({error}); nothing was written, retry later")
    return StoreUnavailable(f"PostgreSQL store {options.where} failed: {error}; nothing was "
                            "written")


class _Txn:
    """One write body waiting for (or running in) a group transaction."""

    __slots__ = ("body", "error", "finished", "lead", "taken", "value", "wake")

    def __init__(self, body: Callable[[SqlSession], object]) -> None:
        self.body = body
        self.value: object = None
        self.error: BaseException | None = None
        #: Set when it finished, or when it was handed the lead.
        self.wake = trio.Event()
        self.taken = False
        self.finished = False
        self.lead = False

    def outcome(self) -> object:
        if self.error is not None:
            raise self.error
        return self.value


class PostgresConnection:
    """The store's connections and transactions (see the module docstring)."""

    def __init__(self, options: PostgresOptions, writer: Conn) -> None:
        self.options = options
        self._writer: Conn | None = writer
        self._idle_readers: list[Conn] = []
        self._reader_slots = trio.Semaphore(options.connections)
        self._queue: list[_Txn] = []
        self._leading = False
        #: Set whenever no write is running or queued.
        self._idle = trio.Event()
        self._idle.set()
        self._closed = False
        #: Group transactions committed, and the write bodies they ran (statistics).
        self.groups = 0
        self.grouped = 0

    # ------------------------------------------------------------------ connections

    @staticmethod
    def connect(options: PostgresOptions) -> Conn:
        """A new connection set up for the prefix (blocking: call it in a thread)."""
        try:
            conn = psycopg.connect(options.conninfo, autocommit=True,
                                   connect_timeout=max(1, round(options.timeout)),
                                   application_name=f"zlink_trio:{options.prefix}")
        except psycopg.Error as error:
            raise unavailable(options, error) from error
        try:
            milliseconds = max(1, round(options.timeout * 1000))
            conn.execute(f'SET search_path TO "{options.prefix}"')
            conn.execute(f"SET statement_timeout = {milliseconds}")
            conn.execute(f"SET lock_timeout = {milliseconds}")
        except psycopg.Error as error:
            conn.close()
            raise unavailable(options, error) from error
        return conn

    @classmethod
    def open_sync(cls, options: PostgresOptions) -> PostgresConnection:
        """Connect, create or check the schema (``schema.migrate``), and return the store's
        connection (blocking: call it in a thread)."""
        conn = cls.connect(options)
        try:
            migrate(conn, options)
        except psycopg.Error as error:
            conn.close()
            raise unavailable(options, error) from error
        except BaseException:
            conn.close()
            raise
        return cls(options, conn)

    def _check_open(self) -> None:
        if self._closed:
            raise Unavailable(f"PostgreSQL store {self.options.where} is closed")

    # ------------------------------------------------------------------ writes

    async def write(self, body: Callable[[SqlSession], T], *, size: int = 0,
                    checks_first: bool = False) -> T:
        """Run ``body`` in one write transaction, grouped with concurrent writes.

        ``size`` and ``checks_first`` are the SQLite backend's hints; every body here
        runs in a worker thread and a savepoint, so neither changes anything.
        """
        self._check_open()
        txn = _Txn(body)
        self._queue.append(txn)
        if self._leading:
            try:
                await txn.wake.wait()  # finished, or handed the lead
            except trio.Cancelled:
                if txn.taken:  # running in a group now: its outcome stands, report it
                    with trio.CancelScope(shield=True):
                        await txn.wake.wait()
                    return cast("T", txn.outcome())
                self._queue.remove(txn)
                if txn.lead:  # handed the lead as it was cancelled: hand it on
                    self._hand_over()
                raise
            if txn.finished:
                return cast("T", txn.outcome())
        else:
            self._leading = True
            self._idle = trio.Event()
        await self._lead(txn)
        return cast("T", txn.outcome())

    async def _lead(self, txn: _Txn) -> None:
        """Run group transactions of the queued writes until ``txn`` ran in one."""
        try:
            while not txn.finished:
                batch, self._queue = self._queue[:MAX_GROUP], self._queue[MAX_GROUP:]
                for queued in batch:
                    queued.taken = True
                with trio.CancelScope(shield=True):  # bounded by the server's timeouts
                    try:
                        await trio.to_thread.run_sync(self._group, batch)
                    except Exception as error:  # the transaction itself failed
                        failure = (unavailable(self.options, error)
                                   if isinstance(error, psycopg.Error | _WriteLockHeld)
                                   else error)
                        for queued in batch:
                            queued.value, queued.error = None, failure
                for queued in batch:
                    queued.finished = True
                    queued.wake.set()
        finally:
            self._hand_over()

    def _hand_over(self) -> None:
        """Give the lead to the first queued write, or end leading."""
        if self._queue:
            self._queue[0].lead = True
            self._queue[0].wake.set()
        else:
            self._leading = False
            self._idle.set()

    def _writer_conn(self) -> Conn:
        conn = self._writer
        if conn is None or conn.closed:
            conn = self._writer = self.connect(self.options)
        return conn

    def _group(self, batch: list[_Txn]) -> None:
        """One transaction around every body of ``batch`` (in the worker thread)."""
        conn = self._writer_conn()
        try:
            conn.execute("BEGIN")
        except psycopg.OperationalError:
            # A connection the server ended while idle (a restart, pg_terminate_backend):
            # nothing ran on it, so a new one may begin instead.
            conn.close()
            self._writer = None
            conn = self._writer_conn()
            conn.execute("BEGIN")
        session = PostgresSession(conn)
        many = len(batch) > 1
        try:
            try:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self.options.lock_key,))
            except (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable) as error:
                raise _WriteLockHeld(str(error)) from error
            for txn in batch:
                if many:
                    conn.execute("SAVEPOINT zlink_group")
                try:
                    txn.value, txn.error = txn.body(session), None
                except psycopg.OperationalError:
                    raise  # the connection or the transaction is lost: the group fails
                except Exception as error:
                    txn.value = None
                    txn.error = (unavailable(self.options, error)
                                 if isinstance(error, psycopg.Error) else error)
                    if not many:
                        conn.execute("ROLLBACK")
                        return
                    conn.execute("ROLLBACK TO SAVEPOINT zlink_group")
                if many:
                    conn.execute("RELEASE SAVEPOINT zlink_group")
            conn.execute("COMMIT")
        except BaseException:
            self._abandon_writer(conn)
            raise
        self.groups += 1
        self.grouped += len(batch)

    def _abandon_writer(self, conn: Conn) -> None:
        """Roll the failed transaction back; drop the connection if that fails too."""
        try:
            if not conn.closed:
                conn.execute("ROLLBACK")
        except psycopg.Error:
            conn.close()
            self._writer = None

    # ------------------------------------------------------------------ reads

    async def read(self, body: Callable[[SqlSession], T], *, size: int = 0,
                   single: bool = False) -> T:
        """Run ``body`` on a read connection: alone (``single``: one statement) or in a
        ``REPEATABLE READ READ ONLY`` transaction (one snapshot)."""
        self._check_open()
        async with self._reader_slots:
            # The connection travels in a list: the thread may open a new one, or drop
            # it after a failure, and the body may raise either way.
            held: list[Conn | None] = [self._idle_readers.pop() if self._idle_readers
                                       else None]
            try:
                return await trio.to_thread.run_sync(self._read, held, body, single)
            finally:
                conn = held[0]
                if conn is not None and not conn.closed:
                    if self._closed:
                        conn.close()
                    else:
                        self._idle_readers.append(conn)

    def _read(self, held: list[Conn | None], body: Callable[[SqlSession], T],
              single: bool) -> T:
        conn = held[0]
        if conn is not None and not conn.closed:
            try:
                return self._read_on(held, conn, body, single)
            except StoreUnavailable as error:
                # A pooled connection the server ended while idle: a read is safe to run
                # again, once, on a new one.
                if not isinstance(error.__cause__, psycopg.OperationalError):
                    raise
        conn = held[0] = self.connect(self.options)
        return self._read_on(held, conn, body, single)

    def _read_on(self, held: list[Conn | None], conn: Conn,
                 body: Callable[[SqlSession], T], single: bool) -> T:
        try:
            if single:
                return body(PostgresSession(conn))
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                value = body(PostgresSession(conn))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return value
        except psycopg.Error as error:
            conn.close()
            held[0] = None
            raise unavailable(self.options, error) from error

    # ------------------------------------------------------------------ closing

    async def aclose(self) -> None:
        """Refuse new transactions, let the queued writes finish, close every connection."""
        self._closed = True
        await self._idle.wait()
        for conn in [*self._idle_readers, *([self._writer] if self._writer else [])]:
            await trio.to_thread.run_sync(conn.close)
        self._idle_readers.clear()
        self._writer = None

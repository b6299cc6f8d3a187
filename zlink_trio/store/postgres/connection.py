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
(up to :data:`MAX_GROUP`) in one transaction, and one commit (one WAL flush) serves the
group. A group runs as SQLite's does: the rows every body touches are shared
(``store.sqlite.group_rows``), a body that may refuse after writing runs in a savepoint
(one that checks first needs none), and the connection's row cache
(``store.sqlite.rowcache``) keeps rows from one transaction to the next.

*Round trips* are what a transaction costs here (one is ~0.1-0.2 ms; a statement's own
work on the server is tens of µs), so a group is built to wait for few answers:

- the rows the bodies name before they run (``Prefetch``) are loaded into the row cache
  with one statement per table (``rowcache.prefetch``);
- the bodies' statements are *pipelined* (libpq's pipeline mode, ``session.Pipeline``):
  sent without waiting, each prepared once per connection, answered when a body reads a
  result, and all known at the sync before ``COMMIT``;
- the cache is valid while nobody else wrote: right after the lock, the transaction
  reads the store's *write counter* (``schema``: every store's transactions add one
  before their ``COMMIT``, triggers count everyone else's writes), and finds the value
  its own last commit left only when no other writer committed in between.

A failure of the transaction itself (the connection lost, a lock or statement timeout)
fails every body of the group, nothing of it written. A statement the server refused,
a pipelined update of a row the cache said exists that changed none, or a body that
raised after writing without a savepoint cannot be pinned on its body inside a
pipelined group: the group is rolled back and each body runs again in a transaction of
its own, unpipelined, so only the body at fault fails (its own error, typed).

**Reads** (:meth:`PostgresConnection.read`) use a pool of ``connections`` read
connections: one statement runs on its own (``single``), several in a ``REPEATABLE READ
READ ONLY`` transaction (one snapshot). Reads never wait for writers. Lookups of one row
by key (:meth:`PostgresConnection.read_keyed`: a ``find`` before every cold activation)
are *batched*: those that arrive while the previous batch of the same statement runs
are read together, with one statement and one worker thread (a thread hop and a round
trip each cost more client time than the lookup). A lookup joins only a batch whose
statement has not been sent, so it sees every write committed before it began.

A connection that failed is closed and opened again at its next use. A write or read in
progress when its caller is cancelled runs to its end (it is bounded by the timeouts):
a write then still reports its outcome, as a SQLite write in the worker thread does.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import psycopg
import trio

from zlink_trio.core.errors import StoreUnavailable, Unavailable
from zlink_trio.store.postgres.schema import WRITER_SETTING, migrate
from zlink_trio.store.postgres.session import Pipeline, PostgresSession
from zlink_trio.store.sqlite.group_rows import close_group, open_group
from zlink_trio.store.sqlite.rowcache import RowCache, prefetch
from zlink_trio.store.sqlite.session import padded

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.store.postgres.schema import PostgresOptions
    from zlink_trio.store.sqlite.session import Prefetch, SqlSession

__all__ = ("MAX_GROUP", "PostgresConnection", "unavailable")

T = TypeVar("T")

#: The most write bodies one group transaction runs.
MAX_GROUP: Final = 256
#: The prefix's write lock, held to the end of the transaction.
_LOCK: Final = "SELECT pg_advisory_xact_lock(?)"
#: The store's write counter (``schema``): the row cache's write version.
_WRITES: Final = "SELECT value FROM zlink_meta WHERE key = 'writes'"
#: Adds this transaction's write to the counter (its last statement before the sync:
#: the row stays locked only until the ``COMMIT``).
_COUNT_WRITE: Final = ("UPDATE zlink_meta SET value = value + 1 WHERE key = 'writes' "
                       "RETURNING value")

Conn = psycopg.Connection[Any]


class _KnownRowMissed(Exception):
    """Internal: a pipelined update of a row the transaction knew changed other than one."""


class _RunAlone(Exception):
    """Internal: a body of a group failed in a way only a transaction of its own can
    answer (see ``PostgresConnection._group``)."""


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

    __slots__ = ("body", "checks_first", "error", "finished", "lead", "reads", "taken", "value",
                 "wake")

    def __init__(self, body: Callable[[SqlSession], object], checks_first: bool,
                 reads: Prefetch | None) -> None:
        self.body = body
        self.checks_first = checks_first
        self.reads = reads
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


#: The most keys one statement of a batched lookup reads.
_LOOKUP_KEYS: Final = 256


class _Lookup:
    """The keys of one batch of ``read_keyed`` lookups, and what it found."""

    __slots__ = ("done", "error", "keys", "values")

    def __init__(self) -> None:
        self.keys: dict[str, None] = {}  # in arrival order, each once
        self.values: dict[str, object] = {}
        self.error: Exception | None = None
        self.done = trio.Event()


def _lookup(session: SqlSession, select: str, keys: list[str]) -> dict[str, object]:
    """The rows ``select`` finds for ``keys``, key to value (one statement per
    :data:`_LOOKUP_KEYS` keys)."""
    values: dict[str, object] = {}
    for start in range(0, len(keys), _LOOKUP_KEYS):
        chunk = padded(keys[start:start + _LOOKUP_KEYS])
        statement = select.format(", ".join("?" * len(chunk)))
        values.update((row[0], row[1]) for row in session.execute(statement, chunk))
    return values


class PostgresConnection:
    """The store's connections and transactions (see the module docstring)."""

    def __init__(self, options: PostgresOptions, writer: Conn) -> None:
        self.options = options
        self._writer: Conn | None = writer
        self._idle_readers: list[Conn] = []
        #: Each read connection's free cursors (``session``: reused, not made anew).
        self._reader_cursors: dict[Conn, list[psycopg.Cursor[Any]]] = {}
        self._reader_slots = trio.Semaphore(options.connections)
        self._queue: list[_Txn] = []
        self._leading = False
        #: Set whenever no write is running or queued.
        self._idle = trio.Event()
        self._idle.set()
        self._closed = False
        #: Batched lookups (``read_keyed``) by statement: the one gathering keys, and the
        #: one running.
        self._gathering: dict[str, _Lookup] = {}
        self._looking: dict[str, _Lookup] = {}
        #: Rows kept from one write transaction to the next (``store.sqlite.rowcache``).
        self.cache = RowCache()
        #: The writer connection's free cursors (``session``: reused, not made anew), and
        #: the statements its pipelines prepared (``session.Pipeline``).
        self._cursors: list[psycopg.Cursor[Any]] = []
        self._prepared: dict[tuple[str, tuple[int, ...]], bytes] = {}
        #: Group transactions committed, and the write bodies they ran; batches of
        #: ``read_keyed`` read, and the keys they answered (statistics).
        self.groups = 0
        self.grouped = 0
        self.lookup_batches = 0
        self.lookups = 0

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
            # A store's own writes: the write counter's triggers leave them to the
            # connection's count (``schema``).
            conn.execute(f"SET {WRITER_SETTING} = 'on'")
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
                    checks_first: bool = False, reads: Prefetch | None = None) -> T:
        """Run ``body`` in one write transaction, grouped with concurrent writes.

        ``checks_first``: ``body`` does every check that may refuse before its first
        statement that writes, so it needs no savepoint. ``reads``: the rows it will
        read, loaded with the group's others before the first body runs. ``size`` is
        the SQLite backend's hint; every body here runs in a worker thread.
        """
        self._check_open()
        txn = _Txn(body, checks_first, reads)
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
                        failure = self._failure(error)
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

    def _begin(self) -> Conn:
        """The writer connection, inside a ``BEGIN`` (in the worker thread)."""
        conn = self._writer
        if conn is None or conn.closed:
            self._cursors.clear()
            self._prepared.clear()
            conn = self._writer = self.connect(self.options)
        try:
            conn.execute("BEGIN")
        except psycopg.OperationalError:
            # A connection the server ended while idle (a restart, pg_terminate_backend):
            # nothing ran on it, so a new one may begin instead.
            conn.close()
            self._cursors.clear()
            self._prepared.clear()
            conn = self._writer = self.connect(self.options)
            conn.execute("BEGIN")
        return conn

    def _group(self, batch: list[_Txn]) -> None:
        """Run ``batch`` in one pipelined transaction; when a statement of it failed, each
        body again in a transaction of its own (in the worker thread).

        Raises for a failure of the transaction itself (the connection lost, a timeout,
        the write lock held): every body of the group failed, nothing written.
        """
        try:
            self._transaction(batch, pipelined=True)
        except (psycopg.Error, _KnownRowMissed, _RunAlone) as error:
            if isinstance(error, psycopg.OperationalError):
                raise
            # A statement failed (data the server refused, a row an update expected
            # missing; in a pipeline its answer may come while a later body runs), or a
            # body raised after writing: each body runs again alone, unpipelined, and
            # only the one at fault fails.
            for txn in batch:
                try:
                    self._transaction([txn], pipelined=False)
                except Exception as failure:
                    txn.value, txn.error = None, self._failure(failure)
        self.groups += 1
        self.grouped += len(batch)

    def _failure(self, error: Exception) -> Exception:
        """What a write's caller gets for ``error``: a PostgreSQL failure typed, its own
        refusal as it is."""
        return (unavailable(self.options, error)
                if isinstance(error, psycopg.Error | _WriteLockHeld) else error)

    def _transaction(self, batch: list[_Txn], *, pipelined: bool) -> None:
        """``BEGIN``, the write lock, every body of ``batch`` (a savepoint each unless it
        checks first), the group's shared rows, ``COMMIT``; see the module docstring."""
        conn = self._begin()
        cache = self.cache
        session: PostgresSession | None = None
        try:
            with (Pipeline(conn, self._prepared, 2 * self.options.timeout + 1) if pipelined
                  else nullcontext()) as pipeline:
                session = PostgresSession(conn, pipeline, self._cursors)
                try:  # the lock and the counter in one round trip (pipelined)
                    session.execute(_LOCK, (self.options.lock_key,))
                    row = session.execute(_WRITES).fetchone()
                except (psycopg.errors.QueryCanceled,
                        psycopg.errors.LockNotAvailable) as error:
                    raise _WriteLockHeld(str(error)) from error
                # No counter row (deleted by hand): no cache can be trusted.
                version = object() if row is None else int(row[0])
                cache.open(session, version)
                shared = open_group(session)
                prefetch(session, cache, [txn.reads for txn in batch if txn.reads], shared)
                for txn in batch:
                    savepoint = not txn.checks_first
                    if savepoint:
                        session.execute("SAVEPOINT zlink_group")
                    shared.begin()
                    writes = session.writes
                    try:
                        txn.value, txn.error = txn.body(session), None
                    except Exception as error:
                        if isinstance(error, psycopg.Error) or (
                                not savepoint and session.writes != writes):
                            # A statement failed, or the body wrote halfway: alone, its
                            # own outcome (rolled back whole); in a group, each again alone.
                            if len(batch) == 1:
                                raise
                            raise _RunAlone from error
                        txn.value, txn.error = None, error
                        shared.undo()
                        if savepoint:  # rows it wrote are rolled back
                            cache.clear()
                            session.execute("ROLLBACK TO SAVEPOINT zlink_group")
                    if savepoint:
                        session.execute("RELEASE SAVEPOINT zlink_group")
                shared.write(session)
                counted = session.execute(_COUNT_WRITE)
                if pipeline is not None:
                    pipeline.sync()  # every answer known: the counts, any failure
                    if session.unexpected():
                        raise _KnownRowMissed
                row = counted.fetchone()
            conn.execute("COMMIT")
        except BaseException:
            cache.clear()  # nothing of the transaction was written
            cache.version = None
            self._cursors.clear()  # answers may be unread: a cursor pool starts afresh
            self._prepared.clear()  # an aborted pipeline may have skipped a prepare
            self._abandon_writer(conn)
            raise
        finally:
            if session is not None:
                close_group(session)
                cache.close(session)
        # What this commit left, valid for the next transaction -- unless another
        # writer counted a write since this one read the counter.
        cache.version = (row[0] if row is not None and isinstance(version, int)
                         and row[0] == version + 1 else None)
        session.recycle()

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
        session = PostgresSession(conn, None, self._reader_cursors.setdefault(conn, []))
        try:
            if single:
                value = body(session)
            else:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                try:
                    value = body(session)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
        except psycopg.Error as error:
            conn.close()
            self._reader_cursors.pop(conn, None)
            held[0] = None
            raise unavailable(self.options, error) from error
        session.recycle()
        return value

    async def read_keyed(self, select: str, key: str) -> object:
        """``store.sqlite.session.SqlDatabase.read_keyed``, batched: the lookups of one
        ``select`` that arrive while its previous batch runs are read together, with one
        statement (``IN`` the keys) on one read connection, in one worker thread."""
        self._check_open()
        batch = self._gathering.get(select)
        if batch is not None:  # a batch is gathering: join it
            batch.keys[key] = None
            await batch.done.wait()
        else:
            batch = self._gathering[select] = _Lookup()
            batch.keys[key] = None
            # Shielded: joiners wait for this batch, which the timeouts bound.
            with trio.CancelScope(shield=True):
                try:
                    running = self._looking.get(select)
                    if running is not None:  # one batch of a select at a time; gather
                        await running.done.wait()
                    del self._gathering[select]
                    self._looking[select] = batch
                    # Each lookup is one statement's answer (no snapshot across chunks).
                    batch.values = await self.read(
                        lambda session: _lookup(session, select, list(batch.keys)),
                        single=True)
                    self.lookup_batches += 1
                    self.lookups += len(batch.keys)
                except Exception as error:
                    batch.error = error
                finally:
                    if self._looking.get(select) is batch:
                        del self._looking[select]
                    if self._gathering.get(select) is batch:
                        del self._gathering[select]
                    batch.done.set()
            await trio.lowlevel.checkpoint_if_cancelled()
        if batch.error is not None:
            raise batch.error
        return batch.values.get(key)

    # ------------------------------------------------------------------ closing

    async def aclose(self) -> None:
        """Refuse new transactions, let the queued writes finish, close every connection."""
        self._closed = True
        await self._idle.wait()
        for conn in [*self._idle_readers, *([self._writer] if self._writer else [])]:
            await trio.to_thread.run_sync(conn.close)
        self._idle_readers.clear()
        self._reader_cursors.clear()
        self._writer = None

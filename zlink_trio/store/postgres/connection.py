"""PostgreSQL store: the connections, every transaction, and the group commit of writes.

Theory of operation
-------------------
psycopg has no Trio backend (psycopg issue #29), so the store keeps synchronous psycopg
connections and drives their libpq connections itself where a round trip must not hold
a thread (``session.Pipeline``: non-blocking sends, waits for the socket in the Trio
loop), and runs the rest in Trio worker threads: the loop never blocks on the server.
Each connection is in autocommit mode with the transaction statements issued here, its
``search_path`` the prefix's schema, its ``application_name`` ``zlink_trio:<prefix>``
(what an operator sees in ``pg_stat_activity``), and ``statement_timeout`` and
``lock_timeout`` the URL's ``timeout``, so a statement or a lock wait that takes longer
fails with :class:`StoreUnavailable` instead of hanging; every wait for an answer is
bounded too (twice the timeout and a second: none passing means the connection is lost).

**Writes** (:meth:`PostgresConnection.write`) go through one writer connection. Every
write transaction first takes the prefix's transaction-scoped advisory lock
(``pg_advisory_xact_lock``): the writers of every process on this prefix run one at a
time, exactly as SQLite's ``BEGIN IMMEDIATE`` makes them, so the oracle
(``store.rules``) run over the tables (``store.sqlite.view``) reads rows that nobody can
change before its transaction commits -- no lost update is possible, whatever the
isolation level, because no two write transactions overlap. Concurrent writes of this
process are *grouped*: the store's writer task (:meth:`PostgresConnection.run_writes`,
started by ``store.open_postgres_store``) runs every write queued by then (up to
:data:`MAX_GROUP`) in one transaction, and one commit (one WAL flush) serves the group.
A group runs as SQLite's does: the rows every body touches are shared
(``store.sqlite.group_rows``), a body that may refuse after writing runs in a savepoint
(one that checks first needs none), and the connection's row cache
(``store.sqlite.rowcache``) keeps rows from one transaction to the next.

*Round trips* are what a transaction costs here (one is ~0.1-0.2 ms; a statement's own
work on the server is tens of µs), so a group is two (:meth:`PostgresConnection._steps`):

1. ``BEGIN``, the lock, the store's *write counter*, and the rows the bodies name before
   they run (``Prefetch``; one statement per table, ``rowcache.prefetch``) -- sent
   together, answered together;
2. every body's statements, the group's shared rows, the counter's increment and the
   ``COMMIT``, *pipelined* (libpq's pipeline mode: sent without waiting, each statement
   prepared once per connection) and answered together.

The row cache is valid while nobody else wrote: the counter read under the lock equals
the value this connection's last commit left only when no other writer committed in
between (``schema``: every store's transactions add one, triggers count everyone else's
writes); when it differs, the cache empties and the rows it had answered are read in one
more round trip. An ``UPDATE`` of a row the transaction knows (``updated_known_row``)
is sent so that the server refuses it unless it changed exactly that row
(``session.one_row_or_fail``), so its count is never waited for and a wrong one cannot
be committed: the ``COMMIT`` is skipped with everything after the refusal.

*Inline groups.* A group whose every body named its reads runs in the Trio loop: the
bodies are plain functions that never wait, and the two syncs wait for the socket in
the loop (other tasks run meanwhile). A body that asks for an answer anyway (a row no
hint named) raises ``session.WouldWait``: the group is rolled back and runs again in a
worker thread, where a sync may block. Every other group runs in a worker thread from
the start. Inline groups are *chained*: when a group's ``COMMIT`` is sent and writes are
queued, the next group's step 1 goes in the same round trip, so under load a group costs
one round trip. If the first group failed, the server skipped the second's statements
too: the second is queued again as it was.

A failure of the transaction itself (the connection lost, a lock or statement timeout)
fails every body of the group, nothing of it written. A statement the server refused,
an update of a known row that changed none, or a body that raised after writing without
a savepoint cannot be pinned on its body inside a pipelined group: the group is rolled
back and each body runs again in a transaction of its own, unpipelined, in a worker
thread, so only the body at fault fails (its own error, typed).

**Reads** (:meth:`PostgresConnection.read`) use a pool of ``connections`` read
connections: one statement runs on its own (``single``), several in a ``REPEATABLE READ
READ ONLY`` transaction (one snapshot), in a worker thread. Reads never wait for
writers. Lookups of one row by key (:meth:`PostgresConnection.read_keyed`: a ``find``
before every cold activation) are *batched*: those that arrive while the previous batch
of the same statement runs are read together, with one statement, pipelined on an idle
read connection from the Trio loop (a worker thread when none is connected, or after a
failure). A lookup joins only a batch whose statement has not been sent, so it sees
every write committed before it began.

A connection that failed is closed and opened again at its next use (in a worker
thread). A write whose group started runs to its end however its caller is cancelled
(the group is bounded by the timeouts), and reports its outcome, as a SQLite write in
the worker thread does; one cancelled before is removed, nothing of it written. A
caller waits in its write's ``lowlevel.parking.ParkingSlot`` (as SQLite's do), not on a
``trio.Event``: two objects fewer per write for the cyclic collector to meet.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import psycopg
import trio

from zlink_trio.core.errors import InvalidOperation, StoreUnavailable, Unavailable, ZLinkError
from zlink_trio.lowlevel.parking import ParkingSlot
from zlink_trio.store.postgres.schema import WRITER_SETTING, migrate
from zlink_trio.store.postgres.session import Answer, Pipeline, PostgresSession, WouldWait
from zlink_trio.store.sqlite.group_rows import close_group, open_group
from zlink_trio.store.sqlite.rowcache import RowCache, prefetch
from zlink_trio.store.sqlite.session import padded

if TYPE_CHECKING:
    from collections.abc import Callable, Generator

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


class _RunAlone(Exception):
    """Internal: a body of a group failed in a way only a transaction of its own can
    answer (see ``PostgresConnection._group``)."""


class _EndedIdle(Exception):
    """Internal: the writer connection failed before a group's first answer (the server
    ended it while it was idle: a restart, ``pg_terminate_backend``); nothing ran."""


class _WriteLockHeld(Exception):
    """Internal: the prefix's write lock stayed held by another connection past the timeout."""


class _CommitUnanswered(Exception):
    """Internal: the connection failed (its cause) while a transaction's ``COMMIT`` was on
    its way or its answer unread: the server may have committed it."""


def _connection_lost(error: psycopg.Error) -> bool:
    """Whether ``error`` is the connection failing (no answer, or the server ending the
    session: SQLSTATE classes 08 and 57P), not the server refusing a statement."""
    return error.sqlstate is None or error.sqlstate.startswith(("08", "57P"))


#: What a value psycopg cannot send is refused with (its text follows the reason).
_NO_NUL: Final = ("PostgreSQL text holds no NUL character (U+0000): Spot IDs, types and "
                  "other text stored here must not contain one")


def typed_error(options: PostgresOptions, error: BaseException) -> ZLinkError:
    """The typed error for a PostgreSQL failure of a call: text psycopg cannot send (it
    holds a NUL character) is the caller's -- :class:`InvalidOperation`, nothing written;
    any other is :func:`unavailable`'s."""
    if (isinstance(error, psycopg.DataError) and error.sqlstate is None
            and "NUL" in str(error)):
        return InvalidOperation(
            f"PostgreSQL store {options.where}: a value of this call cannot be stored "
            f"({error}); nothing was written -- {_NO_NUL}")
    return unavailable(options, error)


def unavailable(options: PostgresOptions, error: BaseException) -> StoreUnavailable:
    """The typed error for a PostgreSQL failure of the store ``options`` names."""
    if isinstance(error, _CommitUnanswered):
        return StoreUnavailable(
            f"PostgreSQL store {options.where}: the connection failed while this write's "
            f"COMMIT was on its way ({error.__cause__}); it may have been written, re-read "
            "before retrying")
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


class _Txn(ParkingSlot):
    """One write body waiting for (or running in) a group transaction; its caller parks in
    it until the group ran."""

    __slots__ = ("body", "checks_first", "error", "finished", "queue", "reads", "taken",
                 "value")

    def __init__(self, body: Callable[[SqlSession], object], checks_first: bool,
                 reads: Prefetch | None, queue: list[_Txn]) -> None:
        super().__init__()
        self.body = body
        self.checks_first = checks_first
        self.reads = reads
        #: The connection's queue of writes waiting for a group.
        self.queue = queue
        self.value: object = None
        self.error: BaseException | None = None
        self.taken = False  # in a group being run: its outcome will stand
        self.finished = False

    def on_cancel(self) -> bool:
        """A cancelled caller: its write leaves the queue, nothing written -- unless its
        group started (then the caller gets the group's outcome)."""
        if self.taken:
            return False
        self.queue.remove(self)
        return True

    def outcome(self) -> object:
        if self.error is not None:
            raise self.error
        return self.value


class _Running:
    """A group transaction the writer task drives in the Trio loop: its writes, its
    session, and where its steps (``PostgresConnection._steps``) stand."""

    __slots__ = ("batch", "broken", "commit", "ended", "session", "steps")

    def __init__(self, batch: list[_Txn], session: PostgresSession,
                 steps: Generator[object, None, None]) -> None:
        self.batch = batch
        self.session = session
        self.steps = steps
        #: The answer of its ``COMMIT``, once sent.
        self.commit: object = None
        self.ended = False
        #: What failed while its opening was being sent (a value no statement can take):
        #: it fails the group when the group's turn comes (:meth:`resume`).
        self.broken: Exception | None = None

    @property
    def committing(self) -> bool:
        """Its ``COMMIT`` is sent and its answer not read: the last round trip."""
        return self.commit is not None and not self.ended

    def committed(self) -> bool:
        """Its ``COMMIT`` was answered with success."""
        return isinstance(self.commit, Answer) and self.commit.succeeded

    def resume(self, error: psycopg.Error | None) -> None:
        """Its next steps, after a sync (``error``: the sync's, thrown into them); raises
        what fails it."""
        if self.broken is not None:
            raise self.broken
        try:
            step = self.steps.send(None) if error is None else self.steps.throw(error)
        except StopIteration:
            self.ended = True
            return
        if step is not None:
            self.commit = step

    def abandon(self) -> None:
        """It never ran (a group before it failed): its steps closed, nothing of it sent
        was carried out."""
        self.steps.close()


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


def _lookups(select: str, keys: list[str]) -> list[tuple[str, list[str]]]:
    """The statements that read the rows ``select`` finds for ``keys``, with their
    parameters: one per :data:`_LOOKUP_KEYS` keys."""
    statements = []
    for start in range(0, len(keys), _LOOKUP_KEYS):
        chunk = padded(keys[start:start + _LOOKUP_KEYS])
        statements.append((select.format(", ".join("?" * len(chunk))), chunk))
    return statements


def _lookup(session: SqlSession, select: str, keys: list[str]) -> dict[str, object]:
    """The rows ``select`` finds for ``keys``, key to value (in the worker thread)."""
    values: dict[str, object] = {}
    for statement, chunk in _lookups(select, keys):
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
        #: The statements each read connection's pipelines prepared (``_lookup``).
        self._reader_prepared: dict[Conn, dict[tuple[str, tuple[int, ...]], bytes]] = {}
        self._reader_slots = trio.Semaphore(options.connections)
        self._queue: list[_Txn] = []
        #: Set when a write was queued (the writer task waits for it).
        self._queued = trio.Event()
        #: Set when the writer task ended (closed, every queued write run).
        self._stopped = trio.Event()
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
        #: Each wait for the server inside a pipelined transaction (seconds).
        self._wait = 2 * options.timeout + 1
        #: Group transactions run, and the write bodies they ran; those run in a worker
        #: thread (not inline), and those begun with the COMMIT of the one before
        #: (chained); batches of ``read_keyed`` read, and the keys they answered
        #: (statistics).
        self.groups = 0
        self.grouped = 0
        self.threaded_groups = 0
        self.chained_groups = 0
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
        read, loaded with the group's others before the first body runs (a write that
        names them may run in the Trio loop, see *inline groups*). ``size`` is the SQLite
        backend's hint. A caller cancelled before its group started leaves nothing
        written; after, it gets the group's outcome.
        """
        self._check_open()
        queue = self._queue
        txn = _Txn(body, checks_first, reads, queue)
        queue.append(txn)
        self._queued.set()
        await txn.park()
        return cast("T", txn.outcome())

    async def run_writes(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                         ) -> None:
        """The store's writer task (``store.open_postgres_store`` starts it): run the
        queued writes in group transactions until the store is closed and none is left.
        Shielded: only :meth:`aclose` ends it, after the last queued write ran (each
        group is bounded by the server's timeouts)."""
        with trio.CancelScope(shield=True):
            task_status.started()
            try:
                while True:
                    if not self._queue:
                        if self._closed:
                            return
                        self._queued = trio.Event()
                        await self._queued.wait()
                        continue
                    # Every task runnable now queues its write first: larger groups.
                    await trio.lowlevel.checkpoint()
                    batch = self._take()
                    if self._inline_ready(batch):
                        await self._inline_groups(batch)
                    else:
                        await self._run_group(batch)
            finally:
                self._stopped.set()

    def _take(self) -> list[_Txn]:
        """The next group's writes: the oldest queued, at most :data:`MAX_GROUP`."""
        queue = self._queue  # in place: each queued write holds it (``_Txn.on_cancel``)
        batch = queue[:MAX_GROUP]
        del queue[:MAX_GROUP]
        for txn in batch:
            txn.taken = True
        return batch

    def _finished(self, batch: list[_Txn], error: Exception | None = None) -> None:
        """``batch`` ran (``error``: its transaction failed, nothing of it written): each
        caller gets its outcome."""
        failure = None if error is None else self._failure(error)
        for txn in batch:
            if failure is not None:
                txn.value, txn.error = None, failure
            txn.finished = True
            txn.wake()
        self.groups += 1
        self.grouped += len(batch)

    async def _run_group(self, batch: list[_Txn]) -> None:
        """Run ``batch`` alone (:meth:`_group`), then answer its callers."""
        try:
            await self._group(batch)
        except Exception as error:  # the transaction itself failed
            self._finished(batch, error)
        else:
            self._finished(batch)

    async def _group(self, batch: list[_Txn], *, again: bool = False) -> None:
        """Run ``batch`` in one pipelined transaction in a worker thread, or as its failure
        asks (:meth:`_after_failure`). Raises for a failure of the transaction itself (the
        connection lost, a timeout, the write lock held): every body of the group failed,
        nothing written -- unless the connection was lost with the ``COMMIT`` on its way
        (``_CommitUnanswered``: it may have been written)."""
        self.threaded_groups += 1
        try:
            await trio.to_thread.run_sync(self._threaded_transaction, batch, True)
        except Exception as error:
            await self._after_failure(batch, error, again=again)

    async def _after_failure(self, batch: list[_Txn], error: Exception, *,
                             again: bool = False) -> None:
        """The group transaction of ``batch`` failed with ``error`` and was rolled back:
        run it again as the error asks, or raise it (every body failed)."""
        if isinstance(error, WouldWait | _EndedIdle) and not again:
            # A body asked for a row nobody prefetched (the loop must not wait for the
            # server inside a body), or the connection had ended while idle: the group
            # again, in a worker thread (on a new connection).
            await self._group(batch, again=True)
        elif isinstance(error, _RunAlone) or (
                isinstance(error, psycopg.Error)
                and not isinstance(error, psycopg.OperationalError)):
            # A statement failed (data the server refused, an update of a known row that
            # changed none; in a pipeline its answer may come while a later body runs),
            # or a body raised after writing: each body runs again alone, unpipelined,
            # and only the one at fault fails.
            await trio.to_thread.run_sync(self._each_alone, batch)
        else:
            raise error

    def _inline_ready(self, batch: list[_Txn]) -> bool:
        """Whether ``batch`` may run in the Trio loop: the writer connected, and every body
        named the rows it reads (``Prefetch``), so none should wait for an answer."""
        writer = self._writer
        return (writer is not None and not writer.closed
                and all(txn.reads is not None for txn in batch))

    async def _inline_groups(self, batch: list[_Txn]) -> None:
        """Run ``batch`` in the Trio loop, and after it every batch queued meanwhile that
        may run there too: each group's ``BEGIN``, lock and prefetch are sent with the
        ``COMMIT`` of the group before (*chained*), so a group costs one round trip.

        A group that failed is rolled back (nothing of it written) and run again as its
        failure asks (:meth:`_after_failure`); a group chained to it never started, and
        is queued again first.
        """
        conn = self._writer
        assert conn is not None
        pipeline = Pipeline(conn, self._prepared, self._wait, blocking=False)
        started: list[_Running] = []  # the groups begun and not answered, oldest first
        failed: _Running | None = None
        try:
            async with pipeline:  # a failure: rolled back in the pipeline
                started.append(self._start(pipeline, batch))
                while started:
                    error: psycopg.Error | None = None
                    try:
                        await pipeline.sync_async()
                    except psycopg.Error as failure:
                        error = failure
                    current = started[0]
                    if current.committing:
                        # The sync answered its COMMIT (and a chained group's opening):
                        # an error is the chained group's when the COMMIT went through.
                        if error is None or current.committed():
                            self._committed(started.pop(0))
                            if not started:
                                await trio.lowlevel.checkpoint()  # the rest queue theirs
                                self._start_next(pipeline, started)
                                continue
                            current = started[0]
                        elif len(started) > 1:  # skipped by the server: never started
                            chained = started.pop()
                            chained.abandon()
                            self._queue[:0] = chained.batch
                    try:
                        current.resume(error)
                    except Exception:
                        failed = current
                        raise
                    if current.committing:
                        self._start_next(pipeline, started)
        except Exception as error:
            self._forget()
            if conn.closed:
                self._writer = None
            for running in started:
                if running is not failed:  # its outcome unknown: a failure of the pipeline
                    self._finished(running.batch, error)
            if failed is not None:
                try:
                    await self._after_failure(failed.batch, error)
                except Exception as failure:
                    self._finished(failed.batch, failure)
                else:
                    self._finished(failed.batch)

    def _start_next(self, pipeline: Pipeline, started: list[_Running]) -> None:
        """Begin a group of the queued writes on ``pipeline`` if they may run in the Trio
        loop (after the one ``started`` holds, chained to its ``COMMIT``)."""
        head = self._queue[:MAX_GROUP]
        if head and self._inline_ready(head):
            self.chained_groups += bool(started)
            started.append(self._start(pipeline, self._take()))

    def _start(self, pipeline: Pipeline, batch: list[_Txn]) -> _Running:
        """A group of ``batch`` on ``pipeline``, its opening sent (:meth:`_steps`).

        A failure while sending (psycopg refusing a value, before the server sees it)
        does not raise here, where a group before it may still be awaiting its COMMIT's
        answer: the group fails in its turn, after that answer, and is rolled back with
        whatever of its opening was sent."""
        session = PostgresSession(pipeline.connection, pipeline, self._cursors)
        running = _Running(batch, session, self._steps(session, batch))
        try:
            running.resume(None)
        except Exception as error:
            running.broken = error
        return running

    def _committed(self, running: _Running) -> None:
        """``running``'s ``COMMIT`` went through: its last steps, then its callers get their
        outcomes (nothing after the ``COMMIT`` undoes it)."""
        try:
            running.resume(None)
        except Exception:  # its outcomes stand; the row cache is not trusted
            self.cache.clear()
            self.cache.version = None
        running.session.recycle()
        self._finished(running.batch)

    def _each_alone(self, batch: list[_Txn]) -> None:
        """Each body of ``batch`` in a transaction of its own, unpipelined; a body's
        failure is its own outcome (in the worker thread)."""
        for txn in batch:
            try:
                self._threaded_transaction([txn], False)
            except Exception as failure:
                txn.value, txn.error = None, self._failure(failure)

    def _failure(self, error: Exception) -> Exception:
        """What a write's caller gets for ``error``: a PostgreSQL failure typed, its own
        refusal as it is."""
        if isinstance(error, _EndedIdle) and isinstance(error.__cause__, Exception):
            error = error.__cause__
        return (typed_error(self.options, error)
                if isinstance(error, psycopg.Error | _WriteLockHeld | _CommitUnanswered)
                else error)

    def _steps(self, session: PostgresSession, batch: list[_Txn]
               ) -> Generator[object, None, None]:
        """The transaction of ``batch`` on ``session``: ``BEGIN``, the write lock and the
        write counter, the bodies' prefetched rows, every body (a savepoint each unless it
        checks first), the group's shared rows, the counter, ``COMMIT``; see the module
        docstring. At each ``yield`` the driver syncs the pipeline -- every answer sent so
        far read, an error thrown back in here -- and does nothing unpipelined; the last
        yields the ``COMMIT``'s answer."""
        cache = self.cache
        # The rows hinted that the cache holds are not asked for -- unless it is not
        # trusted now (the open would empty it).
        trusted = cache.version is not None
        if not trusted:
            cache.clear()
        shared = open_group(session)
        hints = [txn.reads for txn in batch if txn.reads]
        try:
            try:  # BEGIN, the lock, the counter and the rows hinted: one round trip
                session.execute("BEGIN")
                session.execute(_LOCK, (self.options.lock_key,))
                counter = session.execute(_WRITES)
                load = prefetch(session, cache, hints, shared)
                yield None
            except (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable) as error:
                raise _WriteLockHeld(str(error)) from error
            except psycopg.OperationalError as error:
                raise _EndedIdle from error
            row = counter.fetchone()
            # No counter row (deleted by hand): no cache can be trusted.
            version = object() if row is None else int(row[0])
            stale = version != cache.version
            cache.open(session, version)  # another writer wrote: the cache emptied
            load()  # read under the lock: valid either way
            if stale and trusted and cache.enabled:  # rows the cache held, not asked for
                load = prefetch(session, cache, hints, shared)
                yield None
                load()
            for txn in batch:
                savepoint = not txn.checks_first
                if savepoint:
                    session.execute("SAVEPOINT zlink_group")
                shared.begin()
                writes = session.writes
                try:
                    txn.value, txn.error = txn.body(session), None
                except Exception as error:
                    if isinstance(error, WouldWait):
                        raise
                    if isinstance(error, psycopg.Error) or (
                            not savepoint and session.writes != writes):
                        # A statement failed, or the body wrote halfway: alone, its own
                        # outcome (rolled back whole); in a group, each again alone.
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
            # Pipelined, the COMMIT goes with the bodies' statements: a statement the
            # server refuses -- an update of a known row that changed none included
            # (``session``) -- makes it skip the rest, the COMMIT too.
            try:
                yield session.execute("COMMIT")  # the last round trip (see _Running)
            except psycopg.Error as error:
                if not _connection_lost(error):
                    raise  # the server's answer (a refusal, a timeout, a lock): rolled back
                # The connection failed with the COMMIT sent (or being sent): the server
                # may have committed, so no caller may be told "nothing written".
                raise _CommitUnanswered from error
            row = counted.fetchone()
        finally:
            close_group(session)
            cache.close(session)
        # What this commit left, valid for the next transaction -- unless another
        # writer counted a write since this one read the counter.
        cache.version = (row[0] if row is not None and isinstance(version, int)
                         and row[0] == version + 1 else None)

    def _threaded_transaction(self, batch: list[_Txn], pipelined: bool) -> None:
        """:meth:`_steps` in the worker thread, each sync waiting there."""
        conn = self._writer
        if conn is None or conn.closed:
            self._forget()
            conn = self._writer = self.connect(self.options)
        pipeline = Pipeline(conn, self._prepared, self._wait) if pipelined else None
        session = PostgresSession(conn, pipeline, self._cursors)
        steps = self._steps(session, batch)
        try:
            with pipeline if pipeline is not None else nullcontext():
                failure: psycopg.Error | None = None
                while True:
                    try:
                        steps.send(None) if failure is None else steps.throw(failure)
                    except StopIteration:
                        break
                    failure = None
                    if pipeline is not None:
                        try:
                            pipeline.sync()
                        except psycopg.Error as error:
                            failure = error
        except BaseException:
            self._forget()
            self._abandon_writer(conn)
            raise
        session.recycle()

    def _forget(self) -> None:
        """A write transaction failed (nothing of it written, or its COMMIT's answer lost):
        its connection may have unread answers or lost prepared statements."""
        self.cache.clear()
        self.cache.version = None
        self._cursors.clear()  # answers may be unread: a cursor pool starts afresh
        self._prepared.clear()  # an aborted pipeline may have skipped a prepare

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
            raise typed_error(self.options, error) from error
        session.recycle()
        return value

    async def read_keyed(self, select: str, key: str) -> object:
        """``store.sqlite.session.SqlDatabase.read_keyed``, batched: the lookups of one
        ``select`` that arrive while its previous batch runs are read together, with one
        statement (``IN`` the keys) on one read connection, in one worker thread."""
        self._check_open()
        if "\x00" in key:  # refused here, not in a batch it would fail for every caller
            raise InvalidOperation(f"PostgreSQL store {self.options.where}: {key!r} cannot "
                                   f"be looked up -- {_NO_NUL}")
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
                    batch.values = await self._lookup(select, list(batch.keys))
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

    async def _lookup(self, select: str, keys: list[str]) -> dict[str, object]:
        """The rows ``select`` finds for ``keys``: pipelined on an idle read connection,
        waiting in the Trio loop; in a worker thread when none is connected or this
        failed (a read is safe to run again)."""
        async with self._reader_slots:
            conn = self._idle_readers.pop() if self._idle_readers else None
            if conn is not None and not conn.closed:
                prepared = self._reader_prepared.setdefault(conn, {})
                try:
                    async with Pipeline(conn, prepared, self._wait, blocking=False) as pipeline:
                        answers = [pipeline.send(statement, chunk)
                                   for statement, chunk in _lookups(select, keys)]
                        await pipeline.sync_async()
                    return {row[0]: row[1] for answer in answers for row in answer}
                except psycopg.Error:
                    conn.close()
                finally:
                    if conn.closed or self._closed:
                        conn.close()
                        self._reader_prepared.pop(conn, None)
                        self._reader_cursors.pop(conn, None)
                    else:
                        self._idle_readers.append(conn)
            elif conn is not None:
                self._idle_readers.append(conn)
        return await self.read(lambda session: _lookup(session, select, keys), single=True)

    # ------------------------------------------------------------------ closing

    async def aclose(self) -> None:
        """Refuse new transactions, let the queued writes finish, close every connection."""
        self._closed = True
        self._queued.set()
        await self._stopped.wait()  # the writer task ran every queued write
        for conn in [*self._idle_readers, *([self._writer] if self._writer else [])]:
            await trio.to_thread.run_sync(conn.close)
        self._idle_readers.clear()
        self._reader_cursors.clear()
        self._writer = None

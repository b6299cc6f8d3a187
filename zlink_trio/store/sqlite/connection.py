"""SQLite store: one connection, its transactions, and how they meet the Trio loop.

Theory of operation
-------------------
A :class:`SqliteConnection` owns one ``sqlite3`` connection (autocommit mode:
we issue ``BEGIN``/``COMMIT`` ourselves) and a ``trio.CapacityLimiter(1)``,
so at most one transaction of this connection runs at a time. A transaction
is a plain function ``body(conn) -> T`` run whole between ``BEGIN IMMEDIATE``
(writes; ``BEGIN`` for reads) and ``COMMIT``; any exception rolls it back, so
a transaction is all or nothing even when the body raises halfway.

Two dispatch modes, same semantics:

``thread``
    The whole BEGIN..COMMIT is one ``trio.to_thread.run_sync`` call under the
    per-connection limiter. The thread is never abandoned: a cancelled caller
    waits for it (at most the busy timeout plus the body), then sees the
    cancellation; the transaction either committed or rolled back whole.
``inline``
    The transaction first runs on the Trio thread with ``busy_timeout = 0``:
    it never *waits* for another connection's lock. If SQLite answers
    SQLITE_BUSY (another process holds the write lock) it rolls back and runs
    again in a worker thread, as in ``thread`` mode, with the configured busy
    timeout. Inline work is local disk I/O (no lock waits); with
    ``synchronous=full`` it includes the WAL fsync of each commit.

**Group commit** (``inline``, writes). Write transactions that arrive while another
is about to run share one ``BEGIN IMMEDIATE … COMMIT``: the first caller leads -- it
takes the limiter and yields once (shielded), so every task that is runnable in that
scheduling tick queues its transaction behind it -- then runs them all in arrival
order, each under its own ``SAVEPOINT``. A body that refuses (raises) is rolled back
to its savepoint alone and gets its own error; the others commit together, and every
caller is answered only after the ``COMMIT``. The bodies of a group share the rows they
all touch (``view.GroupRows``: the sequence, claims and capacity counters are read once,
the sequence and counters written once before the ``COMMIT``). One caller alone is one transaction
exactly as before (no savepoint). A failure of the group itself (``COMMIT``, an
error that ends the transaction) rolls all of it back and each caller gets that
error: nothing of the group was written. SQLITE_BUSY sends the whole group to the
worker thread. A caller cancelled while queued is removed (nothing written); once
its group started it gets the group's outcome. This saves the per-transaction
``BEGIN``/``COMMIT`` and the limiter hand-off between concurrent writers.

A read that finds the connection held by a leader gathering its group (below) runs
at once: the connection is idle until the leader resumes, and the read is synchronous.

Every write transaction (group or alone, either dispatch) opens the connection's
row cache (``rowcache``) after its ``BEGIN IMMEDIATE`` and empties it when anything
in it raises.

Failures map to typed errors: SQLITE_BUSY/LOCKED after the busy timeout, and
any other ``sqlite3`` error, is :class:`StoreUnavailable` chained with ``from``;
errors the body raises (StaleFence, AuthorityExists, ...) pass through
after the rollback.

**Outages are logged as episodes** (``lowlevel.outage``): the first
:class:`StoreUnavailable` a read or write raises writes one WARNING on
``zlink_trio.store``, the later ones are counted (a line at most every 30 s), and the
next write that commits writes one INFO -- a write, not a read, because in WAL mode
reads go on while another process holds the write lock, and the episode is the
writes'.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from typing import TYPE_CHECKING, Final, TypeVar, cast

import trio

from zlink_trio.core.errors import StoreUnavailable, Unavailable
from zlink_trio.lowlevel.outage import Outage
from zlink_trio.lowlevel.parking import ParkingSlot
from zlink_trio.store.sqlite.errors import Busy, is_busy, unavailable
from zlink_trio.store.sqlite.group_rows import close_group, open_group
from zlink_trio.store.sqlite.rowcache import RowCache
from zlink_trio.store.sqlite.schema import SqliteOptions, migrate

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.store.sqlite.checkpoint import Checkpointer
    from zlink_trio.store.sqlite.session import Prefetch

__all__ = ("INLINE_MAX_BYTES", "SqliteConnection", "is_busy")

T = TypeVar("T")

#: Largest payload an inline transaction moves; bigger ones go to the worker thread.
INLINE_MAX_BYTES: Final = 256 * 1024

LOGGER: Final = logging.getLogger("zlink_trio.store")

class _Txn(ParkingSlot):
    """One queued write transaction of a group (see *Group commit*); its caller parks
    in it until its group ran (or it leads the next one)."""

    __slots__ = ("body", "checks_first", "error", "lead", "queue", "taken", "value")

    def __init__(self, body: Callable[[sqlite3.Connection], object], queue: list[_Txn],
                 checks_first: bool = False) -> None:
        super().__init__()
        self.body = body
        #: The body raises only before its first write (see :meth:`SqliteConnection.write`).
        self.checks_first = checks_first
        #: The connection's queue of transactions waiting for the next group.
        self.queue = queue
        self.taken = False
        self.lead = False  # woken to lead the next group, not with an outcome
        self.value: object = None
        self.error: BaseException | None = None

    def on_cancel(self) -> bool:
        """A cancelled caller: its transaction leaves the queue, unless its group runs
        (then the caller gets the group's outcome)."""
        if self.taken:
            return False
        self.queue.remove(self)  # never started: nothing written
        return True


class SqliteConnection:
    """One connection and its limiter; see the module docstring."""

    def __init__(self, conn: sqlite3.Connection, options: SqliteOptions) -> None:
        self._conn = conn
        self.options = options
        self._limiter = trio.CapacityLimiter(1)
        self._wait_ms = round(options.busy_timeout * 1000)
        self._waiting = True  # the connection's busy_timeout is _wait_ms (else 0)
        self._closed = False
        self._queue: list[_Txn] = []
        #: Inline dispatch: WAL checkpoints in a worker thread (``checkpoint``).
        self.checkpointer: Checkpointer | None = None
        self._leading = False  # a leader will take the queued transactions
        self._gathering = False  # a leader holds the limiter; the connection is idle
        #: Rows kept between this connection's write transactions (``rowcache``).
        self.cache = RowCache()
        #: The store's outage episodes (see *Outages* above).
        self.outage = Outage(LOGGER, f"the SQLite store {options.path!r}")
        #: Groups committed and the transactions in them (benchmark figures).
        self.groups = 0
        self.grouped = 0

    @property
    def limiter(self) -> trio.CapacityLimiter:
        """The limiter every transaction of this connection holds (one at a time)."""
        return self._limiter

    @classmethod
    def open_sync(cls, options: SqliteOptions) -> SqliteConnection:
        """Open, apply the pragmas and create/migrate the schema (blocking; run in a thread).

        Several processes opening one fresh file at once can be told "database is
        locked" at once -- SQLite does not call the busy handler while another
        connection switches the file to WAL or recovers its index -- so a locked open
        is tried again, every 10-50 ms, until ``busy_timeout`` has passed since the
        first try; only then is it :class:`StoreUnavailable`.
        """
        give_up = time.monotonic() + options.busy_timeout
        pause = 0.01
        while True:
            try:
                return cls._open_once(options)
            except StoreUnavailable as error:
                if "locked" not in error.message or time.monotonic() + pause > give_up:
                    raise
            time.sleep(pause)  # a worker thread: blocking here blocks no Trio task
            pause = min(pause * 2, 0.05)

    @classmethod
    def _open_once(cls, options: SqliteOptions) -> SqliteConnection:
        directory = os.path.dirname(options.path)
        if directory and not os.path.isdir(directory):
            raise StoreUnavailable(
                f"cannot open SQLite store {options.path!r}: its directory {directory!r} does "
                "not exist; create it first (the path after sqlite:// is absolute: "
                "sqlite:///var/lib/app/zlink.db)")
        try:
            conn = sqlite3.connect(options.path, timeout=options.busy_timeout,
                                   isolation_level=None, check_same_thread=False)
        except sqlite3.Error as error:
            raise StoreUnavailable(f"cannot open SQLite store {options.path!r}: {error}") from error
        try:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise Unavailable(f"SQLite store {options.path!r} refused WAL mode ({mode})")
                conn.execute(f"PRAGMA synchronous = {options.synchronous.upper()}")
                if options.dispatch == "inline":  # checkpoints run in a thread instead
                    conn.execute("PRAGMA wal_autocheckpoint = 0")
                self = cls(conn, options)
                self._transaction(lambda c: migrate(c, options.path), write=True)
            except sqlite3.Error as error:
                raise unavailable(options.path, error) from error
        except BaseException:
            conn.close()
            raise
        return self

    async def write(self, body: Callable[[sqlite3.Connection], T], *, size: int = 0,
                    checks_first: bool = False, reads: Prefetch | None = None) -> T:
        """Run ``body`` as one ``BEGIN IMMEDIATE`` transaction.

        ``size`` is the payload the body moves, in bytes; above
        :data:`INLINE_MAX_BYTES` the transaction always runs in the worker
        thread, so hashing or copying a large root never stalls the loop.

        ``checks_first``: the body does every check that may refuse before its first
        write, so in a group it needs no savepoint -- a refusal has written nothing.
        Should it still fail after writing (SQLite failing halfway), the whole group
        fails, as when an error ends the transaction: nothing of it is written.

        ``reads`` is ignored: a read of the file costs no round trip.
        """
        if self._closed:
            raise Unavailable(f"SQLite store {self.options.path!r} is closed")
        try:
            if self.options.dispatch == "thread" or size > INLINE_MAX_BYTES:
                result = await trio.to_thread.run_sync(self._transaction, body, True,
                                                       limiter=self._limiter)
            else:
                result = cast("T", await self._grouped(body, checks_first))
        except StoreUnavailable as error:
            self.outage.failed(error.message)
            raise
        if self.outage.down:
            self.outage.recovered()
        if self.checkpointer is not None:
            self.checkpointer.committed()
        return result

    async def read_keyed(self, select: str, key: str) -> object:
        """``session.SqlDatabase.read_keyed``: one read of ``key`` alone (a read of the
        file costs no round trip to share)."""
        statement = select.format("?")

        def body(conn: sqlite3.Connection) -> object:
            row = conn.execute(statement, (key,)).fetchone()
            return None if row is None else row[1]
        return await self.read(body, single=True)

    async def read(self, body: Callable[[sqlite3.Connection], T], *, size: int = 0,
                   single: bool = False) -> T:
        """Run ``body`` as one read transaction (a consistent snapshot); see :meth:`write`.

        ``single``: the body runs exactly one statement, which SQLite makes atomic on
        its own, so no ``BEGIN``/``COMMIT`` is issued around it.
        """
        if self._closed:
            raise Unavailable(f"SQLite store {self.options.path!r} is closed")
        try:
            if self.options.dispatch == "thread" or size > INLINE_MAX_BYTES:
                return await trio.to_thread.run_sync(self._read, body, single,
                                                     limiter=self._limiter)
            # ``async with limiter`` without its bookkeeping when the connection is free:
            # the same cancellation check first and the same one schedule point.
            await trio.lowlevel.checkpoint_if_cancelled()
            limiter = self._limiter
            try:
                limiter.acquire_nowait()
            except trio.WouldBlock:
                if self._gathering:  # the holder waits for its group: the connection is idle
                    try:
                        result = self._read(body, single, wait=False)
                    except Busy:
                        pass  # another connection's lock: wait in turn, as below
                    else:
                        await trio.lowlevel.cancel_shielded_checkpoint()
                        return result
                async with limiter:
                    return await self._read_inline(body, single)
            try:
                result = await self._read_inline(body, single)
            finally:
                limiter.release()
            await trio.lowlevel.cancel_shielded_checkpoint()
            return result
        except StoreUnavailable as error:
            self.outage.failed(error.message)
            raise

    async def _read_inline(self, body: Callable[[sqlite3.Connection], T], single: bool) -> T:
        """A read on the Trio thread, or in the worker thread when another holds the lock
        (the caller holds the limiter)."""
        try:
            return self._read(body, single, wait=False)
        except Busy:
            pass
        # Another connection holds the lock: wait for it off the Trio thread.
        return await trio.to_thread.run_sync(self._read, body, single)

    def _read(self, body: Callable[[sqlite3.Connection], T], single: bool, *,
              wait: bool = True) -> T:
        return self._transaction(body, False, wait=wait, single=single)

    def _failure(self, error: sqlite3.Error, wait: bool) -> Exception:
        """What a SQLite error becomes: Busy (retry in the thread) when not waiting."""
        return Busy() if not wait and is_busy(error) else unavailable(self.options.path,
                                                                          error)

    def _set_wait(self, wait: bool) -> None:
        if wait != self._waiting:
            self._conn.execute(f"PRAGMA busy_timeout = {self._wait_ms if wait else 0}")
            self._waiting = wait

    def _transaction(self, body: Callable[[sqlite3.Connection], T], write: bool, *,
                     wait: bool = True, single: bool = False) -> T:
        """BEGIN..COMMIT around ``body``; rolls back on any exception.

        ``single`` (reads only): ``body`` runs one statement, atomic on its own.
        """
        conn = self._conn
        try:
            self._set_wait(wait)
            if single:
                return body(conn)
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                if write:
                    self.cache.open(conn, _data_version(conn))
                result = body(conn)
                conn.execute("COMMIT")
            except BaseException:
                if write:
                    self.cache.clear()  # what it wrote is rolled back
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                if write:
                    self.cache.close(conn)
        except sqlite3.Error as error:
            raise self._failure(error, wait) from error
        return result

    async def _grouped(self, body: Callable[[sqlite3.Connection], object],
                       checks_first: bool = False) -> object:
        """One write transaction, committed in a group with its concurrent peers."""
        txn = _Txn(body, self._queue, checks_first)
        self._queue.append(txn)
        if self._leading:
            await txn.park()
            if not txn.lead:
                return _outcome(txn)
        else:
            self._leading = True
        await self._lead(txn)
        return _outcome(txn)

    async def _lead(self, mine: _Txn) -> None:
        limiter = self._limiter
        try:
            limiter.acquire_nowait()
        except trio.WouldBlock:
            try:  # a thread transaction holds the connection: wait for it
                await limiter.acquire()
            except BaseException:
                self._queue.remove(mine)
                if self._queue:  # hand the lead to the next queued transaction
                    self._queue[0].lead = True
                    self._queue[0].wake()
                else:
                    self._leading = False
                raise
        else:
            # Shielded: let every runnable peer queue its transaction behind ours. The
            # connection is idle meanwhile, so a read runs at once (``read``).
            self._gathering = True
            try:
                await trio.lowlevel.cancel_shielded_checkpoint()
            finally:
                self._gathering = False
        batch, self._queue, self._leading = self._queue, [], False
        for txn in batch:
            txn.taken = True
        try:
            try:
                if self.checkpointer is not None and self.checkpointer.take_restart():
                    # This commit restarts the WAL, which fsyncs its header: off the loop.
                    await trio.to_thread.run_sync(self._group, batch, True)
                else:
                    self._group(batch, wait=False)
            except Busy:
                # Another connection holds the lock: wait for it off the Trio thread.
                await trio.to_thread.run_sync(self._group, batch, True)
        except BaseException as error:
            for txn in batch:
                txn.error = error
            if not isinstance(error, Exception):
                _wake(batch, mine)
                raise
        finally:
            limiter.release()
        self.groups += 1
        self.grouped += len(batch)
        _wake(batch, mine)

    def _group(self, batch: list[_Txn], wait: bool) -> None:
        """BEGIN..COMMIT around every body of ``batch``, a savepoint each if several.

        Raises for a failure of the whole group (all rolled back); a body's own refusal
        is recorded on its transaction only.
        """
        if len(batch) == 1:
            txn = batch[0]
            txn.value, txn.error = self._transaction(txn.body, True, wait=wait), None
            return
        conn = self._conn
        try:
            self._set_wait(wait)
            conn.execute("BEGIN IMMEDIATE")
            shared = open_group(conn)  # the rows every body of the group shares
            try:
                self.cache.open(conn, _data_version(conn))
                for txn in batch:
                    txn.value, txn.error = None, None
                    # A body that checks before it writes needs no savepoint: it is
                    # refused with nothing written (total_changes tells if it wrote).
                    savepoint = not txn.checks_first
                    if savepoint:
                        conn.execute("SAVEPOINT zlink_group")
                    changes = conn.total_changes
                    shared.begin()
                    try:
                        txn.value = txn.body(conn)
                    except Exception as error:
                        if not conn.in_transaction or (
                                isinstance(error, sqlite3.Error) and is_busy(error)) or (
                                not savepoint and conn.total_changes != changes):
                            raise  # the whole group is lost
                        if savepoint:
                            conn.execute("ROLLBACK TO zlink_group")
                        shared.undo()
                        self.cache.clear()  # rows it wrote are rolled back
                        txn.error = (unavailable(self.options.path, error)
                                     if isinstance(error, sqlite3.Error) else error)
                    # Released, not left open: every open savepoint makes each later
                    # page write costlier (twice the time per body with ~70 left open).
                    if savepoint:
                        conn.execute("RELEASE zlink_group")
                shared.write(conn)
                conn.execute("COMMIT")
            except BaseException:
                self.cache.clear()  # nothing of the group was written
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                close_group(conn)
                self.cache.close(conn)
        except sqlite3.Error as error:
            raise self._failure(error, wait) from error

    async def aclose(self) -> None:
        """Close after any running transaction and checkpoint finished (never abandoned)."""
        if self.checkpointer is not None:
            await self.checkpointer.aclose()
        async with self._limiter:
            if not self._closed:
                self._closed = True
                await trio.to_thread.run_sync(self._conn.close)


def _outcome(txn: _Txn) -> object:
    if txn.error is not None:
        raise txn.error
    return txn.value


def _wake(batch: list[_Txn], mine: _Txn) -> None:
    for txn in batch:
        if txn is not mine:
            txn.wake()


def _data_version(conn: sqlite3.Connection) -> int:
    """The row cache's write version: ``PRAGMA data_version`` (see ``rowcache``)."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])

"""SQLite store: WAL checkpoints in a worker thread, never on the Trio thread.

Theory of operation
-------------------
In WAL mode every commit appends pages to the ``-wal`` file; a *checkpoint*
copies them back into the database file and, with ``synchronous=normal``,
fsyncs it. SQLite runs one automatically inside the ``COMMIT`` that pushes the
WAL past 1,000 pages. With ``dispatch=inline`` that ``COMMIT`` runs on the Trio
thread, so every few hundred activations the whole event loop stood still for
the checkpoint's copy and fsync (20-50 ms measured here: most of the time the
SQLite backend spent waiting).

So an inline connection turns SQLite's automatic checkpoint off
(``PRAGMA wal_autocheckpoint = 0``) and a :class:`Checkpointer` does the work:
after every :data:`CHECKPOINT_EVERY` write transactions it runs
``PRAGMA wal_checkpoint(PASSIVE)`` on a connection of its own in a worker
thread. A passive checkpoint takes no write lock and never waits, so this
process's transactions go on committing while it copies. At most one runs at a
time; commits meanwhile count towards the next.

Copying is not enough to bound the WAL: SQLite restarts it from its beginning
only when a writer finds *every* frame copied back, which never happens while
commits keep landing during each checkpoint (measured: the WAL grew by ~30 MB
per 1,000 activations). So when the WAL holds at least :data:`RESTART_FRAMES`
frames (SQLite's own threshold) as a checkpoint ends (see below), the next one
runs **holding the store connection's limiter** -- the one every transaction
of this process takes: it copies only what came since the last round, and no
commit of this process lands meanwhile. Other tasks go on running; the
transactions wait on an ``await``, not on a stalled loop. The first commit after
that complete checkpoint restarts the WAL and fsyncs its new header (even with
``synchronous=normal``), so :meth:`Checkpointer.take_restart` sends that one
group to the worker thread too.

A passive checkpoint that runs slowly -- the worker thread waits for a core on
a loaded machine, the disk is slow -- would let any number of commits land
meanwhile, and the WAL would grow with how late the thread is, not with what
this process writes per round. So once :data:`MAX_COMMITS_DURING_CHECKPOINT`
write transactions landed while one checkpoint runs, the store connection's
limiter is taken on behalf of that checkpoint as soon as it is free: the
transactions that come next wait (on an ``await``, as in a catch-up) until it
ended. And since the frames a checkpoint reports are those the WAL had when it
began, the catch-up is decided on them plus what the transactions that landed
since wrote (as many frames each as those before them). The WAL thus stays
below about :data:`RESTART_FRAMES` frames plus what :data:`CHECKPOINT_EVERY` +
:data:`MAX_COMMITS_DURING_CHECKPOINT` transactions and two groups write,
however fast the worker thread runs (other processes writing during the
catch-up can delay the restart, as they can SQLite's own).

``dispatch=thread`` keeps SQLite's automatic checkpoint: it already runs off the
Trio thread.

Durability is unchanged: a commit is durable (or not, with ``normal``) exactly
as before; only *which thread* copies WAL pages back differs. A failed
checkpoint is logged and retried at the next round; it loses nothing (the
pages stay in the WAL). :meth:`Checkpointer.aclose` waits for a running
checkpoint (it is never abandoned) and closes its connection.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from typing import TYPE_CHECKING, Final

import outcome
import trio

if TYPE_CHECKING:
    from zlink_trio.store.sqlite.schema import SqliteOptions

__all__ = ("CHECKPOINT_EVERY", "MAX_COMMITS_DURING_CHECKPOINT", "RESTART_FRAMES",
           "Checkpointer")

#: Write transactions between two checkpoints (a transaction writes a handful of pages,
#: fewer when group commit shares them).
CHECKPOINT_EVERY: Final = 128
#: Write transactions that may land while one checkpoint runs; the next ones wait for it
#: to end (it has fallen behind the writers; see the module docstring).
MAX_COMMITS_DURING_CHECKPOINT: Final = 2 * CHECKPOINT_EVERY
#: WAL frames (pages) from which the next checkpoint holds the writers to restart the
#: WAL (SQLite's ``wal_autocheckpoint`` default).
RESTART_FRAMES: Final = 1000

LOGGER: Final = logging.getLogger("zlink_trio.store")


class Checkpointer:
    """Passive WAL checkpoints of one database file, one at a time, in a worker thread."""

    def __init__(self, options: SqliteOptions, limiter: trio.CapacityLimiter) -> None:
        self._options = options
        self._limiter = limiter
        self._conn: sqlite3.Connection | None = None
        self._token = trio.lowlevel.current_trio_token()
        self._idle = trio.Event()
        self._idle.set()
        self._closed = False
        self._restart = False
        self._catch_up = False  # the next checkpoint holds the limiter
        self._holding = False  # the limiter is held on behalf of the running checkpoint
        self._held_from_start = False  # ... since it began: nothing landed during it
        self._commits = 0  # since the last checkpoint began
        #: Write transactions in the WAL since it last restarted, when that checkpoint began.
        self._in_wal = 0
        #: Checkpoints finished (benchmark and test figure).
        self.checkpoints = 0

    def committed(self) -> None:
        """Count one write transaction; start a checkpoint when one is due and none runs,
        or hold the writers when too many landed while one runs."""
        self._commits += 1
        if self._commits < CHECKPOINT_EVERY or self._closed:
            return
        if not self._idle.is_set():
            if self._commits >= MAX_COMMITS_DURING_CHECKPOINT and not self._holding:
                # The running checkpoint fell behind the writers: they wait for its end.
                self._holding = self._hold()
            return
        if self._catch_up:
            if not self._hold():
                return  # a transaction runs: try again at the next commit
            self._holding = self._held_from_start = True
        self._in_wal += self._commits
        self._commits = 0
        self._idle = trio.Event()
        trio.lowlevel.start_thread_soon(self._checkpoint, self._deliver)

    def _hold(self) -> bool:
        """Take the limiter on behalf of this object (released from :meth:`_finished`)
        if it is free."""
        try:
            self._limiter.acquire_on_behalf_of_nowait(self)
        except trio.WouldBlock:
            return False
        return True

    def take_restart(self) -> bool:
        """Whether the next commit restarts the WAL (asked once per group; resets)."""
        restart, self._restart = self._restart, False
        return restart

    def _checkpoint(self) -> tuple[int, int, int]:
        """Worker thread; never two at once (``_idle`` is unset while one runs).

        SQLite's answer: (busy, frames in the WAL, frames copied back).
        """
        if self._conn is None:
            self._conn = sqlite3.connect(self._options.path, isolation_level=None,
                                         check_same_thread=False)
        busy, log, copied = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(busy), int(log), int(copied)

    def _deliver(self, result: outcome.Outcome[tuple[int, int, int]]) -> None:
        # Worker thread: hand the outcome to the Trio thread.
        with contextlib.suppress(trio.RunFinishedError):  # the run ended unclosed
            self._token.run_sync_soon(self._finished, result)

    def _finished(self, result: outcome.Outcome[tuple[int, int, int]]) -> None:
        held, self._held_from_start = self._held_from_start, False
        if self._holding:
            self._holding = False
            self._limiter.release_on_behalf_of(self)
        if isinstance(result, outcome.Value):
            busy, log, copied = result.value
            # Held: nothing landed meanwhile, so all copied means the next writer restarts.
            self._restart = held and not busy and 0 < log == copied
            # ``log`` is the WAL when the checkpoint began; the transactions that landed
            # since wrote about as many frames each as those before.
            frames = log + self._commits * log // max(1, self._in_wal)
            self._catch_up = frames >= RESTART_FRAMES and not self._restart
            if self._restart or (not busy and log == copied and self._commits == 0):
                # Everything copied and nothing since: the WAL restarts at its next writer
                # (SQLite's own rule, held or not), so count its transactions from there.
                self._in_wal = 0
            self.checkpoints += 1
        elif isinstance(result, outcome.Error):
            LOGGER.warning("SQLite store %r: a WAL checkpoint failed (%s); the pages stay in "
                           "the WAL and the next checkpoint retries", self._options.path,
                           result.error)
        self._idle.set()

    async def aclose(self) -> None:
        """Wait for a running checkpoint, then close the checkpoint connection."""
        self._closed = True
        await self._idle.wait()
        conn, self._conn = self._conn, None
        if conn is not None:
            await trio.to_thread.run_sync(conn.close)

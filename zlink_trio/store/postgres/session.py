"""``PostgresSession``: a psycopg connection seen as a ``store.sqlite.session.SqlSession``.

The SQL backends' transaction bodies write their statements once, with ``?``
placeholders, in the SQL SQLite and PostgreSQL both accept. psycopg takes ``%s``
placeholders (and reads a literal ``%`` as the start of one), so :func:`translated`
rewrites each statement once -- ``?`` becomes ``%s``, ``%`` becomes ``%%`` -- and keeps
the result (the statements are a fixed set); libpq itself takes ``$1``, ``$2``, ...
(:func:`numbered`). One function has no common spelling: SQLite's
``json_extract(column, '$.key')`` (SQL NULL for a missing key or a JSON null) becomes
``(column::jsonb ->> 'key')``, which answers the same. Nothing else differs: psycopg's
cursors have ``fetchone``, ``fetchall``, iteration and ``rowcount``.

**Pipelined** (a session given a :class:`Pipeline`: the write groups and batched lookups
of ``connection``): every statement is sent without waiting for its answer, in libpq's
pipeline mode, driven here on psycopg's libpq connection (``pgconn``) rather than
through psycopg's cursors: psycopg's own pipeline spends ~15-26 µs of client time per
statement (a poll and a send each), this ~2-4 µs (measured: 10,000 pipelined
``UPDATE``\\ s; 5,000 ``INSERT``\\ s of seven values). Each distinct statement is prepared
once per connection, in the same pipeline; parameters and rows go through psycopg's
adapters (``Transformer``), so values are those psycopg gives. A *sync* sends libpq's
sync and reads every answer up to it -- one round trip -- and raises the first error
among them as psycopg's typed error (the server skipped every statement after it). A
*blocking* pipeline (a worker thread) syncs when a body reads an answer
(:class:`Answer`) not read yet, waiting in its thread; a non-blocking one (the Trio
loop) is synced only by its driver, with :meth:`Pipeline.sync_async`, which waits for
the socket in the Trio loop -- a body that reads an answer not read yet raises
:class:`WouldWait` instead. :meth:`PostgresSession.updated_known_row` waits for nothing:
the ``UPDATE`` goes as :func:`one_row_or_fail` makes it, which the server refuses unless
it changed exactly one row. :attr:`PostgresSession.writes` counts the statements sent
that may write (all but ``SELECT``), so the connection can tell a body that raised before
writing from one that raised halfway.

**Cursors are reused** on the unpipelined paths (reads, a group's bodies run again
alone): a new psycopg cursor costs about as much client time as the statement it runs,
so a session takes its cursors from a pool the connection keeps and gives them back with
:meth:`PostgresSession.recycle` once the transaction ended (every answer read).
"""

from __future__ import annotations

import itertools
import re
import select
from collections import deque
from functools import cache
from typing import TYPE_CHECKING, Any, Final

import psycopg
import trio
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
    from types import TracebackType

__all__ = ("POOLED_CURSORS", "Answer", "Pipeline", "PostgresSession", "WouldWait", "numbered",
           "one_row_or_fail", "translated")

#: The most cursors a connection's pool keeps.
POOLED_CURSORS: Final = 512
_JSON_EXTRACT: Final = re.compile(r"json_extract\((\w+), '\$\.(\w+)'\)")
#: poll() where the platform has it (a socket past select()'s FD_SETSIZE is fine), else
#: select() (Windows).
_POLL: Final = hasattr(select, "poll")
_READ: Final = 1
_WRITE: Final = 4  # select.POLLIN, select.POLLOUT
#: Names of prepared statements: unique in the process, so a name a failed pipeline may
#: or may not have created is never used again.
_NAMES: Final = itertools.count()


@cache
def _writes(sql: str) -> int:
    """1 when ``sql`` may write (anything but a ``SELECT``), else 0."""
    return 0 if sql.lstrip()[:6].upper() == "SELECT" else 1


@cache
def translated(sql: str) -> str:
    """``sql`` as PostgreSQL and psycopg take it (see the module docstring)."""
    sql = _JSON_EXTRACT.sub(r"(\1::jsonb ->> '\2')", sql)
    return sql.replace("%", "%%").replace("?", "%s")


@cache
def one_row_or_fail(sql: str) -> str:
    """``sql``, an ``UPDATE`` of one row, made a statement the server refuses (division
    by zero) unless it changed exactly that row: its answer need not be waited for, a
    count other than one fails the pipeline -- and the ``COMMIT`` sent after it."""
    return (f"WITH changed AS ({sql} RETURNING 1) "
            "SELECT 1 / (CASE count(*) WHEN 1 THEN 1 ELSE 0 END) FROM changed")


@cache
def numbered(sql: str) -> bytes:
    """``sql`` as libpq takes it: ``$1``, ``$2``, ... for the ``?`` placeholders."""
    sql = _JSON_EXTRACT.sub(r"(\1::jsonb ->> '\2')", sql)
    parts = sql.split("?")
    return "".join(part + (f"${i}" if i < len(parts) else "")
                   for i, part in enumerate(parts, 1)).encode()


class WouldWait(Exception):
    """A body of a non-``blocking`` :class:`Pipeline` asked for an answer not read yet."""


async def _readable_or_writable(socket: int) -> None:
    """Wait until ``socket`` is readable or writable, whichever comes first."""
    async with trio.open_nursery() as nursery:
        async def wait(ready: Callable[[int], Awaitable[None]]) -> None:
            await ready(socket)
            nursery.cancel_scope.cancel()
        nursery.start_soon(wait, trio.lowlevel.wait_readable)
        nursery.start_soon(wait, trio.lowlevel.wait_writable)


class Answer:
    """The answer of one pipelined statement, read when asked for (one round trip for
    everything sent before it)."""

    __slots__ = ("_next", "_pipeline", "_rows", "result")

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        self.result: pq.abc.PGresult | None = None
        self._rows: list[Any] | None = None
        self._next = 0

    @classmethod
    def empty(cls, pipeline: Pipeline) -> Answer:
        """The answer of no statement: no rows, no count."""
        answer = cls(pipeline)
        answer._rows = []
        return answer

    def _answered(self) -> pq.abc.PGresult:
        if self.result is None:
            self._pipeline.sync()
        assert self.result is not None
        return self.result

    @property
    def succeeded(self) -> bool:
        """Whether the statement was answered, with success."""
        return self.result is not None and self.result.status in (
            pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)

    @property
    def rowcount(self) -> int:
        """Rows the statement changed (or returned)."""
        if self.result is None and self._rows == []:  # ``empty``
            return 0
        count = self._answered().command_tuples
        return -1 if count is None else count

    def _all(self) -> list[Any]:
        if self._rows is None:
            self._rows = self._pipeline.rows(self._answered())
        return self._rows

    def fetchone(self) -> Any:
        rows = self._all()
        if self._next >= len(rows):
            return None
        self._next += 1
        return rows[self._next - 1]

    def fetchall(self) -> list[Any]:
        rows = self._all()
        rest, self._next = rows[self._next:], len(rows)
        return rest

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class Pipeline:
    """A psycopg connection's libpq in pipeline mode (see the module docstring).

    ``prepared`` maps (statement, parameter types) to the name it was prepared under on
    this connection; the connection owns it and empties it when a transaction failed
    (a statement prepared in an aborted pipeline may not exist). ``wait`` bounds each wait
    for the server (seconds): none passing means the connection is lost.
    """

    __slots__ = ("_conn", "_failure", "_pending", "_pg", "_poller", "_prepared", "_syncs",
                 "_tx", "_wait", "blocking")

    def __init__(self, conn: psycopg.Connection[Any],
                 prepared: dict[tuple[str, tuple[int, ...]], bytes], wait: float, *,
                 blocking: bool = True) -> None:
        self._conn = conn
        #: Waits for the server in this thread (else: :meth:`sync` raises
        #: :class:`WouldWait`; see ``store.postgres.connection``, *inline groups*).
        self.blocking = blocking
        self._failure: psycopg.Error | None = None
        self._pg = conn.pgconn
        self._tx = Transformer(conn)
        self._prepared = prepared
        self._pending: deque[Answer] = deque()
        self._syncs = 0
        self._wait = wait
        self._poller = select.poll() if _POLL else None

    @property
    def connection(self) -> psycopg.Connection[Any]:
        """The connection it drives."""
        return self._conn

    def __enter__(self) -> Pipeline:
        self._pg.enter_pipeline_mode()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if kind is None:
            if self._pending:
                self.sync()
            self._pg.exit_pipeline_mode()
            return
        try:  # read what is left; the caller rolls back
            self.sync()
            self._pg.exit_pipeline_mode()
        except psycopg.Error:
            self._conn.close()  # its state is unknown: the next write connects anew

    async def __aenter__(self) -> Pipeline:
        self._pg.enter_pipeline_mode()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        """Leave pipeline mode; after a failure, first read what is left and roll the
        transaction back (in the pipeline: no wait outside the Trio loop)."""
        if kind is None:
            if self._pending:
                await self.sync_async()
            self._pg.exit_pipeline_mode()
            return
        try:
            await self._drain()
            self._pg.send_query_params(b"ROLLBACK", None)
            self._pending.append(Answer(self))
            await self._drain()
            self._pg.exit_pipeline_mode()
        except psycopg.OperationalError:
            self._conn.close()  # its state is unknown: the next write connects anew

    async def _drain(self) -> None:
        """Read every answer sent so far; a statement the server refused is no error here."""
        try:
            await self.sync_async()
        except psycopg.OperationalError:
            raise
        except psycopg.Error:
            pass

    def send(self, sql: str, parameters: Sequence[Any]) -> Answer:
        """Send one statement (``?`` placeholders); its answer comes with the next sync."""
        tx = self._tx
        values = tx.dump_sequence(parameters, [PyFormat.AUTO] * len(parameters))
        key = (sql, tuple(tx.types or ()))
        name = self._prepared.get(key)
        if name is None:
            name = self._prepared[key] = f"zlink_{next(_NAMES)}".encode()
            self._pg.send_prepare(name, numbered(sql), param_types=tx.types)
            self._pending.append(Answer(self))  # the prepare's own answer
        self._pg.send_query_prepared(name, values, param_formats=tx.formats)
        answer = Answer(self)
        self._pending.append(answer)
        return answer

    def sync(self) -> None:
        """Send a sync and read every answer up to it, waiting in this thread; raise the
        first error. A non-``blocking`` pipeline raises :class:`WouldWait` instead (its
        driver syncs with :meth:`sync_async`)."""
        if not self.blocking:
            raise WouldWait
        pg = self._pg
        self._send_sync()
        while pg.flush() == 1:  # the output is read by a server that may be writing
            if self._ready(_READ | _WRITE) != _WRITE:  # an answer, an error or a hang-up
                pg.consume_input()
        while self._syncs:
            while pg.is_busy():
                self._ready(_READ)
                pg.consume_input()
            self._take(pg.get_result())
        self._raise_failure()

    async def sync_async(self) -> None:
        """:meth:`sync` waiting in the Trio loop (the loop runs other tasks meanwhile):
        each wait for the server bounded by ``wait``."""
        pg = self._pg
        self._send_sync()
        try:
            with trio.fail_after(self._wait):
                while pg.flush() == 1:
                    # The server may be waiting for us to read before it reads on.
                    pg.consume_input()
                    await _readable_or_writable(pg.socket)
                while self._syncs:
                    while pg.is_busy():
                        await trio.lowlevel.wait_readable(pg.socket)
                        pg.consume_input()
                    self._take(pg.get_result())
        except trio.TooSlowError:
            raise psycopg.OperationalError(
                f"the server sent nothing for {self._wait:g} s in a pipelined "
                "transaction") from None
        self._raise_failure()

    def _send_sync(self) -> None:
        self._pg.pipeline_sync()
        self._syncs += 1

    def _take(self, result: pq.abc.PGresult | None) -> None:
        """One result read: a sync's, or the answer of the oldest statement pending."""
        if result is None:  # the end of one statement's results
            return
        if result.status == pq.ExecStatus.PIPELINE_SYNC:
            self._syncs -= 1
            return
        self._pending.popleft().result = result
        if result.status == pq.ExecStatus.FATAL_ERROR and self._failure is None:
            self._failure = psycopg.errors.error_from_result(result, self._conn.info.encoding)

    def _raise_failure(self) -> None:
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def rows(self, result: pq.abc.PGresult) -> list[Any]:
        """The rows of ``result`` as psycopg reads them (tuples)."""
        self._tx.set_pgresult(result)
        return self._tx.load_rows(0, result.ntuples, tuple)

    def _ready(self, events: int) -> int:
        """Wait until the socket is ready for ``events`` (``_READ`` / ``_WRITE``); which
        (an error or a hang-up counts as ready: the next read reports it)."""
        socket = self._pg.socket
        if self._poller is not None:
            self._poller.register(socket, events)
            polled = self._poller.poll(self._wait * 1000)
            ready = polled[0][1] if polled else 0
        else:
            readable, writable, _ = select.select(
                [socket] if events & _READ else [], [socket] if events & _WRITE else [], [],
                self._wait)
            ready = (_READ if readable else 0) | (_WRITE if writable else 0)
        if not ready:
            raise psycopg.OperationalError(
                f"the server sent nothing for {self._wait:g} s in a pipelined transaction")
        return ready


class PostgresSession:
    """``execute`` / ``executemany`` of a psycopg connection, with ``?`` placeholders,
    pipelined when given a ``pipeline`` (see the module docstring)."""

    __slots__ = ("_conn", "_free", "_pipeline", "_used", "writes")

    def __init__(self, conn: psycopg.Connection[Any], pipeline: Pipeline | None = None,
                 cursors: list[psycopg.Cursor[Any]] | None = None) -> None:
        self._conn = conn
        self._pipeline = pipeline
        #: Cursors of ``conn`` free to use (the connection's pool), and those used here.
        self._free: list[psycopg.Cursor[Any]] = [] if cursors is None else cursors
        self._used: list[psycopg.Cursor[Any]] = []
        #: Statements sent so far that may write.
        self.writes = 0

    def _cursor(self) -> psycopg.Cursor[Any]:
        cursor = self._free.pop() if self._free else self._conn.cursor()
        self._used.append(cursor)
        return cursor

    def execute(self, sql: str, parameters: Sequence[Any] = (), /,
                ) -> psycopg.Cursor[Any] | Answer:
        """Run one statement (see the module docstring)."""
        self.writes += _writes(sql)
        if self._pipeline is not None:
            return self._pipeline.send(sql, parameters)
        cursor = self._cursor()
        cursor.execute(translated(sql), parameters)
        return cursor

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /,
                    ) -> psycopg.Cursor[Any] | Answer:
        """Run one statement once per parameter row (pipelined: the last one's answer)."""
        self.writes += _writes(sql)
        if self._pipeline is not None:
            answer = Answer.empty(self._pipeline)
            for parameters in seq_of_parameters:
                answer = self._pipeline.send(sql, parameters)
            return answer
        cursor = self._cursor()
        cursor.executemany(translated(sql), seq_of_parameters)
        return cursor

    def updated_known_row(self, sql: str, parameters: Sequence[Any], /) -> bool:
        """``store.sqlite.session.updated_known_row``: pipelined, ``True`` at once, the
        statement sent as :func:`one_row_or_fail` makes it."""
        if self._pipeline is None:
            return self.execute(sql, parameters).rowcount == 1
        self.writes += 1
        self._pipeline.send(one_row_or_fail(sql), parameters)
        return True

    def recycle(self) -> None:
        """Give the cursors used back to the pool (the transaction ended, every answer
        read), up to :data:`POOLED_CURSORS` in all."""
        room = POOLED_CURSORS - len(self._free)
        if room > 0:
            self._free.extend(self._used[:room])
        self._used = []

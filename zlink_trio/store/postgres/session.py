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

**Pipelined** (a session given a :class:`Pipeline`: the write groups of
``connection``): every statement is sent without waiting for its answer, in libpq's
pipeline mode, driven here on psycopg's libpq connection (``pgconn``) rather than
through psycopg's cursors: psycopg's own pipeline spends ~15-26 µs of client time per
statement (a poll and a send each), this ~2 µs (measured: 10,000 pipelined ``UPDATE``\\ s).
Each distinct statement is prepared once per connection, in the same pipeline;
parameters and rows go through psycopg's adapters (``Transformer``), so values are those
psycopg gives. An answer (:class:`_Answer`) is read when a body asks for its rows or its
count: the pipeline then sends a sync and reads every answer up to it -- one round trip
-- and raises the first error among them as psycopg's typed error.
:meth:`PostgresSession.updated_known_row` waits for nothing: it keeps the answer, and
:meth:`PostgresSession.unexpected` (after the last sync, before ``COMMIT``) tells whether
any changed other than one row. :attr:`PostgresSession.writes` counts the statements sent
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
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence
    from types import TracebackType

__all__ = ("POOLED_CURSORS", "Pipeline", "PostgresSession", "numbered", "translated")

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
def numbered(sql: str) -> bytes:
    """``sql`` as libpq takes it: ``$1``, ``$2``, ... for the ``?`` placeholders."""
    sql = _JSON_EXTRACT.sub(r"(\1::jsonb ->> '\2')", sql)
    parts = sql.split("?")
    return "".join(part + (f"${i}" if i < len(parts) else "")
                   for i, part in enumerate(parts, 1)).encode()


class _Answer:
    """The answer of one pipelined statement, read when asked for (one round trip for
    everything sent before it)."""

    __slots__ = ("_next", "_pipeline", "_rows", "result")

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        self.result: pq.abc.PGresult | None = None
        self._rows: list[Any] | None = None
        self._next = 0

    @classmethod
    def empty(cls, pipeline: Pipeline) -> _Answer:
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

    __slots__ = ("_conn", "_pending", "_pg", "_poller", "_prepared", "_syncs", "_tx", "_wait")

    def __init__(self, conn: psycopg.Connection[Any],
                 prepared: dict[tuple[str, tuple[int, ...]], bytes], wait: float) -> None:
        self._conn = conn
        self._pg = conn.pgconn
        self._tx = Transformer(conn)
        self._prepared = prepared
        self._pending: deque[_Answer] = deque()
        self._syncs = 0
        self._wait = wait
        self._poller = select.poll() if _POLL else None

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

    def send(self, sql: str, parameters: Sequence[Any]) -> _Answer:
        """Send one statement (``?`` placeholders); its answer comes with the next sync."""
        tx = self._tx
        values = tx.dump_sequence(parameters, [PyFormat.AUTO] * len(parameters))
        key = (sql, tuple(tx.types or ()))
        name = self._prepared.get(key)
        if name is None:
            name = self._prepared[key] = f"zlink_{next(_NAMES)}".encode()
            self._pg.send_prepare(name, numbered(sql), param_types=tx.types)
            self._pending.append(_Answer(self))  # the prepare's own answer
        self._pg.send_query_prepared(name, values, param_formats=tx.formats)
        answer = _Answer(self)
        self._pending.append(answer)
        return answer

    def sync(self) -> None:
        """Send a sync and read every answer up to it; raise the first error."""
        pg = self._pg
        pg.pipeline_sync()
        self._syncs += 1
        while pg.flush() == 1:  # the output is read by a server that may be writing
            if self._ready(_READ | _WRITE) != _WRITE:  # an answer, an error or a hang-up
                pg.consume_input()
        failure: psycopg.Error | None = None
        while self._syncs:
            result = self._result()
            if result.status == pq.ExecStatus.PIPELINE_SYNC:
                self._syncs -= 1
                continue
            self._pending.popleft().result = result
            if result.status == pq.ExecStatus.FATAL_ERROR and failure is None:
                failure = psycopg.errors.error_from_result(result, self._conn.info.encoding)
        if failure is not None:
            raise failure

    def rows(self, result: pq.abc.PGresult) -> list[Any]:
        """The rows of ``result`` as psycopg reads them (tuples)."""
        self._tx.set_pgresult(result)
        return self._tx.load_rows(0, result.ntuples, tuple)

    def _result(self) -> pq.abc.PGresult:
        pg = self._pg
        while True:
            if not pg.is_busy():
                result = pg.get_result()
                if result is not None:
                    return result
                continue  # the end of one statement's results
            self._ready(_READ)
            pg.consume_input()

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

    __slots__ = ("_conn", "_free", "_known", "_pipeline", "_used", "writes")

    def __init__(self, conn: psycopg.Connection[Any], pipeline: Pipeline | None = None,
                 cursors: list[psycopg.Cursor[Any]] | None = None) -> None:
        self._conn = conn
        self._pipeline = pipeline
        #: Cursors of ``conn`` free to use (the connection's pool), and those used here.
        self._free: list[psycopg.Cursor[Any]] = [] if cursors is None else cursors
        self._used: list[psycopg.Cursor[Any]] = []
        #: The answers of ``updated_known_row`` not checked yet.
        self._known: list[_Answer] = []
        #: Statements sent so far that may write.
        self.writes = 0

    def _cursor(self) -> psycopg.Cursor[Any]:
        cursor = self._free.pop() if self._free else self._conn.cursor()
        self._used.append(cursor)
        return cursor

    def execute(self, sql: str, parameters: Sequence[Any] = (), /,
                ) -> psycopg.Cursor[Any] | _Answer:
        """Run one statement (see the module docstring)."""
        self.writes += _writes(sql)
        if self._pipeline is not None:
            return self._pipeline.send(sql, parameters)
        cursor = self._cursor()
        cursor.execute(translated(sql), parameters)
        return cursor

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /,
                    ) -> psycopg.Cursor[Any] | _Answer:
        """Run one statement once per parameter row (pipelined: the last one's answer)."""
        self.writes += _writes(sql)
        if self._pipeline is not None:
            answer = _Answer.empty(self._pipeline)
            for parameters in seq_of_parameters:
                answer = self._pipeline.send(sql, parameters)
            return answer
        cursor = self._cursor()
        cursor.executemany(translated(sql), seq_of_parameters)
        return cursor

    def updated_known_row(self, sql: str, parameters: Sequence[Any], /) -> bool:
        """``store.sqlite.session.updated_known_row``: pipelined, ``True`` now and the
        count checked by :meth:`unexpected`."""
        if self._pipeline is None:
            return self.execute(sql, parameters).rowcount == 1
        self.writes += 1
        self._known.append(self._pipeline.send(sql, parameters))
        return True

    def unexpected(self) -> bool:
        """Whether a statement of :meth:`updated_known_row` changed other than one row
        (call it after the pipeline's last sync: every count is known then)."""
        known, self._known = self._known, []
        return any(answer.rowcount != 1 for answer in known)

    def recycle(self) -> None:
        """Give the cursors used back to the pool (the transaction ended, every answer
        read), up to :data:`POOLED_CURSORS` in all."""
        room = POOLED_CURSORS - len(self._free)
        if room > 0:
            self._free.extend(self._used[:room])
        self._used = []

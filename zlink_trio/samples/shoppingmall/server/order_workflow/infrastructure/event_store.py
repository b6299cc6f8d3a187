"""OrderEventStore: one event stream per OrderId, expected-version appends, SourceCommandId dedupe.

Theory of operation
-------------------
The store is the order's source of record: ``append`` adds one or
more events to an OrderId's stream *only if* the stream is at
``expected_version`` (0 for a new stream), and numbers them
``expected_version + 1, + 2, ...``; ``read`` returns the stream in version
order for the fold.

Each append is one atomic transaction, with its checks in this order:

1. **SourceCommandId dedupe.** When ``source_command_id`` is given and an
   earlier append of *this stream* carried it, nothing is written and the
   earlier append's events come back (``AppendResult.deduplicated``) --
   whatever ``expected_version`` says, because a retried command's fold is
   older than the events it already recorded. The events are not compared:
   the same command id means the same command.
2. **Expected version.** When the stream is not at ``expected_version``,
   :class:`ExpectedVersionConflict` (a :class:`zlink_trio.StaleFence`) is
   raised and nothing is written. Of N concurrent appends with the same
   expected version exactly one wins.
3. All the events are written, or none (never a half-written append).

Backends (``storage.store_url``, opened by ``storage.app_store``): SQLite -- table
``order_events``, one ``BEGIN IMMEDIATE`` transaction per append; Redis --
``<prefix>:ev:{<order>}:log`` (a list of JSON envelopes; its length is the version) and
``<prefix>:ev:{<order>}:src`` (SourceCommandId -> ``first:last`` versions), one Lua
script per append. Both keys of a stream share the hash tag of the OrderId.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_records import (
    AppendResult,
    ExpectedVersionConflict,
    NewEvent,
    StoredEvent,
    check_after_version,
    check_append,
    check_order_id,
)
from zlink_trio.samples.shoppingmall.server.storage.app_store import open_app_store

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence
    from contextlib import AbstractAsyncContextManager

    from zlink_trio.samples.shoppingmall.server.storage.redis_db import (
        RedisDb,
    )
    from zlink_trio.samples.shoppingmall.server.storage.sqlite_db import (
        SqliteDb,
    )

__all__ = (
    "AppendResult",
    "ExpectedVersionConflict",
    "NewEvent",
    "OrderEventStore",
    "StoredEvent",
    "open_order_event_store",
)


class OrderEventStore(Protocol):
    """The per-OrderId event streams (module docstring); both backends implement it."""

    async def append(self, order_id: str, expected_version: int, events: Sequence[NewEvent],
                     *, source_command_id: str | None = None) -> AppendResult:
        """Append ``events`` if the stream is at ``expected_version``; see the module doc.

        Raises :class:`ExpectedVersionConflict` (nothing written),
        :class:`zlink_trio.InvalidOperation` for malformed arguments,
        :class:`zlink_trio.StoreUnavailable` when the store cannot be asked.
        """
        ...

    async def read(self, order_id: str, *, after_version: int = 0) -> tuple[StoredEvent, ...]:
        """The stream's events with a version above ``after_version``, in version order."""
        ...

    async def current_version(self, order_id: str) -> int:
        """The stream's version: its last event's, 0 when the stream is empty."""
        ...


SQLITE_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS order_events (
        order_id TEXT NOT NULL, version INTEGER NOT NULL, event_id TEXT NOT NULL,
        event_type TEXT NOT NULL, payload TEXT NOT NULL, source_command_id TEXT,
        created_at_unix_ms INTEGER NOT NULL,
        PRIMARY KEY (order_id, version)) WITHOUT ROWID""",
    """CREATE INDEX IF NOT EXISTS order_events_source
        ON order_events (order_id, source_command_id) WHERE source_command_id IS NOT NULL""",
)

_COLUMNS: Final = ("order_id, version, event_id, event_type, payload, source_command_id, "
                   "created_at_unix_ms")


def _row(row: tuple[str, int, str, str, str, str | None, int]) -> StoredEvent:
    return StoredEvent(order_id=row[0], version=row[1], event_id=row[2], event_type=row[3],
                       payload=row[4], source_command_id=row[5], created_at_unix_ms=row[6])


def _stored(order_id: str, expected: int, events: Sequence[NewEvent],
            source_command_id: str | None) -> tuple[StoredEvent, ...]:
    return tuple(
        StoredEvent(order_id=order_id, version=expected + i, event_id=event.event_id,
                    event_type=event.event_type, payload=event.payload,
                    source_command_id=source_command_id,
                    created_at_unix_ms=event.created_at_unix_ms)
        for i, event in enumerate(events, start=1))


def _version(conn: sqlite3.Connection, order_id: str) -> int:
    row = conn.execute("SELECT max(version) FROM order_events WHERE order_id = ?",
                       (order_id,)).fetchone()
    return int(row[0] or 0)


class SqliteOrderEventStore:
    """The ``sqlite://`` OrderEventStore: table ``order_events``."""

    def __init__(self, db: SqliteDb) -> None:
        self._db = db

    async def append(self, order_id: str, expected_version: int, events: Sequence[NewEvent],
                     *, source_command_id: str | None = None) -> AppendResult:
        """See :meth:`OrderEventStore.append`."""
        check_append(order_id, expected_version, events, source_command_id)
        new = _stored(order_id, expected_version, events, source_command_id)

        def body(conn: sqlite3.Connection) -> AppendResult:
            if source_command_id is not None:
                earlier = conn.execute(
                    f"SELECT {_COLUMNS} FROM order_events WHERE order_id = ? AND "
                    "source_command_id = ? ORDER BY version", (order_id, source_command_id),
                ).fetchall()
                if earlier:
                    return AppendResult(order_id=order_id, version=_version(conn, order_id),
                                        events=tuple(map(_row, earlier)), deduplicated=True)
            current = _version(conn, order_id)
            if current != expected_version:
                raise ExpectedVersionConflict(order_id, expected_version, current)
            conn.executemany(
                f"INSERT INTO order_events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(e.order_id, e.version, e.event_id, e.event_type, e.payload,
                  e.source_command_id, e.created_at_unix_ms) for e in new])
            return AppendResult(order_id=order_id, version=new[-1].version, events=new,
                                deduplicated=False)

        return await self._db.write(body)

    async def read(self, order_id: str, *, after_version: int = 0) -> tuple[StoredEvent, ...]:
        """See :meth:`OrderEventStore.read`."""
        check_after_version(order_id, after_version)

        def body(conn: sqlite3.Connection) -> tuple[StoredEvent, ...]:
            return tuple(map(_row, conn.execute(
                f"SELECT {_COLUMNS} FROM order_events WHERE order_id = ? AND version > ? "
                "ORDER BY version", (order_id, after_version)).fetchall()))

        return await self._db.read(body)

    async def current_version(self, order_id: str) -> int:
        """See :meth:`OrderEventStore.current_version`."""
        check_order_id(order_id)
        return await self._db.read(lambda conn: _version(conn, order_id))


#: KEYS: log, src. ARGV: expected version, source command id ('' = none), envelopes...
_APPEND: Final = """
local log, src = KEYS[1], KEYS[2]
local source = ARGV[2]
if source ~= '' then
  local earlier = redis.call('HGET', src, source)
  if earlier then
    local first, last = string.match(earlier, '^(%d+):(%d+)$')
    return {'dup', redis.call('LLEN', log),
            redis.call('LRANGE', log, tonumber(first) - 1, tonumber(last) - 1)}
  end
end
local current = redis.call('LLEN', log)
if current ~= tonumber(ARGV[1]) then
  return {'conflict', current}
end
for i = 3, #ARGV do
  redis.call('RPUSH', log, ARGV[i])
end
local last = current + #ARGV - 2
if source ~= '' then
  redis.call('HSET', src, source, (current + 1) .. ':' .. last)
end
return {'ok', last}
"""

_SCRIPTS: Final = {"append": _APPEND}


class RedisOrderEventStore:
    """The ``redis://`` OrderEventStore: a list and a hash per stream, one script per append."""

    def __init__(self, db: RedisDb) -> None:
        self._db = db

    def _keys(self, order_id: str) -> tuple[str, str]:
        base = f"{self._db.prefix}:ev:{{{order_id}}}"
        return f"{base}:log", f"{base}:src"

    async def append(self, order_id: str, expected_version: int, events: Sequence[NewEvent],
                     *, source_command_id: str | None = None) -> AppendResult:
        """See :meth:`OrderEventStore.append`."""
        check_append(order_id, expected_version, events, source_command_id)
        new = _stored(order_id, expected_version, events, source_command_id)
        reply = await self._db.script(
            f"append to order {order_id!r}", "append", self._keys(order_id),
            [expected_version, source_command_id or "", *(e.to_json() for e in new)])
        status = bytes(reply[0])
        if status == b"dup":
            return AppendResult(order_id=order_id, version=int(reply[1]),
                                events=tuple(map(StoredEvent.from_json, reply[2])),
                                deduplicated=True)
        if status == b"conflict":
            raise ExpectedVersionConflict(order_id, expected_version, int(reply[1]))
        return AppendResult(order_id=order_id, version=int(reply[1]), events=new,
                            deduplicated=False)

    async def read(self, order_id: str, *, after_version: int = 0) -> tuple[StoredEvent, ...]:
        """See :meth:`OrderEventStore.read`."""
        check_after_version(order_id, after_version)
        log = self._keys(order_id)[0]
        client = self._db.client
        items = await self._db.bounded(f"read order {order_id!r}",
                                       lambda: client.lrange(log, after_version, -1))
        return tuple(map(StoredEvent.from_json, items))

    async def current_version(self, order_id: str) -> int:
        """See :meth:`OrderEventStore.current_version`."""
        check_order_id(order_id)
        log = self._keys(order_id)[0]
        client = self._db.client
        return int(await self._db.bounded(f"read order {order_id!r}",
                                          lambda: client.llen(log)))


def open_order_event_store(url: str) -> AbstractAsyncContextManager[OrderEventStore]:
    """Open the OrderEventStore ``url`` names (``sqlite:///path.db`` or ``redis://...``).

    Raises :class:`zlink_trio.InvalidConfiguration` for a malformed URL and
    :class:`zlink_trio.StoreUnavailable` when the store cannot be reached.
    Leaving the block closes it.
    """
    return open_app_store(
        url, name="OrderEventStore", sqlite_schema=SQLITE_SCHEMA, redis_scripts=_SCRIPTS,
        on_sqlite=SqliteOrderEventStore, on_redis=RedisOrderEventStore)


if TYPE_CHECKING:
    def _conforms(a: SqliteOrderEventStore, b: RedisOrderEventStore) -> tuple[
            OrderEventStore, OrderEventStore]:
        # mypy proves here that both backends satisfy the protocol.
        return a, b

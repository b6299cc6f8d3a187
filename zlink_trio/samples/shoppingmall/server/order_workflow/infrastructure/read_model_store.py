"""OrderReadModelStore: one JSON document per OrderId, guarded by the stream version it folds.

Theory of operation
-------------------
The read model is derived, and rebuildable from the stream alone: the workflow
folds the OrderEventStore stream into an OrderState and puts it here (``put``)
as JSON text, tagged with the stream version the fold reached. CommerceApi reads
it (``get``) for lookups; the runner deletes (``delete``) one to prove a rebuild
from the stream alone.

**Version guard.** ``put`` writes only when the store holds no document for
the order or holds one of the same or an *older* version, in one atomic
transaction: an older projection (a slow writer, a stale replica of the
fold) never overwrites a newer one. The same version is written again on
purpose -- a rebuild must be able to repair a document that is inconsistent
with its fold. The result says whether it was written and what the store
holds now.

The store is generic over the document: JSON text it never parses.

Backends (``storage.store_url``, opened by ``storage.app_store``): SQLite -- table
``order_read_models``, one ``BEGIN IMMEDIATE`` per put; Redis -- a hash
``<prefix>:rm:{<order>}`` with fields ``version`` and ``document``, one Lua script per
put.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

import attrs

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_records import (
    check_order_id,
)
from zlink_trio.samples.shoppingmall.server.storage.app_store import open_app_store

if TYPE_CHECKING:
    import sqlite3
    from contextlib import AbstractAsyncContextManager

    from zlink_trio.samples.shoppingmall.server.storage.redis_db import (
        RedisDb,
    )
    from zlink_trio.samples.shoppingmall.server.storage.sqlite_db import (
        SqliteDb,
    )

__all__ = ("OrderReadModelStore", "PutResult", "ReadModel", "open_order_read_model_store")


@attrs.frozen(kw_only=True)
class ReadModel:
    """One order's lookup document and the stream version it was folded from."""

    order_id: str
    version: int
    document: str


@attrs.frozen(kw_only=True)
class PutResult:
    """Whether ``put`` wrote, and the document the store holds after it."""

    written: bool
    current: ReadModel


class OrderReadModelStore(Protocol):
    """The lookup documents (module docstring); both backends implement it."""

    async def put(self, order_id: str, version: int, document: str) -> PutResult:
        """Store ``document`` unless a newer version is stored; see the module docstring.

        Raises :class:`zlink_trio.InvalidOperation` for malformed arguments and
        :class:`zlink_trio.StoreUnavailable` when the store cannot be asked.
        """
        ...

    async def get(self, order_id: str) -> ReadModel | None:
        """The order's document, ``None`` when there is none."""
        ...

    async def delete(self, order_id: str) -> bool:
        """Forget the order's document; whether there was one."""
        ...


def _check_put(order_id: object, version: object, document: object) -> None:
    check_order_id(order_id)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise zl.InvalidOperation(f"read model version {version!r} must be an int >= 0")
    if not isinstance(document, str):
        raise zl.InvalidOperation("a read model document is JSON text (str)")


SQLITE_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS order_read_models (
        order_id TEXT PRIMARY KEY, version INTEGER NOT NULL, document TEXT NOT NULL
        ) WITHOUT ROWID""",
)


class SqliteOrderReadModelStore:
    """The ``sqlite://`` OrderReadModelStore: table ``order_read_models``."""

    def __init__(self, db: SqliteDb) -> None:
        self._db = db

    async def put(self, order_id: str, version: int, document: str) -> PutResult:
        """See :meth:`OrderReadModelStore.put`."""
        _check_put(order_id, version, document)

        def body(conn: sqlite3.Connection) -> PutResult:
            written = conn.execute(
                "INSERT INTO order_read_models (order_id, version, document) VALUES (?, ?, ?) "
                "ON CONFLICT (order_id) DO UPDATE SET version = excluded.version, "
                "document = excluded.document WHERE version <= excluded.version",
                (order_id, version, document)).rowcount == 1
            current = _get(conn, order_id)
            assert current is not None
            return PutResult(written=written, current=current)

        return await self._db.write(body)

    async def get(self, order_id: str) -> ReadModel | None:
        """See :meth:`OrderReadModelStore.get`."""
        check_order_id(order_id)
        return await self._db.read(lambda conn: _get(conn, order_id))

    async def delete(self, order_id: str) -> bool:
        """See :meth:`OrderReadModelStore.delete`."""
        check_order_id(order_id)
        return await self._db.write(lambda conn: conn.execute(
            "DELETE FROM order_read_models WHERE order_id = ?", (order_id,)).rowcount == 1)


def _get(conn: sqlite3.Connection, order_id: str) -> ReadModel | None:
    row = conn.execute("SELECT version, document FROM order_read_models WHERE order_id = ?",
                       (order_id,)).fetchone()
    if row is None:
        return None
    return ReadModel(order_id=order_id, version=int(row[0]), document=row[1])


#: KEYS: the document hash. ARGV: version, document. Reply: {written, version, document}.
_PUT: Final = """
local stored = redis.call('HMGET', KEYS[1], 'version', 'document')
if stored[1] and tonumber(stored[1]) > tonumber(ARGV[1]) then
  return {0, stored[1], stored[2]}
end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'document', ARGV[2])
return {1, ARGV[1], ARGV[2]}
"""

_SCRIPTS: Final = {"put": _PUT}


class RedisOrderReadModelStore:
    """The ``redis://`` OrderReadModelStore: one hash per order, one script per put."""

    def __init__(self, db: RedisDb) -> None:
        self._db = db

    def _key(self, order_id: str) -> str:
        return f"{self._db.prefix}:rm:{{{order_id}}}"

    async def put(self, order_id: str, version: int, document: str) -> PutResult:
        """See :meth:`OrderReadModelStore.put`."""
        _check_put(order_id, version, document)
        reply = await self._db.script(f"project order {order_id!r}", "put",
                                      [self._key(order_id)], [version, document])
        return PutResult(written=int(reply[0]) == 1, current=ReadModel(
            order_id=order_id, version=int(reply[1]), document=bytes(reply[2]).decode()))

    async def get(self, order_id: str) -> ReadModel | None:
        """See :meth:`OrderReadModelStore.get`."""
        check_order_id(order_id)
        key, client = self._key(order_id), self._db.client
        version, document = await self._db.bounded(
            f"look up order {order_id!r}", lambda: client.hmget(key, ["version", "document"]))
        if version is None or document is None:
            return None
        return ReadModel(order_id=order_id, version=int(version), document=document.decode())

    async def delete(self, order_id: str) -> bool:
        """See :meth:`OrderReadModelStore.delete`."""
        check_order_id(order_id)
        key, client = self._key(order_id), self._db.client
        return int(await self._db.bounded(f"delete the projection of {order_id!r}",
                                          lambda: client.delete([key]))) == 1


def open_order_read_model_store(url: str) -> AbstractAsyncContextManager[OrderReadModelStore]:
    """Open the OrderReadModelStore ``url`` names (``sqlite:///path.db`` or ``redis://...``).

    Raises :class:`zlink_trio.InvalidConfiguration` for a malformed URL and
    :class:`zlink_trio.StoreUnavailable` when the store cannot be reached.
    Leaving the block closes it.
    """
    return open_app_store(
        url, name="OrderReadModelStore", sqlite_schema=SQLITE_SCHEMA, redis_scripts=_SCRIPTS,
        on_sqlite=SqliteOrderReadModelStore, on_redis=RedisOrderReadModelStore)


if TYPE_CHECKING:
    def _conforms(a: SqliteOrderReadModelStore, b: RedisOrderReadModelStore) -> tuple[
            OrderReadModelStore, OrderReadModelStore]:
        # mypy proves here that both backends satisfy the protocol.
        return a, b

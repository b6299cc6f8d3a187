"""Opening an application store by URL: where every store's connection opens and closes.

Theory of operation
-------------------
Each store of the sample -- the CommerceStateStore, the OrderEventStore, the
OrderReadModelStore, and the Inventory and Payment module stand-ins -- is two
classes over one connection: a SQLite one over a :class:`~.sqlite_db.SqliteDb` and a
Redis one over a :class:`~.redis_db.RedisDb`.  :func:`open_app_store` is the one way
they are opened: it reads the URL (:func:`~.store_url.parse_store_url`, which refuses
a malformed one before anything opens), opens the connection -- SQLite with the
store's ``CREATE TABLE IF NOT EXISTS`` schema, Redis with its Lua scripts and a
``PING`` -- yields the store built on it, and closes the connection when the block
ends, also on error or cancellation.  A store module only says which schema, which
scripts and which two classes.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

from zlink_trio.samples.shoppingmall.server.storage.redis_db import open_redis_db
from zlink_trio.samples.shoppingmall.server.storage.sqlite_db import open_sqlite_db
from zlink_trio.samples.shoppingmall.server.storage.store_url import (
    SqliteTarget,
    parse_store_url,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping, Sequence

    from zlink_trio.samples.shoppingmall.server.storage.redis_db import RedisDb
    from zlink_trio.samples.shoppingmall.server.storage.sqlite_db import SqliteDb

__all__ = ("open_app_store",)

S = TypeVar("S")


@asynccontextmanager
async def open_app_store(url: str, *, name: str, sqlite_schema: Sequence[str],
                         redis_scripts: Mapping[str, str],
                         on_sqlite: Callable[[SqliteDb], S],
                         on_redis: Callable[[RedisDb], S]) -> AsyncIterator[S]:
    """Open the store ``name`` on ``url`` (``sqlite:///path.db`` or ``redis://...``).

    Yields ``on_sqlite(db)`` or ``on_redis(db)`` over the opened connection and closes it
    when the block ends. Raises :class:`zlink_trio.InvalidConfiguration` for a malformed
    URL and :class:`zlink_trio.StoreUnavailable` when the store cannot be reached.
    """
    target = parse_store_url(url)
    if isinstance(target, SqliteTarget):
        async with open_sqlite_db(target, sqlite_schema) as sqlite_db:
            yield on_sqlite(sqlite_db)
        return
    async with open_redis_db(target, redis_scripts, name) as redis_db:
        yield on_redis(redis_db)

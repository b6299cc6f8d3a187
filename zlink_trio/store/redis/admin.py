"""Administration on the store's own client: one plain connection, a pattern's keys.

Theory of operation
-------------------
Tools that act on a Redis server outside a store's transactions -- the test kit and
the benchmarks deleting the keys of the prefix they used, tests pausing a server --
use the backend's own RESP client, not a second one. :func:`open_connection` opens one
:class:`~zlink_trio.store.redis.pipeline.Pipeline` to the server a ``redis://`` URL
names (its ``timeout`` bounds the connect, the rest of the URL's options are ignored);
its :meth:`~zlink_trio.store.redis.pipeline.Pipeline.command` sends any command and
returns the raw RESP2 reply (an error reply raises
:class:`~zlink_trio.store.redis.resp.ReplyError`).

:func:`scan_keys` lists the keys matching a pattern with ``SCAN`` (the keys that exist
for the whole scan are listed once at least; keys written meanwhile may be missed, as
``SCAN`` promises), and :func:`delete_matching` deletes them with ``DEL``, by default
one key per command so that it works on a Redis Cluster master too (a ``DEL`` of keys
of several hash slots is refused there). Neither is bounded here: the caller bounds
the whole (``trio.fail_after``).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from zlink_trio.store.redis.pipeline import open_pipelines
from zlink_trio.store.redis.resp import encode_command
from zlink_trio.store.redis.store import parse_redis_url

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from zlink_trio.store.redis.pipeline import Pipeline

__all__ = ("delete_matching", "open_connection", "scan_keys")

#: Keys ``SCAN`` looks at per call.
_SCAN_COUNT = 1000


@asynccontextmanager
async def open_connection(url: str) -> AsyncIterator[Pipeline]:
    """One connection to the server of the ``redis://`` ``url``, closed when the block ends.

    Raises :class:`~zlink_trio.InvalidConfiguration` for a malformed URL; a server that
    cannot be reached makes the first command raise :class:`~zlink_trio.StoreUnavailable`.
    """
    config = parse_redis_url(url)
    async with open_pipelines() as pipelines:
        yield pipelines.open(host=config.host, port=config.port, db=config.db,
                             username=config.username, password=config.password,
                             timeout=config.timeout, where=config.where, name="admin")


async def scan_keys(send: Callable[[bytes], Awaitable[Any]], match: str) -> list[bytes]:
    """Every key matching the ``SCAN`` pattern ``match``, each once, in no order.

    ``send`` sends one encoded command and returns its reply (``Pipeline.call``, or the
    cluster router's ``call_master`` for one master).
    """
    found: dict[bytes, None] = {}
    cursor = b"0"
    while True:
        cursor, keys = await send(encode_command(["SCAN", cursor, "MATCH", match,
                                                  "COUNT", _SCAN_COUNT]))
        found.update(dict.fromkeys(keys))
        if cursor == b"0":
            return list(found)


async def delete_matching(send: Callable[[bytes], Awaitable[Any]], match: str, *,
                          per_command: int = 1) -> int:
    """Delete every key matching ``match`` (``send`` as for :func:`scan_keys`), with
    ``per_command`` keys per ``DEL`` (more than 1 only on a server that is not a
    cluster node); how many were deleted."""
    keys = await scan_keys(send, match)
    deleted = 0
    for i in range(0, len(keys), per_command):
        deleted += await send(encode_command(["DEL", *keys[i:i + per_command]]))
    return deleted

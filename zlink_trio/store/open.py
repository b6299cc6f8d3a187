"""``open_store(url)``: choose a store backend by URL, optionally a second one for relocation.

Theory of operation
-------------------
The scheme picks the backend. ``memory://`` opens a fresh private
:class:`MemoryStore`. ``memory://<name>`` opens a store shared by everyone in
this process who opens the same name while it is open: the first opener
creates it, the last one to exit forgets it (a reference count, so tests do
not leak state into each other as long as they close what they open). A
:class:`MemoryStore` instance may also be passed instead of a URL; it is
yielded as is and stays usable after the block.

``sqlite:///path.db`` opens the SQLite backend (``store/sqlite/``).
``redis://host:port/db`` opens the Redis backend (``store/redis/``),
``redis+cluster://host:port[,host:port...]`` the Redis Cluster backend
(``store/redis_cluster/``), ``postgresql://user@host:port/db`` (or ``postgres://``) the
PostgreSQL backend (``store/postgres/``; the ``postgres`` extra).
Any other scheme is refused with :class:`InvalidConfiguration` raised before
anything is opened.

By default one backend holds both stores and runs the combined cold-activation
transactions itself. ``relocation=URL`` puts the Relocation Store apart (it may share a
Redis deployment with the Location Store, but not a keyspace): the Location Store comes
from ``url`` and the Relocation Store from the second URL -- any two schemes, or the
same scheme with another file, database or key prefix -- and the result is a
:class:`SplitStore`, whose ``combined`` is :class:`SeparateSteps` because no transaction
spans two backends. Both URLs are parsed before either backend is opened, and leaving
the block closes both. The same URL twice is one store.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import trio

from zlink_trio.core.errors import InvalidConfiguration
from zlink_trio.store.memory import MemoryStore
from zlink_trio.store.separate import SplitStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from zlink_trio.store.protocol import Store

__all__ = ("SCHEMES", "open_store")

#: Every URL scheme ``open_store`` knows, available or not.
SCHEMES: Final = ("memory", "sqlite", "redis", "redis+cluster", "postgresql", "postgres")
_PLANNED: Final = frozenset[str]()

_shared: dict[str, tuple[MemoryStore, int]] = {}


def _memory_name(url: str) -> str:
    parts = urlsplit(url)
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InvalidConfiguration(
            f"store URL {url!r}: a memory store URL is 'memory://' or 'memory://<name>'"
        )
    return parts.netloc


def _scheme(url: object) -> str:
    """The known, available scheme of ``url``; :class:`InvalidConfiguration` otherwise."""
    scheme = url.partition("://")[0].lower() if isinstance(url, str) and "://" in url else ""
    if scheme in _PLANNED:
        raise InvalidConfiguration(
            f"store URL {url!r}: the {scheme} backend is not yet available; use 'memory://' "
            "for now"
        )
    if scheme not in SCHEMES:
        raise InvalidConfiguration(
            f"store URL {url!r} has an unknown scheme; use one of "
            f"{', '.join(s + '://' for s in SCHEMES)} (available today: "
            f"{', '.join(s + '://' for s in SCHEMES if s not in _PLANNED)})"
        )
    return scheme


def _check(url: str | MemoryStore) -> None:
    """Parse ``url`` as its backend will, opening nothing: :class:`InvalidConfiguration`."""
    if isinstance(url, MemoryStore):
        return
    scheme = _scheme(url)
    if scheme == "sqlite":
        from zlink_trio.store.sqlite.schema import parse_url

        parse_url(url)
    elif scheme == "redis":
        from zlink_trio.store.redis.store import parse_redis_url

        parse_redis_url(url)
    elif scheme == "redis+cluster":
        from zlink_trio.store.redis_cluster.store import parse_cluster_url

        parse_cluster_url(url)
    elif scheme in ("postgresql", "postgres"):
        from zlink_trio.store.postgres.schema import parse_url as parse_postgres_url

        parse_postgres_url(url)
    else:
        _memory_name(url)


@asynccontextmanager
async def open_store(url: str | MemoryStore, *,
                     relocation: str | None = None) -> AsyncIterator[Store]:
    """Open the store ``url`` names and yield it (``.location``, ``.relocation``, ``.combined``).

    ``relocation``: ``None`` (default) keeps both stores in the one backend
    ``url`` names, with its own combined transactions. A URL (any scheme) opens
    the Relocation Store from it instead and yields a :class:`SplitStore`: the
    Location Store of ``url``, the Relocation Store of ``relocation``, and
    :class:`SeparateSteps` as ``combined``. The same URL as ``url`` is the
    default.

    Raises :class:`InvalidConfiguration` for an unknown scheme (the message
    lists the known ones), for a backend not yet available, and for a
    malformed URL -- with ``relocation``, for either URL before anything is
    opened. Leaving the block releases the store (both, when split); a shared
    named memory store is forgotten when its last opener leaves.
    """
    if relocation is None or relocation == url:
        async with _open_one(url) as store:
            yield store
        return
    if not isinstance(relocation, str):
        raise InvalidConfiguration(
            f"relocation must be a store URL (str) or None, got {type(relocation).__name__}; "
            "pass e.g. relocation='redis://host:6379/0?prefix=relocation'"
        )
    _check(url)
    _check(relocation)
    async with _open_one(url) as located, _open_one(relocation) as relocated:
        yield SplitStore(located.location, relocated.relocation)


@asynccontextmanager
async def _open_one(url: str | MemoryStore) -> AsyncIterator[Store]:
    """One backend holding both stores (see :func:`open_store`)."""
    if isinstance(url, MemoryStore):
        await trio.lowlevel.checkpoint()
        yield url
        return
    scheme = _scheme(url)
    if scheme == "sqlite":
        from zlink_trio.store.sqlite import open_sqlite_store

        async with open_sqlite_store(url) as sqlite_store:
            yield sqlite_store
        return
    if scheme == "redis":
        from zlink_trio.store.redis import open_redis_store

        async with open_redis_store(url) as redis_store:
            yield redis_store
        return
    if scheme == "redis+cluster":
        from zlink_trio.store.redis_cluster import open_redis_cluster_store

        async with open_redis_cluster_store(url) as cluster_store:
            yield cluster_store
        return
    if scheme in ("postgresql", "postgres"):
        try:
            from zlink_trio.store.postgres import open_postgres_store
        except ImportError as error:
            raise InvalidConfiguration(
                f"store URL {url!r}: the PostgreSQL backend needs psycopg 3 ({error}); "
                "install zlink-trio[postgres]") from error
        async with open_postgres_store(url) as postgres_store:
            yield postgres_store
        return
    name = _memory_name(url)
    await trio.lowlevel.checkpoint()
    if not name:
        yield MemoryStore()
        return
    store, count = _shared.get(name, (MemoryStore(), 0))
    _shared[name] = (store, count + 1)
    try:
        yield store
    finally:
        store, count = _shared[name]
        if count == 1:
            del _shared[name]
        else:
            _shared[name] = (store, count - 1)

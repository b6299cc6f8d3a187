"""``open_store(url)``: choose a store backend by URL.

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
``redis://host:port/db`` opens the Redis backend (``store/redis/``).
Any other scheme is refused with :class:`InvalidConfiguration` raised before
anything is opened.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import trio

from zlink_trio.core.errors import InvalidConfiguration
from zlink_trio.store.memory import MemoryStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from zlink_trio.store.protocol import Store

__all__ = ("SCHEMES", "open_store")

#: Every URL scheme ``open_store`` knows, available or not.
SCHEMES: Final = ("memory", "sqlite", "redis")
_PLANNED: Final = frozenset[str]()

_shared: dict[str, tuple[MemoryStore, int]] = {}


def _memory_name(url: str) -> str:
    parts = urlsplit(url)
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InvalidConfiguration(
            f"store URL {url!r}: a memory store URL is 'memory://' or 'memory://<name>'"
        )
    return parts.netloc


@asynccontextmanager
async def open_store(url: str | MemoryStore) -> AsyncIterator[Store]:
    """Open the store ``url`` names and yield it (``.location``, ``.relocation``).

    Raises :class:`InvalidConfiguration` for an unknown scheme (the message
    lists the known ones), for a backend not yet available, and for a
    malformed memory or sqlite URL. Leaving the block releases
    the store; a shared named memory store is forgotten when its last opener
    leaves.
    """
    if isinstance(url, MemoryStore):
        await trio.lowlevel.checkpoint()
        yield url
        return
    scheme = url.partition("://")[0].lower() if isinstance(url, str) and "://" in url else ""
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
    if scheme in _PLANNED:
        raise InvalidConfiguration(
            f"store URL {url!r}: the {scheme} backend is not yet available; use 'memory://' "
            "for now"
        )
    if scheme != "memory":
        raise InvalidConfiguration(
            f"store URL {url!r} has an unknown scheme; use one of "
            f"{', '.join(s + '://' for s in SCHEMES)} (available today: "
            f"{', '.join(s + '://' for s in SCHEMES if s not in _PLANNED)})"
        )
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

"""SQLite store: what SQLite's errors become (typed, with what to do about them).

SQLITE_BUSY/LOCKED -- another connection holds the lock -- is :func:`is_busy`. An
inline attempt that meets it raises the internal :class:`Busy` and is tried again in
the worker thread (``connection``); past the busy timeout, and for any other
``sqlite3`` error, the caller gets :func:`unavailable`'s :class:`StoreUnavailable`
(chained with ``from`` by the caller): nothing was written.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from zlink_trio.core.errors import StoreUnavailable, Unavailable

__all__ = ("Busy", "is_busy", "unavailable")

_BUSY_CODES: Final = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def is_busy(error: BaseException) -> bool:
    """Whether ``error`` is SQLite's "another connection holds the lock"."""
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.OperationalError) and (
        (code is not None and code & 0xFF in _BUSY_CODES)
        or "locked" in str(error) or "busy" in str(error))


class Busy(Exception):
    """Internal: an inline attempt met another connection's lock; retry in a thread."""


def unavailable(path: str, error: sqlite3.Error) -> Unavailable:
    """The typed error for a SQLite failure of the store at ``path``."""
    # StoreUnavailable: the store was not asked, which says nothing about leases or
    # records (the lease keeper retries it; a StaleFence-like Unavailable it would not).
    if is_busy(error):
        return StoreUnavailable(
            f"SQLite store {path!r} is locked by another connection past the busy timeout "
            f"({error}); nothing was written, retry later or raise ?busy_timeout="
        )
    return StoreUnavailable(f"SQLite store {path!r} failed: {error}; nothing was written")

"""Which backend an application store URL names: ``sqlite:///path.db`` or ``redis://...``.

Theory of operation
-------------------
The sample's stores are chosen by URL the way the framework's are
(``zl.open_store``), and the URLs read the same:

``sqlite:///abs/path.db?busy_timeout=5``
    One SQLite file on this host (WAL needs shared memory: no host part, no
    network filesystem). ``busy_timeout``: seconds a transaction waits for
    another process's write lock (default 5, at most 600).
``redis://[[user]:password@]host[:port][/db]?prefix=P&timeout=S&max_connections=N``
    One Redis server. ``prefix`` (default ``shoppingmall``) namespaces the keys
    of a deployment or a test run; ``timeout``: seconds per call (default 5);
    ``max_connections``: pool size (default 16).

:func:`parse_store_url` turns a URL into a :class:`SqliteTarget` or a
:class:`RedisTarget` and raises :class:`zlink_trio.InvalidConfiguration`
before anything is opened.

Where the stores live (a decision of the sample)
------------------------------------------------
Each store is opened by its own URL and keeps its own tables (SQLite:
``order_events``, ``order_read_models``, ``commerce_*``, ``inventory_*``,
``payment_*``, ``external_calls``) or key namespace (Redis:
``<prefix>:ev:``, ``:rm:``, ``:cs:``, ``:inv:``, ``:pay:``, ``:calls:``), so any
of them may share a file or a prefix without sharing a record.

The sample's default on SQLite is **one file per resource** (``docs/shoppingmall.md``,
"Topology"):
``events.db`` (OrderEventStore), ``read-model.db`` (OrderReadModelStore) and
``commerce.db`` (CommerceStateStore, with the Inventory and Payment modules,
whose seeds and first results the sample keeps in that store). SQLite has one writer
per file, so the workflow's appends do not queue behind projection or
idempotency writes, and deleting ``read-model.db`` loses only what a rebuild
restores. On Redis one prefix (default ``shoppingmall``) holds them all, apart
from the framework's Location and Relocation Store prefixes. Never point an
application store at the Location Store's SQLite file: the framework refuses a
file with tables it does not know.
"""

from __future__ import annotations

import math
from typing import Final
from urllib.parse import parse_qsl, unquote, urlsplit

import attrs

import zlink_trio as zl

__all__ = ("RedisTarget", "SqliteTarget", "parse_store_url")

_DEFAULT_PREFIX: Final = "shoppingmall"
_DEFAULT_TIMEOUT: Final = 5.0
_DEFAULT_CONNECTIONS: Final = 16
_MAX_BUSY_TIMEOUT: Final = 600.0


@attrs.frozen(kw_only=True)
class SqliteTarget:
    """A ``sqlite://`` URL: the file and how long to wait for its write lock."""

    path: str
    busy_timeout: float = _DEFAULT_TIMEOUT


@attrs.frozen(kw_only=True)
class RedisTarget:
    """A ``redis://`` URL: the server, the key prefix and the per-call timeout."""

    host: str
    port: int
    db: int
    username: str | None
    password: str | None = attrs.field(repr=False)
    prefix: str
    timeout: float
    max_connections: int

    @property
    def where(self) -> str:
        """The URL without credentials, for messages."""
        return f"redis://{self.host}:{self.port}/{self.db} (prefix {self.prefix!r})"


def _refuse(url: str, why: str) -> zl.InvalidConfiguration:
    return zl.InvalidConfiguration(
        f"store URL {url!r}: {why}; use 'sqlite:///absolute/path.db[?busy_timeout=S]' or "
        "'redis://host:port/db[?prefix=P&timeout=S&max_connections=N]'"
    )


def _options(url: str, query: str, known: tuple[str, ...]) -> dict[str, str]:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise _refuse(url, "malformed query string") from None
    values: dict[str, str] = {}
    for key, value in pairs:
        if key not in known or key in values:
            raise _refuse(url, f"unknown or repeated option {key!r} (known: {', '.join(known)})")
        values[key] = value
    return values


def _number(url: str, text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise _refuse(url, f"{name} must be a number of seconds, got {text!r}")
    return value


def _sqlite(url: str) -> SqliteTarget:
    parts = urlsplit(url)
    if parts.netloc:
        raise _refuse(url, "a SQLite store is a file on this host; a host part is not allowed")
    path = unquote(parts.path)
    if not path.startswith("/") or path.endswith("/") or parts.fragment:
        raise _refuse(url, "the path must be an absolute file path")
    options = _options(url, parts.query, ("busy_timeout",))
    timeout = _number(url, options.get("busy_timeout", str(_DEFAULT_TIMEOUT)), "busy_timeout")
    if not 0 <= timeout <= _MAX_BUSY_TIMEOUT:
        raise _refuse(url, f"busy_timeout must be seconds in 0..{_MAX_BUSY_TIMEOUT:g}")
    return SqliteTarget(path=path, busy_timeout=timeout)


def _redis(url: str) -> RedisTarget:
    parts = urlsplit(url)
    if parts.fragment:
        raise _refuse(url, "a fragment is not allowed")
    try:
        port = parts.port or 6379
        path = parts.path.strip("/")
        db = int(path) if path else 0
    except ValueError:
        raise _refuse(url, "the port and the database (the path) must be integers") from None
    options = _options(url, parts.query, ("prefix", "timeout", "max_connections"))
    prefix = options.get("prefix", _DEFAULT_PREFIX)
    if not prefix or any(c in prefix for c in "{}*?[]\\: ") or not prefix.isprintable():
        raise _refuse(url, f"prefix {prefix!r} must be non-empty printable text without "
                           "spaces, colons, braces or glob characters")
    timeout = _number(url, options.get("timeout", str(_DEFAULT_TIMEOUT)), "timeout")
    try:
        connections = int(options.get("max_connections", str(_DEFAULT_CONNECTIONS)))
    except ValueError:
        raise _refuse(url, "max_connections must be an integer") from None
    if timeout <= 0 or connections < 1 or db < 0:
        raise _refuse(url, "timeout must be > 0, max_connections >= 1 and db >= 0")
    return RedisTarget(
        host=parts.hostname or "127.0.0.1", port=port, db=db,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        prefix=prefix, timeout=timeout, max_connections=connections,
    )


def parse_store_url(url: str) -> SqliteTarget | RedisTarget:
    """Parse an application store URL (module docstring); :class:`InvalidConfiguration`."""
    if not isinstance(url, str) or "://" not in url:
        raise _refuse(str(url), "not a store URL")
    scheme = url.partition("://")[0].lower()
    if scheme == "sqlite":
        return _sqlite(url)
    if scheme == "redis":
        return _redis(url)
    raise _refuse(url, f"unknown scheme {scheme!r}")

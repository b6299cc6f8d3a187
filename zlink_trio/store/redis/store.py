"""The ``redis://host:port/db`` backend: both store protocols on one Redis.

Theory of operation
-------------------
Every store transaction is **one Lua script** run with ``EVALSHA`` (``lua``: one
prelude, one module per script family): Redis runs a script atomically,
and each script reads and checks every precondition before its first write,
so a refused or failed call has written nothing. The scripts re-implement
the memory oracle's transaction functions; the conformance suite holds them
to the same outcomes and typed errors.

Keys (``codec``): every key of one Spot carries the hash tag
``{<spot_id>}``; node keys are tagged by NodeRid; the Location Store lives
under ``<prefix>:loc:`` and the Relocation Store under ``<prefix>:rel:`` --
one server, never one key space. ``prefix`` (default ``zlink``) namespaces a
deployment or a test run.

Scripts that check a Spot *and* its owner's claim and capacity (Reserve,
CommitReady, BeginClose, the relocation steps) touch keys of several hash
slots. That is atomic on one Redis server, which is what this backend
supports; Redis Cluster would refuse it (``CROSSSLOT``) -- the
``redis+cluster://`` backend (``store/redis_cluster/``) runs these scripts per bucket.

Calls travel on the store's own two connections, one for write scripts and one for
reads, auto-pipelined (``pipeline``, RESP2 framing in ``resp``). Connection loss,
timeouts and a paused server become :class:`Unavailable`, the caller's deadline
:class:`DeadlineExceeded` (``client``).
Durability is the server's: see ``docs/stores.md`` ("Redis") for what
``appendonly`` / ``appendfsync`` and replica promotion mean.

URL: ``redis://[[user]:password@]host[:port][/db][?prefix=P&timeout=S&max_connections=N]``
(``timeout``: seconds per operation, default 5; ``max_connections``: checked and
kept for URLs written for earlier versions, which sized a connection pool with it --
the store opens two connections whatever it says).
"""

from __future__ import annotations

import math
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qsl, unquote, urlsplit

import attrs

from zlink_trio.core.errors import InvalidConfiguration
from zlink_trio.store.redis.codec import Keys
from zlink_trio.store.redis.combined import RedisCombined
from zlink_trio.store.redis.location import RedisLocationStore
from zlink_trio.store.redis.relocation import RedisRelocationStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from zlink_trio.store.redis.client import ScriptRunner

__all__ = ("RedisConfig", "RedisStore", "open_redis_store", "parse_redis_url")

_DEFAULT_PREFIX: Final = "zlink"
_DEFAULT_TIMEOUT: Final = 5.0
_DEFAULT_CONNECTIONS: Final = 64


@attrs.frozen(kw_only=True)
class RedisConfig:
    """What a ``redis://`` URL says (see the module docstring)."""

    host: str
    port: int
    db: int
    username: str | None
    password: str | None
    prefix: str
    timeout: float
    max_connections: int

    @property
    def where(self) -> str:
        """The URL without credentials, for messages."""
        return f"redis://{self.host}:{self.port}/{self.db} (prefix {self.prefix!r})"


def parse_redis_url(url: str) -> RedisConfig:
    """Parse a ``redis://`` URL; :class:`InvalidConfiguration` names what is wrong."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "redis" or parts.fragment:
        raise InvalidConfiguration(f"store URL {url!r}: expected redis://host:port/db")
    try:
        port = parts.port or 6379
        path = parts.path.strip("/")
        db = int(path) if path else 0
    except ValueError:
        raise InvalidConfiguration(
            f"store URL {url!r}: the port and the database (the path) must be integers, "
            "e.g. redis://127.0.0.1:6379/0"
        ) from None
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = set(options) - {"prefix", "timeout", "max_connections"}
    if unknown:
        raise InvalidConfiguration(
            f"store URL {url!r}: unknown option(s) {sorted(unknown)}; known: prefix, timeout, "
            "max_connections"
        )
    prefix = options.get("prefix", _DEFAULT_PREFIX)
    if not prefix or any(c in prefix for c in "{}*?[]\\") or not prefix.isprintable():
        raise InvalidConfiguration(
            f"store URL {url!r}: prefix {prefix!r} must be non-empty printable text without "
            "braces or glob characters"
        )
    try:
        timeout = float(options.get("timeout", _DEFAULT_TIMEOUT))
        connections = int(options.get("max_connections", _DEFAULT_CONNECTIONS))
    except ValueError:
        raise InvalidConfiguration(
            f"store URL {url!r}: timeout must be a number of seconds and max_connections an "
            "integer"
        ) from None
    if not (math.isfinite(timeout) and timeout > 0) or connections < 1 or db < 0:
        raise InvalidConfiguration(
            f"store URL {url!r}: timeout must be > 0, max_connections >= 1 and db >= 0"
        )
    return RedisConfig(
        host=parts.hostname or "127.0.0.1", port=port, db=db,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        prefix=prefix, timeout=timeout, max_connections=connections,
    )


class RedisStore:
    """A Location Store and a Relocation Store on one Redis, under one prefix."""

    def __init__(self, runner: ScriptRunner, config: RedisConfig) -> None:
        self.config: Final = config
        #: The key layout (tests read it to check where things live).
        self.keys: Final = Keys(config.prefix)
        self._location = RedisLocationStore(runner, self.keys)
        self._relocation = RedisRelocationStore(runner, self.keys)
        self._combined = RedisCombined(runner, self.keys, self._relocation)

    @property
    def combined(self) -> RedisCombined:
        """Both stores share the server: the combined transactions (``combined``)."""
        return self._combined

    @property
    def location(self) -> RedisLocationStore:
        """The Location Store (keys under ``<prefix>:loc:``)."""
        return self._location

    @property
    def relocation(self) -> RedisRelocationStore:
        """The Relocation Store (keys under ``<prefix>:rel:``, a separate key space)."""
        return self._relocation


@asynccontextmanager
async def open_redis_store(url: str) -> AsyncIterator[RedisStore]:
    """Connect to the Redis ``url`` names, check it answers, and yield a :class:`RedisStore`.

    Raises :class:`InvalidConfiguration` for a malformed URL, :class:`Unavailable`
    when Redis cannot be reached within the URL's ``timeout``
    (:class:`DeadlineExceeded` when the caller's deadline is earlier). Leaving the
    block closes every connection; an exception raised in the block comes out as
    raised.
    """
    config = parse_redis_url(url)
    from zlink_trio.store.redis.client import ScriptRunner
    from zlink_trio.store.redis.lua import SCRIPTS
    from zlink_trio.store.redis.pipeline import open_pipelines

    keys = Keys(config.prefix)
    runner = ScriptRunner(SCRIPTS, timeout=config.timeout, where=config.where,
                          prefixes=(keys.location, keys.relocation))
    # The senders stop when the store closes, not when a scope around the store is
    # cancelled: a shielded caller inside may still need them (``pipeline``).
    async with open_pipelines() as pipelines:
        runner.writes, runner.reads = (pipelines.open(
            host=config.host, port=config.port, db=config.db, username=config.username,
            password=config.password, timeout=config.timeout, where=config.where,
            name=name, reads=name == "reads") for name in ("writes", "reads"))
        try:
            await runner.bounded("open (PING)",
                                 lambda: runner.command("open (PING)", ["PING"]))
            yield RedisStore(runner, config)
        finally:
            runner.writes = runner.reads = None


if TYPE_CHECKING:
    from zlink_trio.store.protocol import (
        CombinedTransactions,
        LocationStore,
        RelocationStore,
        Store,
    )

    def _conforms(store: RedisStore) -> tuple[LocationStore, RelocationStore, Store,
                                              CombinedTransactions]:
        # mypy proves here that the Redis classes satisfy the protocols.
        return store.location, store.relocation, store, store.combined

"""The ``redis+cluster://`` backend: both stores on a Redis Cluster.

Theory of operation
-------------------
Every key of one Spot -- its authority record, its inboxes -- and the counters its
transactions change live in one **bucket**, one hash slot; node claims, lifecycles and
capacity units live in the **nodes slot** (``keys``). A transaction of one Spot is one
Lua script in its bucket (the single-Redis backend's own scripts, ``lua``), with the
owner's claim read from the nodes slot just before and passed in as facts, and its
capacity units taken or moved in the nodes slot around it (``runner``). NewClaim,
Remove and the store-wide reads are split or iterate the buckets (``location``).
ObjectGeneration is per bucket: strictly increasing per Spot ID, unique store-wide, no
store-wide counter (docs/decisions.md, "ObjectGeneration on Redis Cluster").

The router reads the topology (``CLUSTER SHARDS``) and sends every call through the
single-Redis backend's auto-pipelines, one pair per master, following ``MOVED`` /
``ASK`` and retrying ``TRYAGAIN`` (``router``). The
deadline and typed-error contract is the single-Redis backend's (``store.redis.client``):
the caller's deadline gives :class:`DeadlineExceeded`, the store timeout and every Redis
or connection failure :class:`StoreUnavailable`.

URL: ``redis+cluster://[[user]:password@]host:port[,host:port...][?prefix=P&timeout=S
&buckets=B]`` -- any reachable masters (the rest is discovered). ``buckets`` (default
1024, at most 16384) is fixed per deployment: the first open records it under the
prefix and a later open with another value is refused. docs/stores.md ("Redis Cluster")
has the guarantees, what a failover may lose and what ``WAIT`` would cost.
"""

from __future__ import annotations

import math
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qsl, unquote, urlsplit

import attrs

from zlink_trio.core.errors import InvalidConfiguration
from zlink_trio.store.redis.codec import text
from zlink_trio.store.redis_cluster.keys import ClusterKeys
from zlink_trio.store.redis_cluster.location import ClusterLocationStore
from zlink_trio.store.redis_cluster.relocation import ClusterCombined, ClusterRelocationStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from zlink_trio.store.redis_cluster.runner import ClusterRunner

__all__ = ("ClusterConfig", "RedisClusterStore", "open_redis_cluster_store",
           "parse_cluster_url")

_DEFAULT_PREFIX: Final = "zlink"
_DEFAULT_TIMEOUT: Final = 5.0
_DEFAULT_BUCKETS: Final = 1024
_SCHEME: Final = "redis+cluster"


@attrs.frozen(kw_only=True)
class ClusterConfig:
    """What a ``redis+cluster://`` URL says (see the module docstring)."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None
    password: str | None
    prefix: str
    timeout: float
    buckets: int

    @property
    def where(self) -> str:
        """The URL without credentials, for messages."""
        hosts = ",".join(f"{h}:{p}" for h, p in self.nodes)
        return f"redis+cluster://{hosts} (prefix {self.prefix!r})"


def parse_cluster_url(url: str) -> ClusterConfig:
    """Parse a ``redis+cluster://`` URL; :class:`InvalidConfiguration` names what is wrong."""
    parts = urlsplit(url)
    example = "e.g. redis+cluster://127.0.0.1:7001,127.0.0.1:7002"
    if parts.scheme.lower() != _SCHEME or parts.fragment or parts.path.strip("/") not in (
            "", "0"):
        raise InvalidConfiguration(f"store URL {url!r}: expected redis+cluster://host:port"
                                   f"[,host:port...] (Redis Cluster has database 0 only), "
                                   f"{example}")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    nodes = []
    for item in hosts.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidConfiguration(
                f"store URL {url!r}: {item!r} is not host:port; list one or more masters, "
                f"{example}")
        nodes.append((host.strip("[]"), int(port)))
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = set(options) - {"prefix", "timeout", "buckets"}
    if unknown:
        raise InvalidConfiguration(f"store URL {url!r}: unknown option(s) {sorted(unknown)}; "
                                   "known: prefix, timeout, buckets")
    prefix = options.get("prefix", _DEFAULT_PREFIX)
    if not prefix or any(c in prefix for c in "{}*?[]\\") or not prefix.isprintable():
        raise InvalidConfiguration(
            f"store URL {url!r}: prefix {prefix!r} must be non-empty printable text without "
            "braces or glob characters")
    try:
        timeout = float(options.get("timeout", _DEFAULT_TIMEOUT))
        buckets = int(options.get("buckets", _DEFAULT_BUCKETS))
    except ValueError:
        raise InvalidConfiguration(f"store URL {url!r}: timeout must be a number of seconds "
                                   "and buckets an integer") from None
    if not (math.isfinite(timeout) and timeout > 0) or not 1 <= buckets <= 16384:
        raise InvalidConfiguration(
            f"store URL {url!r}: timeout must be > 0 and buckets between 1 and 16384")
    return ClusterConfig(nodes=tuple(nodes), username=unquote(user) if user else None,
                         password=unquote(password) if password else None, prefix=prefix,
                         timeout=timeout, buckets=buckets)


class RedisClusterStore:
    """A Location Store and a Relocation Store on one Redis Cluster, under one prefix."""

    def __init__(self, runner: ClusterRunner, config: ClusterConfig) -> None:
        self.config: Final = config
        #: The key layout (tests read it to check where things live).
        self.keys: Final = runner.keys
        #: The router (tests read its redirect counters).
        self.router: Final = runner.router
        self._location = ClusterLocationStore(runner, runner.keys)
        self._relocation = ClusterRelocationStore(runner, runner.keys)  # type: ignore[arg-type]
        self._relocation.location = self._location
        self._combined = ClusterCombined(runner, runner.keys,  # type: ignore[arg-type]
                                         self._relocation)
        self._combined.location = self._location

    @property
    def combined(self) -> ClusterCombined:
        """The combined cold-activation transactions (``relocation``)."""
        return self._combined

    @property
    def location(self) -> ClusterLocationStore:
        """The Location Store (keys under ``<prefix>:loc:``)."""
        return self._location

    @property
    def relocation(self) -> ClusterRelocationStore:
        """The Relocation Store (keys under ``<prefix>:rel:``, a separate key space)."""
        return self._relocation


@asynccontextmanager
async def open_redis_cluster_store(url: str) -> AsyncIterator[RedisClusterStore]:
    """Connect to the cluster ``url`` names, read its slot map, yield a store.

    Raises :class:`InvalidConfiguration` for a malformed URL or a bucket count other
    than the deployment's; :class:`StoreUnavailable` when no listed node answers within
    the URL's ``timeout`` (:class:`DeadlineExceeded` for the caller's deadline). Leaving
    the block closes every connection; an exception raised in the block comes out as
    raised.
    """
    config = parse_cluster_url(url)
    from zlink_trio.store.redis.pipeline import open_pipelines
    from zlink_trio.store.redis_cluster.router import Router
    from zlink_trio.store.redis_cluster.runner import ClusterRunner

    keys = ClusterKeys(config.prefix, config.buckets)
    async with open_pipelines() as pipelines:
        router = Router(pipelines, nodes=config.nodes, username=config.username,
                        password=config.password, timeout=config.timeout,
                        where=config.where)
        runner = ClusterRunner(router, keys, timeout=config.timeout, where=config.where)
        await runner.bounded("open (CLUSTER SHARDS)", router.refresh)
        await _check_buckets(runner, config)
        try:
            yield RedisClusterStore(runner, config)
        finally:
            await runner.close()  # units in hand, shifts still waiting (shielded, bounded)


async def _check_buckets(runner: ClusterRunner, config: ClusterConfig) -> None:
    key = runner.keys.nodes("config")
    buckets, counted = await runner.bounded("open (bucket count)", lambda: runner.node(
        "n_config", [key], [config.buckets]))
    stored = int(text(buckets))
    runner.counted = text(counted) == "1"
    if stored != config.buckets:
        raise InvalidConfiguration(
            f"store URL {config.where}: this deployment was created with buckets={stored}; "
            f"open it with ?buckets={stored} (the bucket of a Spot ID must never change)")


if TYPE_CHECKING:
    from zlink_trio.store.protocol import (
        CombinedTransactions,
        LocationStore,
        RelocationStore,
        Store,
    )

    def _conforms(store: RedisClusterStore) -> tuple[LocationStore, RelocationStore, Store,
                                                     CombinedTransactions]:
        return store.location, store.relocation, store, store.combined

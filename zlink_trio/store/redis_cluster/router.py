"""Routing on Redis Cluster: the slot map, one auto-pipeline pair per master, redirects.

Theory of operation
-------------------
coredis's cluster client (``coredis.RedisCluster``) reads the topology
(``CLUSTER SHARDS``: which master serves each hash slot); the calls themselves go
through the single-Redis backend's auto-pipelines (``store.redis.pipeline``), one
write pipeline and one read pipeline per master, started on demand in the store's
nursery. A call names its slot (the hash slot of the keys it declares, ``keys``); the
router sends it to that slot's master and follows the cluster's answers:

- ``MOVED slot host:port`` -- the slot lives elsewhere now: the router records the new
  master, refreshes the whole map (at most once per ``_REFRESH_GAP`` s) and sends the
  call again. A redirected command did nothing, so resending is safe.
- ``ASK slot host:port`` -- the slot is being migrated and this key is already (or will
  be) on the target: ``ASKING`` and the call go to the target as one item on one
  connection (the map does not change).
- ``TRYAGAIN`` (a multi-key call whose keys are split by a running migration) and
  ``CLUSTERDOWN`` -- nothing ran; the router waits a little (doubling from 5 ms) and
  tries again while the deadline allows.

Past ``_MAX_ROUNDS`` redirects or retries it raises :class:`StoreUnavailable` (typed and
retryable: nothing was written). Every other error reply is raised as is, and the
runner maps it (``runner``). The deadline rule is the single-Redis one: the runner bounds
the whole call, redirects included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import trio
from coredis.exceptions import ResponseError

from zlink_trio.core.errors import StoreUnavailable
from zlink_trio.store.redis.pipeline import Pipeline
from zlink_trio.store.redis.resp import encode_command
from zlink_trio.store.redis_cluster.keys import SLOTS

if TYPE_CHECKING:
    import coredis

__all__ = ("Router",)

_MAX_ROUNDS: Final = 40
_REFRESH_GAP: Final = 0.05
_ASKING: Final = encode_command(["ASKING"])

Address = tuple[str, int]


def _str(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _address(text: str) -> Address:
    host, _, port = text.rpartition(":")
    return host, int(port)


class Router:
    """The slot -> master map and the pipelines to each master."""

    def __init__(self, client: coredis.RedisCluster[bytes], *, username: str | None,
                 password: str | None, timeout: float, where: str) -> None:
        self._client = client
        self._username = username
        self._password = password
        self._timeout = timeout
        self.where = where
        self._slots: list[Address | None] = [None] * SLOTS
        self._pipelines: dict[tuple[Address, bool], Pipeline] = {}
        self._nursery: trio.Nursery | None = None
        self._refreshed = -1.0
        self._refreshing = trio.Lock()
        #: Redirects and retries followed (tests and the benchmark read them).
        self.moved = self.asked = self.retried = 0
        #: Grows whenever the slot map changes (``sweep`` keeps its groups per version).
        self.version = 0

    async def refresh(self) -> None:
        """Read the slot map again (``CLUSTER SHARDS`` through coredis)."""
        async with self._refreshing:
            if trio.current_time() - self._refreshed < _REFRESH_GAP:
                return
            for shard in await self._client.cluster_shards():
                fields = {_str(k): v for k, v in shard.items()}
                masters = [{_str(k): v for k, v in node.items()} for node in fields["nodes"]]
                master = next((n for n in masters if _str(n["role"]) == "master"), None)
                if master is None:
                    continue
                address = (_str(master.get("ip") or master["endpoint"]), int(master["port"]))
                bounds = [int(v) for v in fields["slots"]]
                for i in range(0, len(bounds), 2):
                    for slot in range(bounds[i], bounds[i + 1] + 1):
                        self._slots[slot] = address
            self._refreshed = trio.current_time()
            self.version += 1

    def start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    def close(self) -> None:
        self._nursery = None
        for pipeline in self._pipelines.values():
            pipeline.close()

    def masters(self) -> list[Address]:
        """Every master of the slot map, in port order."""
        return sorted({a for a in self._slots if a is not None})

    def pipelines(self) -> list[Pipeline]:
        return list(self._pipelines.values())

    def _pipeline(self, address: Address, write: bool) -> Pipeline:
        pipeline = self._pipelines.get((address, write))
        if pipeline is None:
            if self._nursery is None:
                raise StoreUnavailable(f"the Redis Cluster store at {self.where} is closed; "
                                       "nothing was written (open the store again)")
            host, port = address
            pipeline = Pipeline(host=host, port=port, db=0, username=self._username,
                                password=self._password, timeout=self._timeout,
                                where=f"{self.where} (master {host}:{port})",
                                name="writes" if write else "reads", reads=not write)
            self._pipelines[address, write] = pipeline
            self._nursery.start_soon(pipeline.run)
        return pipeline

    def master_of(self, slot: int) -> Address | None:
        """The master the slot map names for ``slot`` (``None``: not known yet)."""
        return self._slots[slot]

    async def call_master(self, address: Address, frame: bytes) -> Any:
        """Send a read ``frame`` to ``address`` as is: a redirect or retry answer is raised
        (``ResponseError``), never followed -- for calls on keys of several slots, which
        no single redirect can place (``sweep``)."""
        return await self._pipeline(address, False).call(frame)

    async def call(self, slot: int, frame: bytes, *, write: bool) -> Any:
        """Send ``frame`` (a command on keys of ``slot``) to its master; follow redirects."""
        delay = 0.005
        for _ in range(_MAX_ROUNDS):
            address = self._slots[slot]
            if address is None:
                await self.refresh()
                address = self._slots[slot]
                if address is None:
                    raise StoreUnavailable(
                        f"Redis Cluster at {self.where} has no master for hash slot {slot} "
                        "(CLUSTERDOWN or a slot not covered); nothing was written, retry "
                        "once every slot is served")
            try:
                return await self._pipeline(address, write).call(frame)
            except ResponseError as error:
                text = str(error)
                kind = text.split(" ", 1)[0]
                if kind == "MOVED":
                    self.moved += 1
                    self._slots[slot] = _address(text.split()[2])
                    self.version += 1
                    await self.refresh()
                    continue
                if kind == "ASK":
                    self.asked += 1
                    target = _address(text.split()[2])
                    try:
                        return await self._pipeline(target, write).call(
                            _ASKING + frame, replies=2)
                    except ResponseError as asked:
                        if not str(asked).startswith(("TRYAGAIN", "MOVED", "ASK")):
                            raise
                elif kind not in ("TRYAGAIN", "CLUSTERDOWN", "LOADING"):
                    raise
                self.retried += 1
                await trio.sleep(delay)
                delay = min(delay * 2, 0.2)
        raise StoreUnavailable(
            f"Redis Cluster at {self.where}: hash slot {slot} kept moving or migrating "
            f"({_MAX_ROUNDS} redirects / TRYAGAIN); nothing was written, retry later")

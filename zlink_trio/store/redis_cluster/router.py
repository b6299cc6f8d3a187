"""Routing on Redis Cluster: the slot map, one auto-pipeline pair per master, redirects.

Theory of operation
-------------------
The router reads the topology with ``CLUSTER SHARDS`` (which master serves each hash
slot), sent on a read pipeline to the first node that answers: the masters of the map
it has, then the nodes the URL lists. Every call goes through the single-Redis
backend's auto-pipelines (``store.redis.pipeline``), one write pipeline and one read
pipeline per master, started on demand in the store's ``Pipelines``. A call names its
slot (the hash slot of the keys it declares, ``keys``); the router sends it to that
slot's master and follows the cluster's answers:

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

from zlink_trio.core.errors import StoreUnavailable
from zlink_trio.store.redis.pipeline import Expired
from zlink_trio.store.redis.resp import ReplyError, encode_command
from zlink_trio.store.redis_cluster.keys import SLOTS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from zlink_trio.store.redis.pipeline import Pipeline, Pipelines, QueuedCall

__all__ = ("Limits", "Router")

_MAX_ROUNDS: Final = 40
_REFRESH_GAP: Final = 0.05
_ASKING: Final = encode_command(["ASKING"])

Address = tuple[str, int]
#: A call's limits: the caller's effective deadline, and the store timeout as a point in
#: time (the pipeline raises ``Expired`` when it passes with nothing sent).
Limits = tuple[float, float]


def _str(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _address(text: str) -> Address:
    host, _, port = text.rpartition(":")
    return host, int(port)


def _fields(flat: Sequence[Any]) -> dict[str, Any]:
    """A RESP2 map (a flat list of names and values) as a dict keyed by text."""
    return {_str(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}


class Router:
    """The slot -> master map and the pipelines to each master."""

    def __init__(self, pipelines: Pipelines, *, nodes: Sequence[Address],
                 username: str | None, password: str | None, timeout: float,
                 where: str) -> None:
        self._opened = pipelines
        #: The nodes the URL lists: asked for the slot map when no master of it answers.
        self._listed = tuple(nodes)
        self._username = username
        self._password = password
        self._timeout = timeout
        self.where = where
        self._slots: list[Address | None] = [None] * SLOTS
        self._pipelines: dict[tuple[Address, bool], Pipeline] = {}
        self._refreshed = -1.0
        self._refreshing = trio.Lock()
        #: Redirects and retries followed (tests and the benchmark read them).
        self.moved = self.asked = self.retried = 0
        #: Grows whenever the slot map changes (``sweep`` keeps its groups per version).
        self.version = 0

    async def refresh(self) -> None:
        """Read the slot map again: ``CLUSTER SHARDS`` from the first node that answers.

        Raises :class:`StoreUnavailable` naming each node's failure when none answers.
        Not bounded here: the runner bounds the call it is part of.
        """
        async with self._refreshing:
            if trio.current_time() - self._refreshed < _REFRESH_GAP:
                return
            failures: list[str] = []
            for address in dict.fromkeys([*self.masters(), *self._listed]):
                try:
                    shards = await self._pipeline(address, False).command(
                        ["CLUSTER", "SHARDS"])
                except (StoreUnavailable, ReplyError) as error:
                    failures.append(f"{address[0]}:{address[1]}: {error}")
                    continue
                self._read_shards(shards)
                return
            raise StoreUnavailable(
                f"no node of Redis Cluster at {self.where} could be reached to read the "
                f"slot map ({'; '.join(failures)}); start it or list reachable masters")

    def _read_shards(self, shards: Sequence[Any]) -> None:
        """Take each shard's slot ranges for its master (``CLUSTER SHARDS``, RESP2)."""
        for shard in shards:
            fields = _fields(shard)
            masters = [_fields(node) for node in fields["nodes"]]
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

    def masters(self) -> list[Address]:
        """Every master of the slot map, in port order."""
        return sorted({a for a in self._slots if a is not None})

    def pipelines(self) -> list[Pipeline]:
        return list(self._pipelines.values())

    def _pipeline(self, address: Address, write: bool) -> Pipeline:
        pipeline = self._pipelines.get((address, write))
        if pipeline is None:
            host, port = address
            pipeline = self._opened.open(host=host, port=port, db=0, username=self._username,
                                         password=self._password, timeout=self._timeout,
                                         where=f"{self.where} (master {host}:{port})",
                                         name="writes" if write else "reads", reads=not write)
            self._pipelines[address, write] = pipeline
        return pipeline

    def master_of(self, slot: int) -> Address | None:
        """The master the slot map names for ``slot`` (``None``: not known yet)."""
        return self._slots[slot]

    def submit(self, slot: int, frame: bytes, *, expires: float
               ) -> tuple[Pipeline, QueuedCall] | None:
        """Queue ``frame`` (a write on keys of ``slot``) for its master now, to be answered
        with ``Pipeline.answer`` once the caller has sent what goes beside it; ``None``
        when the slot map names no master for it. A redirect is not followed: it comes
        back as the answer (``ReplyError``, nothing ran) -- for calls that may fail
        quietly (the runner's takes beside a script)."""
        address = self._slots[slot]
        if address is None:
            return None
        pipeline = self._pipeline(address, True)
        return pipeline, pipeline.submit(frame, expires=expires)

    async def call_master(self, address: Address, frame: bytes) -> Any:
        """Send a read ``frame`` to ``address`` as is: a redirect or retry answer is raised
        (``ReplyError``), never followed -- for calls on keys of several slots, which
        no single redirect can place (``sweep``)."""
        return await self._pipeline(address, False).call(frame)

    async def _refresh_within(self, expires: float | None) -> None:
        """:meth:`refresh`, given up (``Expired``: nothing of the call was sent) when the
        store timeout passes first."""
        if expires is None:
            await self.refresh()
            return
        with trio.move_on_at(expires):
            await self.refresh()
            return
        raise Expired

    async def call(self, slot: int, frame: bytes, *, write: bool,
                   limits: Limits | None = None) -> Any:
        """Send ``frame`` (a command on keys of ``slot``) to its master; follow redirects.

        ``limits``: the call's deadlines, enforced by the pipelines and here (without
        them, the caller's cancel scopes do).
        """
        caller, expires = limits if limits is not None else (None, None)
        delay = 0.005
        for _ in range(_MAX_ROUNDS):
            address = self._slots[slot]
            if address is None:
                await self._refresh_within(expires)
                address = self._slots[slot]
                if address is None:
                    raise StoreUnavailable(
                        f"Redis Cluster at {self.where} has no master for hash slot "
                        f"{slot} (CLUSTERDOWN or a slot not covered); nothing was "
                        "written, retry once every slot is served")
            pipeline = self._pipeline(address, write)
            item = pipeline.submit(frame, caller=caller, expires=expires)
            try:
                return await pipeline.answer(item)
            except ReplyError as error:
                refused = error
            text = str(refused)
            kind = text.split(" ", 1)[0]
            if kind == "MOVED":
                self.moved += 1
                self._slots[slot] = _address(text.split()[2])
                self.version += 1
                await self._refresh_within(expires)
                continue
            if kind == "ASK":
                self.asked += 1
                target = _address(text.split()[2])
                try:
                    return await self._pipeline(target, write).call(
                        _ASKING + frame, replies=2, caller=caller, expires=expires)
                except ReplyError as asked:
                    if not str(asked).startswith(("TRYAGAIN", "MOVED", "ASK")):
                        raise
            elif kind not in ("TRYAGAIN", "CLUSTERDOWN", "LOADING"):
                raise refused
            self.retried += 1
            if expires is not None and trio.current_time() + delay >= expires:
                raise Expired from None  # nothing ran: the redirects and retries say so
            await trio.sleep(delay)
            delay = min(delay * 2, 0.2)
        raise StoreUnavailable(
            f"Redis Cluster at {self.where}: hash slot {slot} kept moving or migrating "
            f"({_MAX_ROUNDS} redirects / TRYAGAIN); nothing was written, retry later")

"""``python -m zlink_trio.bench.stores`` — store transaction figures per backend.

Theory of operation
-------------------
:func:`bench_store_url` opens a fresh, private store of one backend for a
benchmark and removes it afterwards: ``memory://``, a SQLite file in a
temporary directory, a Redis database under a fresh ``?prefix=`` whose
keys are deleted at the end (``redis_url`` names the server, default
``redis://127.0.0.1:6379/0``), or a PostgreSQL schema of its own, dropped at the end
(``ZLINK_BENCH_POSTGRES`` names the server, default this machine's
``postgresql://postgres@127.0.0.1:5432/test``).

:func:`txn_figures` times the two transactions of a creation on one store:
Reserve and CommitReady one at a time (p50/p99 latency, milliseconds), and
Reserve + CommitReady with ``in_flight`` concurrent tasks (per second).
:func:`sqlite_figures` compares the SQLite backend's two dispatch modes the
same way: ``thread`` (every transaction whole in a worker thread) and
``inline`` (on the Trio thread with busy timeout 0, falling back to the
thread on SQLITE_BUSY). Nothing else touches the store, so the inline mode
never falls back: these are the uncontended figures.

:func:`count_store_calls` counts the store methods called while it is
active (all instances of one backend), and on the Redis backends the commands and
round trips behind them, which is how :mod:`zlink_trio.bench.cold` reports the store
calls and round trips of one cold activation.

Nothing here is a test: no figure is asserted. ``--json`` prints one JSON
object on the last line of stdout; the figures are recorded in
``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import collections
import contextvars
import functools
import inspect
import os
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio

from zlink_trio.bench.output import print_figures
from zlink_trio.core.descriptor import NodeDescriptor
from zlink_trio.core.identity import NodeRid, SpotKind, new_entry_spot_id
from zlink_trio.core.placement import Role
from zlink_trio.runtime.inspection import IN_REMINDER_TASK
from zlink_trio.store import open_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    from zlink_trio.core.records import OwnerFence
    from zlink_trio.store import Store

__all__ = (
    "BACKENDS",
    "DEFAULT_REDIS_URL",
    "StoreCalls",
    "bench_store_url",
    "count_store_calls",
    "main",
    "sqlite_figures",
    "txn_figures",
)

#: The backends the benchmarks measure, in report order.
BACKENDS: Final = ("memory", "sqlite", "redis", "postgres")
#: The Redis the benchmarks use unless told otherwise.
DEFAULT_REDIS_URL: Final = "redis://127.0.0.1:6379/0"
#: The PostgreSQL the ``postgres`` figures use (``ZLINK_BENCH_POSTGRES`` overrides it): each
#: benchmark store in a fresh schema, dropped afterwards.
DEFAULT_POSTGRES_URL: Final = "postgresql://postgres@127.0.0.1:5432/test"
_MESH = "bench"


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered) * 1e3, 4), "p99": round(p99 * 1e3, 4)}


async def _delete_redis_prefix(redis_url: str, prefix: str) -> None:
    from zlink_trio.store.redis.admin import delete_matching, open_connection

    async with open_connection(redis_url) as connection:
        await delete_matching(connection.call, f"{prefix}:*", per_command=500)


async def _delete_cluster_prefix(url: str) -> None:
    from functools import partial

    from zlink_trio.store.redis.admin import delete_matching
    from zlink_trio.store.redis_cluster import open_redis_cluster_store

    async with open_redis_cluster_store(url) as store:
        prefix = store.config.prefix
        for master in store.router.masters():  # one key per DEL: the keys span many slots
            await delete_matching(partial(store.router.call_master, master), f"{prefix}:*")


@asynccontextmanager
async def bench_store_url(backend: str, *, redis_url: str = DEFAULT_REDIS_URL,
                          directory: str | None = None,
                          cluster_url: str = "") -> AsyncIterator[str]:
    """A store URL of ``backend`` that nothing else uses; its data is removed on exit.

    ``redis_cluster`` (not in :data:`BACKENDS`: measured only when a cluster is given)
    uses ``cluster_url``, a ``redis+cluster://`` URL, under a fresh prefix.
    """
    if backend == "redis_cluster":
        if not cluster_url:
            raise ValueError("the redis_cluster backend needs a redis+cluster:// URL "
                             "(--redis-cluster or ZLINK_BENCH_REDIS_CLUSTER)")
        url = f"{cluster_url.split('?')[0]}?prefix=zlbench-{uuid.uuid4().hex[:12]}"
        try:
            yield url
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(60):
                try:
                    await _delete_cluster_prefix(url)
                except Exception as exc:  # the block's own error is what counts
                    print(f"could not delete the benchmark's Redis Cluster keys of {url} "
                          f"({type(exc).__name__}: {exc})", file=sys.stderr)
        return
    if backend == "memory":
        yield "memory://"
    elif backend == "sqlite":
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            yield f"sqlite://{Path(tmp) / 'bench.db'}"
    elif backend == "redis":
        prefix = f"zlbench-{uuid.uuid4().hex[:12]}"
        try:
            yield f"{redis_url.split('?')[0]}?prefix={prefix}"
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(30):
                try:
                    await _delete_redis_prefix(redis_url, prefix)
                except Exception as exc:  # e.g. no Redis: the block's own error is what counts
                    print(f"could not delete the benchmark's Redis keys {prefix}:* "
                          f"({type(exc).__name__}: {exc})", file=sys.stderr)
    elif backend == "postgres":
        server = os.environ.get("ZLINK_BENCH_POSTGRES") or DEFAULT_POSTGRES_URL
        prefix = f"zlbench_{uuid.uuid4().hex[:12]}"
        try:
            yield f"{server.split('?')[0]}?prefix={prefix}"
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(30):
                try:
                    await trio.to_thread.run_sync(_drop_postgres_schema, server, prefix)
                except Exception as exc:  # e.g. no server: the block's own error counts
                    print(f"could not drop the benchmark's PostgreSQL schema {prefix} "
                          f"({type(exc).__name__}: {exc})", file=sys.stderr)
    else:
        raise ValueError(f"unknown backend {backend!r}; one of {', '.join(BACKENDS)}")


def _drop_postgres_schema(server: str, prefix: str) -> None:
    import psycopg

    with psycopg.connect(server.split("?")[0], autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{prefix}" CASCADE')


class _Trips:
    """The Redis traffic of one outermost store call (:func:`count_store_calls`)."""

    __slots__ = ("commands", "done", "rounds")

    def __init__(self) -> None:
        #: Commands sent; the longest chain of answered commands; the longest chain.
        self.commands = self.done = self.rounds = 0


#: The outermost store call being counted in this task (and the tasks it starts).
_TRIPS: contextvars.ContextVar[_Trips | None] = contextvars.ContextVar("_TRIPS", default=None)


class StoreCalls(collections.Counter[str]):
    """Store method -> calls (:func:`count_store_calls`), and the Redis traffic behind
    them: ``commands`` sent and ``round_trips`` waited for."""

    def __init__(self) -> None:
        super().__init__()
        self.commands = self.round_trips = 0


@contextmanager
def count_store_calls(store: Store, *, background: bool = False
                      ) -> Iterator[StoreCalls]:
    """Count calls of every public store method of ``store``'s backend (all instances).

    The counter maps ``"location.reserve"``-style names (``"combined.…"`` for the
    store's combined transactions) to calls made while the block runs; the methods
    are restored on exit. The combined class's ``find`` (``ImmediateTransactions.find``,
    the Location Store's read without a checkpoint) counts as ``"location.find"``. The
    calls of the nodes' reminder task and of its deliveries (``IN_REMINDER_TASK``) are
    not counted: they are the node's background scan, not the work measured -- unless
    ``background`` (a node at rest: its background work is what is measured).

    On the Redis backends (one Redis, Redis Cluster) it also counts, in the counter's
    ``commands``, every command those calls sent (a script, a read) and, in its
    ``round_trips``, their round trips: per outermost call, its longest chain of
    commands each sent after the one before it was answered -- the waits one after
    another that its latency is made of; commands in flight at once, to one Redis in one
    batch or to several masters, are one round trip.
    """
    from zlink_trio.store.redis.pipeline import Pipeline

    counts = StoreCalls()
    patched: list[tuple[type, str, Any]] = []

    def counted(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            if not (background or not IN_REMINDER_TASK.get()):
                return await method(*args, **kwargs)
            counts[name] += 1
            if _TRIPS.get() is not None:  # part of an outer counted call
                return await method(*args, **kwargs)
            trips = _Trips()
            token = _TRIPS.set(trips)
            try:
                return await method(*args, **kwargs)
            finally:
                _TRIPS.reset(token)
                counts.round_trips += trips.rounds
                counts.commands += trips.commands

        return call

    submit, answer = Pipeline.submit, Pipeline.answer
    #: Each command sent and not answered yet: the call it is part of and its depth.
    depths: dict[int, tuple[_Trips, int]] = {}

    def submitted(self: Pipeline, frame: bytes, **kwargs: Any) -> Any:
        item = submit(self, frame, **kwargs)
        trips = _TRIPS.get()
        if trips is not None:
            # A command waits on the answers the call had before sending it: it ends a
            # chain one longer than the longest of those.
            depth = trips.done + 1
            trips.commands += 1
            trips.rounds = max(trips.rounds, depth)
            depths[id(item)] = (trips, depth)
        return item

    async def answered(self: Pipeline, item: Any) -> Any:
        try:
            return await answer(self, item)
        finally:
            sent = depths.pop(id(item), None)
            if sent is not None:
                sent[0].done = max(sent[0].done, sent[1])

    try:
        parts = [("location", store.location), ("relocation", store.relocation),
                 ("combined", store.combined)]
        for side, part in parts:
            cls = type(part)
            for name, method in inspect.getmembers(cls, inspect.iscoroutinefunction):
                if not name.startswith("_"):
                    patched.append((cls, name, cls.__dict__.get(name)))
                    label = "location.find" if (side, name) == ("combined", "find") \
                        else f"{side}.{name}"
                    setattr(cls, name, counted(label, method))
        patched += [(Pipeline, "submit", submit), (Pipeline, "answer", answer)]
        Pipeline.submit = submitted  # type: ignore[method-assign]
        Pipeline.answer = answered  # type: ignore[method-assign]
        yield counts
    finally:
        for cls, name, original in reversed(patched):
            if original is None:
                delattr(cls, name)
            else:
                setattr(cls, name, original)


async def _owner(store: Store, count: int) -> OwnerFence:
    descriptor = NodeDescriptor(
        mesh=_MESH, node_rid=NodeRid.generate(), node_id="bench-node", endpoint="ws://h:1/",
        roles=[Role.OBJECT_SERVER], served_types={"b": SpotKind.INSTANCE}, capacity=count,
        entry_spot_id=new_entry_spot_id("bench"),
    )
    claim = await store.location.new_claim(descriptor, now=0.0, lease=1e9)
    return claim.owner()


async def txn_figures(url: str, *, count: int = 2_000,
                      in_flight: int = 100) -> dict[str, Any]:
    """Reserve and CommitReady on the store at ``url``: latencies and throughput.

    Returns ``{"reserve": {"p50", "p99"}, "commit_ready": {"p50", "p99"}}``
    (milliseconds, one at a time), ``save_state`` (the same, for a save of a Spot's
    durable state of 64 bytes by its owner: the fenced write of ``store.state_steps``)
    and ``reserve_commit_per_s``: ``{"sequential",
    "in_flight"}`` (Reserve + CommitReady pairs per second, one at a time and with
    ``in_flight`` concurrent tasks).
    """
    async with open_store(url) as store:
        owner = await _owner(store, 2 * count + 1)
        reserve: list[float] = []
        commit: list[float] = []
        start = time.perf_counter()
        for i in range(count):
            t0 = time.perf_counter()
            fence = await store.location.reserve(f"s-{i}", kind=SpotKind.INSTANCE,
                                                 stable_type="b", mesh=_MESH, owner=owner,
                                                 now=1.0)
            t1 = time.perf_counter()
            await store.location.commit_ready(fence, now=1.0)
            reserve.append(t1 - t0)
            commit.append(time.perf_counter() - t1)
        sequential = count / (time.perf_counter() - start)
        saves: list[float] = []
        ready = await store.location.find("s-0")
        assert ready is not None
        owning, data = ready.fence(), b"x" * 64
        for _ in range(count):
            t0 = time.perf_counter()
            await store.location.save_state(owning, data, now=1.0)
            saves.append(time.perf_counter() - t0)

        async def activate(i: int) -> None:
            fence = await store.location.reserve(f"c-{i}", kind=SpotKind.INSTANCE,
                                                 stable_type="b", mesh=_MESH, owner=owner,
                                                 now=1.0)
            await store.location.commit_ready(fence, now=1.0)

        pending = iter(range(count))

        async def worker() -> None:
            for i in pending:
                await activate(i)

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(in_flight):
                nursery.start_soon(worker)
        elapsed = time.perf_counter() - start
    return {"reserve": _ms(reserve), "commit_ready": _ms(commit), "save_state": _ms(saves),
            "reserve_commit_per_s": {"sequential": round(sequential, 1),
                                     "in_flight": round(count / elapsed, 1)}}


async def sqlite_figures(*, count: int = 2_000, in_flight: int = 100,
                         synchronous: str = "normal",
                         directory: str | None = None) -> dict[str, dict[str, object]]:
    """Thread vs inline dispatch on one fresh SQLite file each: latencies and throughput.

    Returns ``{"thread": {...}, "inline": {...}}``; each holds ``reserve_ms`` and
    ``commit_ready_ms`` (``{"p50", "p99"}``, sequential) and
    ``activations_per_s`` (Reserve + CommitReady, ``in_flight`` concurrent).
    """
    figures: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        for mode in ("thread", "inline"):
            path = Path(tmp) / f"{mode}.db"
            url = f"sqlite://{path}?dispatch={mode}&synchronous={synchronous}"
            measured = await txn_figures(url, count=count, in_flight=in_flight)
            figures[mode] = {"reserve_ms": measured["reserve"],
                             "commit_ready_ms": measured["commit_ready"],
                             "activations_per_s": measured["reserve_commit_per_s"]["in_flight"]}
    return figures


async def _all_backends(count: int, redis_url: str) -> dict[str, object]:
    figures: dict[str, object] = {}
    for backend in BACKENDS:
        async with bench_store_url(backend, redis_url=redis_url) as url:
            figures[backend] = await txn_figures(url, count=count)
    return figures


def main(argv: list[str] | None = None) -> int:
    """Print the figures (``--json`` for one JSON object).

    By default Reserve/CommitReady on every backend; ``--sqlite-dispatch`` compares
    SQLite's thread and inline dispatch instead.
    """
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.bench.stores")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object, on the last line of stdout")
    parser.add_argument("--count", type=int, default=2_000)
    parser.add_argument("--redis", default=DEFAULT_REDIS_URL, help="the Redis to measure")
    parser.add_argument("--sqlite-dispatch", action="store_true",
                        help="compare SQLite's thread and inline dispatch")
    parser.add_argument("--synchronous", choices=("normal", "full"), default="normal")
    args = parser.parse_args(argv)
    figures: dict[str, object]
    if args.sqlite_dispatch:
        figures = {"sqlite": trio.run(lambda: sqlite_figures(count=args.count,
                                                              synchronous=args.synchronous))}
    else:
        figures = trio.run(lambda: _all_backends(args.count, args.redis))
    print_figures(figures, as_json=args.json, width=7)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

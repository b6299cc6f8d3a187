"""A node whose store is locked out: typed error within the deadline, then it serves again.

Issue [3/4] item 6 at the node level (the store-level fault tests live in
``tests/store/test_sqlite_backend.py`` and ``test_redis_backend.py``): another
process holds the SQLite write lock past the busy timeout, so a cold activation
cannot Reserve. The call must end with a typed ``Unavailable`` (or
``DeadlineExceeded``) before its deadline, leave no half-written authority, and
the same node must activate the Spot once the lock is released.

This test runs on Trio's real clock: the lock is held by a real SQLite connection in
a thread, and every wait is an event or a bounded call (``fail_after``), never a sleep.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import TYPE_CHECKING

import attrs
import trio

import zlink_trio as zl

if TYPE_CHECKING:
    from pathlib import Path


@attrs.frozen
class Ping:
    n: int


@attrs.frozen
class Pong:
    n: int


@zl.instance_spot("fault-echo", relocation=zl.RecreateOnRelocation())
class Echo:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx

    @zl.handler
    async def ping(self, msg: Ping) -> Pong:
        return Pong(msg.n)


class _WriteLock:
    """Holds SQLite's write lock from another connection until released."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._held = threading.Event()
        self._release = threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        conn = sqlite3.connect(self._path, isolation_level=None, timeout=5)
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._held.set()
            self._release.wait(timeout=30)
            conn.execute("ROLLBACK")
        finally:
            conn.close()

    async def __aenter__(self) -> _WriteLock:
        self._thread.start()
        await trio.to_thread.run_sync(self._held.wait, 10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        self._release.set()
        self._thread.join(timeout=10)


async def test_locked_sqlite_store_fails_typed_within_deadline_then_node_serves_again(
        tmp_path: Path):
    path = tmp_path / "faults.db"
    url = f"sqlite://{path}?busy_timeout=0.2"
    with trio.fail_after(30):
        async with zl.open_node("fault-node", store=url, spots=[Echo]) as node:
            async with _WriteLock(path) as lock:
                start = trio.current_time()
                try:
                    await node.client.request("e-1", Ping(1), reply=Pong).instance_spot(
                        "fault-echo").timeout(3)
                except (zl.Unavailable, zl.DeadlineExceeded) as error:
                    failure: zl.ZLinkError = error
                else:
                    raise AssertionError("a locked store let the activation through")
                assert trio.current_time() - start < 3.5
                lock.release()
            assert isinstance(failure, zl.StoreUnavailable | zl.DeadlineExceeded), failure
            # Nothing half-written: no authority for the ID, so a plain call is NotFound.
            assert await node.spots.find("e-1") is None
            # The store is back: the same node activates the Spot and answers.
            reply = await node.client.request("e-1", Ping(2), reply=Pong).instance_spot(
                "fault-echo").timeout(5)
            assert reply == Pong(2)
            assert (await node.spots.find("e-1")) is not None

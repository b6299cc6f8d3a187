"""A stop is a drain; a lost lease heals itself (``runtime/node.py``, ``runtime/stopping.py``).

Leaving the ``open_node`` block normally first moves the node's Spots to another live
node that serves their types, each by its relocation policy, bounded by
``stop_drain_timeout``; ``on_stop="close"`` closes them at once, as does a stop with no
other node. A node that lost its lease rejoins the Mesh as a new lifecycle of the same
NodeId as soon as the store answers (``on_lease_lost="rejoin"``, the default), or ends
its block with ``NodeLost`` (``"raise"``).

The nodes share one in-process store. The stop tests link them over loopback (a move
streams the Spot to its target) and run on the real clock; the lease tests need no
links and run on Trio's ``MockClock``. Every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

import zlink_trio as zl
from zlink_trio.runtime.coordinators import relocation
from zlink_trio.runtime.coordinators.relocation import DRAIN_PARALLEL
from zlink_trio.store import MemoryStore
from zlink_trio.store.memory import MemoryLocationStore
from zlink_trio.testing import MemoryStoreWith, open_test_node

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

#: What the Spots did: ``(event, spot_id, detail)``.
EVENTS: list[tuple[Any, ...]] = []


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Total:
    value: int


class Adapter:
    def capture(self, spot: Any) -> bytes:
        return str(spot.total).encode()

    def restore(self, spot: Any, data: bytes) -> None:
        spot.total = int(data)


class _Base:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.total = 0
        EVENTS.append(("factory", ctx.spot_id, ctx.generation))

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total)

    async def on_close(self, reason: zl.CloseReason) -> None:
        EVENTS.append(("close", self.ctx.spot_id, reason))


@zl.instance_spot("kept", relocation=zl.PreserveStateWith(Adapter()))
class Kept(_Base):
    pass


@zl.instance_spot("fresh", relocation=zl.RecreateOnRelocation())
class Fresh(_Base):
    pass


@zl.instance_spot("pinned", relocation=zl.DisableRelocation())
class Pinned(_Base):
    pass


SPOTS = [Kept, Fresh, Pinned]


@pytest.fixture(autouse=True)
def _clean() -> None:
    EVENTS.clear()


async def _fill(node: zl.Node) -> None:
    """One Spot of each type on ``node``, each with a total of 5."""
    for spot_id, kind in (("k-1", "kept"), ("f-1", "fresh"), ("p-1", "pinned")):
        reply = await node.client.request(spot_id, Add(5), reply=Total).instance_spot(kind)
        assert reply == Total(5)


def linked(node_id: str, store: MemoryStore, **options: Any) -> Any:
    """A node with loopback links on the real clock, stopping by ``on_stop="drain"``."""
    options.setdefault("on_stop", "drain")
    return zl.open_node(node_id, store=store, spots=SPOTS, **options)


def _owner(store: MemoryStore, spot_id: str) -> zl.NodeRid | None:
    record = store.location.state.records.get(spot_id)
    return None if record is None else record.owner.node_rid


@asynccontextmanager
async def a_then_b(store: MemoryStore, *, fail: bool = False,
                   **a_options: Any) -> AsyncIterator[tuple[zl.Node, zl.Node]]:
    """Node ``a`` fills itself (one Spot of each type), then ``b`` starts, then ``a``'s
    block ends -- by raising when ``fail`` -- while ``b`` serves; yields both once ``a``
    has left (``a`` placed its Spots alone: ``b`` was not there yet)."""
    filled, leave, left = trio.Event(), trio.Event(), trio.Event()
    held: list[zl.Node] = []

    async def run_a() -> None:
        with pytest.raises(KeyError) if fail else contextlib.nullcontext():
            async with linked("a", store, **a_options) as a:
                held.append(a)
                await _fill(a)
                filled.set()
                await leave.wait()
                if fail:
                    raise KeyError("the application failed")
        left.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_a)
        await filled.wait()
        assert {_owner(store, s) for s in ("k-1", "f-1", "p-1")} == {held[0].node_rid}
        async with linked("b", store) as b:
            leave.set()
            await left.wait()
            yield held[0], b


async def test_leaving_the_block_moves_each_spot_by_its_policy_to_another_node() -> None:
    store = MemoryStore()
    with trio.fail_after(30):
        async with a_then_b(store) as (_, b):
            # The block ended normally: k-1 and f-1 moved to b, p-1 (DisableRelocation)
            # closed with a's shutdown.
            assert _owner(store, "k-1") == b.node_rid
            assert _owner(store, "f-1") == b.node_rid
            assert _owner(store, "p-1") is None
            assert ("close", "p-1", zl.CloseReason.NODE_SHUTDOWN) in EVENTS
            # State went with PreserveStateWith, not with RecreateOnRelocation.
            assert await b.client.request("k-1", Add(1), reply=Total) == Total(6)
            assert await b.client.request("f-1", Add(1), reply=Total) == Total(1)
            assert await b.client.request("p-1", Add(1), reply=Total).instance_spot(
                "pinned") == Total(1)


async def test_on_stop_close_closes_every_spot_even_with_another_node() -> None:
    store = MemoryStore()
    with trio.fail_after(30):
        async with a_then_b(store, on_stop="close"):
            assert [_owner(store, s) for s in ("k-1", "f-1", "p-1")] == [None] * 3
            assert sorted(e[1] for e in EVENTS if e[0] == "close") == ["f-1", "k-1", "p-1"]


async def test_with_no_other_node_the_stop_closes_every_spot() -> None:
    store = MemoryStore()
    with trio.fail_after(30):
        async with linked("a", store) as a:
            await _fill(a)
        assert [_owner(store, s) for s in ("k-1", "f-1", "p-1")] == [None] * 3
        assert sorted(e[1:] for e in EVENTS if e[0] == "close") == [
            (s, zl.CloseReason.NODE_SHUTDOWN) for s in ("f-1", "k-1", "p-1")]


async def test_a_block_that_raises_closes_instead_of_moving() -> None:
    store = MemoryStore()
    with trio.fail_after(30):
        async with a_then_b(store, fail=True):
            assert [_owner(store, s) for s in ("k-1", "f-1", "p-1")] == [None] * 3


async def test_the_stop_drain_is_bounded_by_stop_drain_timeout() -> None:
    """A store that answers a move's first step only after 2 s (a real one answers or
    times out): the stop gives up after ``stop_drain_timeout`` and closes what did not
    move, long before ``default_timeout``."""

    class Slow(MemoryLocationStore):
        async def begin_relocation(self, *args: Any, **kwargs: Any) -> Any:
            await trio.sleep(2)
            return await super().begin_relocation(*args, **kwargs)

    store = MemoryStoreWith(Slow())
    with trio.fail_after(30):
        started = trio.current_time()
        async with a_then_b(store, default_timeout=100, stop_drain_timeout=0.5):
            assert trio.current_time() - started < 10
            assert [_owner(store, s) for s in ("k-1", "f-1", "p-1")] == [None] * 3


async def rejoined(node: zl.Node, first: zl.NodeRid) -> None:
    """Wait (in mock time, bounded by the test's fail_after) for a new lifecycle."""
    for _ in range(100_000):
        if node.node_rid != first:
            return
        await trio.sleep(0.05)
    pytest.fail("the node never rejoined")


class Flushable(MemoryLocationStore):
    """A store that can lose everything at once (Redis restarted without persistence)."""

    def flush(self) -> None:
        fresh = MemoryLocationStore()
        self.state = fresh.state


async def test_a_node_whose_store_lost_its_data_rejoins_and_serves_again(
        autojump_clock: Any) -> None:
    location = Flushable()
    store = MemoryStoreWith(location)
    with trio.fail_after(60):
        async with open_test_node("a", store=store, spots=SPOTS, lease=3) as a:
            await _fill(a)
            first_rid = a.node_rid
            location.flush()
            store.relocation.state = type(store.relocation.state)()
            lost_at = trio.current_time()
            # The next renewal finds the claim gone: the lifecycle ends (every Spot stops
            # with OWNERSHIP_LOST), and a new one joins under the same NodeId.
            for _ in range(100_000):  # a health check sees a healing node, not a dead one
                if a.statistics().state == "stopped":
                    break
                await trio.sleep(0.01)
            assert a.statistics().rejoining
            await rejoined(a, first_rid)
            assert not a.statistics().rejoining
            assert trio.current_time() - lost_at < 2 * 3
            assert ("close", "k-1", zl.CloseReason.OWNERSHIP_LOST) in EVENTS
            assert a.node_id == "a"
            assert a.statistics().state == "serving"
            reply = await a.client.request("k-1", Add(1), reply=Total).instance_spot("kept")
            assert reply == Total(1)  # the state was lost with the store, the Spot is new
            assert _owner(store, "k-1") == a.node_rid


async def test_after_the_store_lost_its_data_no_node_serves_before_the_old_leases_ran_out(
        autojump_clock: Any) -> None:
    """FLUSHALL while two nodes serve: the first to notice must not serve (and activate
    a Spot anew) while the other may still run its Spots under a lease granted before."""
    location = Flushable()
    store = MemoryStoreWith(location)
    with trio.fail_after(60):
        async with open_test_node("a", store=store, spots=SPOTS, lease=3) as a, \
                open_test_node("b", store=store, spots=SPOTS, lease=3) as b:
            await trio.sleep(0.5)  # the two renew at different moments
            olds = {a: a.node_rid, b: b.node_rid}
            granted = max(a.statistics().lease_expires_at, b.statistics().lease_expires_at)
            location.flush()
            served_again: dict[str, float] = {}
            for _ in range(100_000):
                for node, old in olds.items():
                    if node.node_rid != old and node.node_id not in served_again:
                        served_again[node.node_id] = trio.current_time()
                if len(served_again) == 2:
                    break
                await trio.sleep(0.01)
            assert min(served_again.values()) >= granted
            assert max(served_again.values()) - granted < 3  # and within a lease of it


async def test_on_lease_lost_raise_ends_the_block_with_node_lost(autojump_clock: Any) -> None:
    location = Flushable()
    store = MemoryStoreWith(location)
    async def run() -> None:
        async with open_test_node("a", store=store, spots=SPOTS, lease=3,
                                  on_lease_lost="raise") as a:
            await _fill(a)
            location.flush()
            await trio.sleep_forever()  # the node's loss cancels the block

    with trio.fail_after(60), pytest.raises(zl.NodeLost, match="on_lease_lost='raise'"):
        await run()


CHILD = """
import signal, sys
import attrs
import trio
import zlink_trio as zl

@attrs.frozen
class Add:
    n: int

@zl.instance_spot("kept", relocation=zl.RecreateOnRelocation())
class Kept:
    def __init__(self, ctx):
        self.ctx = ctx

    @zl.handler
    async def add(self, msg: Add) -> None:
        pass

async def main():
    async with zl.open_node("a", store=sys.argv[1], spots=[Kept],
                            stop_on=(signal.SIGTERM, signal.SIGINT)) as node:
        await node.client.request("k-1", Add(1), reply=None).instance_spot("kept")
        print("ready", flush=True)
        await trio.sleep_forever()
    print("left the block", flush=True)

trio.run(main)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_stop_on_signal_ends_the_block_and_the_process_leaves_cleanly(
        tmp_path: Path, signum: int) -> None:
    """A real process: the signal ends the block (no KeyboardInterrupt, no traceback), the
    node stops (its Spot closes: no other node) and the process exits 0."""
    store = f"sqlite:///{tmp_path / 'stop.db'}"
    with trio.fail_after(60):
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-c", CHILD, store], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        assert proc.stdout is not None
        assert proc.stderr is not None
        out = b""
        while b"ready" not in out:
            chunk = await proc.stdout.receive_some(1024)
            assert chunk, "the child ended before it was ready"
            out += chunk
        proc.send_signal(signum)
        async with trio.open_nursery() as nursery:
            errors: list[bytes] = []

            async def read_err() -> None:
                errors.append(b"".join([chunk async for chunk in proc.stderr]))

            nursery.start_soon(read_err)
            out += b"".join([chunk async for chunk in proc.stdout])
        assert await proc.wait() == 0, errors
        assert b"left the block" in out
        assert b"Traceback" not in errors[0]
    async with zl.open_store(store) as opened:
        assert await opened.location.find("k-1") is None  # closed by the stop


async def test_a_second_signal_starts_no_further_move_and_closes_the_rest() -> None:
    """``stop_on`` in this (main) thread: the first SIGUSR1 ends node a's block and starts
    the drain; a second one, sent as the first moves begin (each first store step takes
    1 s here), starts no further move: the Spots not yet tried close instead."""

    class Slow(MemoryLocationStore):
        signalled = False

        async def begin_relocation(self, *args: Any, **kwargs: Any) -> Any:
            if not Slow.signalled:
                Slow.signalled = True
                os.kill(os.getpid(), signal.SIGUSR1)  # the second signal
            await trio.sleep(1)
            return await super().begin_relocation(*args, **kwargs)

    store = MemoryStoreWith(Slow())
    spot_ids = [f"k-{i}" for i in range(DRAIN_PARALLEL + 4)]
    filled, left = trio.Event(), trio.Event()

    async def run_a() -> None:
        async with linked("a", store, stop_on=(signal.SIGUSR1,)) as a:
            for spot_id in spot_ids:
                await a.client.request(spot_id, Add(1), reply=Total).instance_spot("kept")
            filled.set()
            await trio.sleep_forever()  # the first signal ends the block here
        left.set()

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_a)
            await filled.wait()
            async with linked("b", store) as b:
                os.kill(os.getpid(), signal.SIGUSR1)  # the first signal
                await left.wait()
                owners = [_owner(store, spot_id) for spot_id in spot_ids]
    assert owners.count(b.node_rid) == DRAIN_PARALLEL, owners  # the moves under way
    assert owners.count(None) == 4, owners  # never tried: closed


@pytest.mark.parametrize("listed", [None, 1], ids=["all-listed", "one-listed"])
async def test_a_drain_out_of_time_lists_every_spot_it_did_not_move(
        listed: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """``node.drain`` whose deadline passes while its first moves are under way (the store
    takes 1 s to begin each): those finish, no move begins after the deadline -- and the
    Spots whose move never began are listed as not moved, still on the node (past
    ``NOT_BEGUN_LISTED`` of them, counted in ``unlisted``), so neither the caller nor
    ``zlink-trio drain`` takes the drain for complete."""
    if listed is not None:
        monkeypatch.setattr(relocation, "NOT_BEGUN_LISTED", listed)

    class Slow(MemoryLocationStore):
        async def begin_relocation(self, *args: Any, **kwargs: Any) -> Any:
            await trio.sleep(1)
            return await super().begin_relocation(*args, **kwargs)

    store = MemoryStoreWith(Slow())
    spot_ids = [f"k-{i}" for i in range(DRAIN_PARALLEL + 4)]
    with trio.fail_after(30):
        async with linked("a", store, on_stop="close") as a:
            for spot_id in spot_ids:
                await a.client.request(spot_id, Add(1), reply=Total).instance_spot("kept")
            async with linked("b", store, on_stop="close"):
                result = await a.drain(timeout=0.5)
                ids = [r.ref.spot_id for r in (*result.moved, *result.not_moved)]
                assert len(set(ids)) == len(ids) == len(spot_ids) - result.unlisted
                not_begun = [r.ref.spot_id for r in result.not_moved
                             if r.reason is not None and "move began" in r.reason]
                assert len(not_begun) == (4 if listed is None else listed), result
                assert result.unlisted == (0 if listed is None else 4 - listed)
                for spot_id in not_begun:
                    assert a.inspection.hosted_spot(spot_id) is not None


async def test_a_stop_with_no_time_to_move_closes_everything(tmp_path: Path) -> None:
    """``stop_drain_timeout=0`` on a store whose reads take real time: no move is tried,
    the stop still closes every Spot and removes the claim (nothing is left behind)."""
    url = f"sqlite:///{tmp_path / 'zero.db'}"
    with trio.fail_after(30):
        async with zl.open_store(url) as store:
            async with zl.open_node("a", store=url, spots=SPOTS, stop_drain_timeout=0) as a:
                await _fill(a)
            assert await store.location.descriptors(now=time.time()) == []
            for spot_id in ("k-1", "f-1", "p-1"):
                assert await store.location.find(spot_id) is None


async def test_leaving_the_block_while_a_rejoin_waits_on_the_store_returns_at_once(
        autojump_clock: Any) -> None:
    """After a lost lease the node rejoins; a stop that comes while that start waits on
    a store that does not answer ends it at once, not after the store's deadlines."""

    class Stuck(Flushable):
        stuck = False

        async def new_claim(self, *args: Any, **kwargs: Any) -> Any:
            if self.stuck:
                await trio.sleep_forever()
            return await super().new_claim(*args, **kwargs)

    location = Stuck()
    store = MemoryStoreWith(location)
    with trio.fail_after(60):
        async with open_test_node("a", store=store, spots=SPOTS, lease=3,
                                  default_timeout=30) as a:
            await _fill(a)
            location.stuck = True
            location.flush()
            for _ in range(100_000):  # the loss is learned at the next renewal
                if a.statistics().state == "stopped":
                    break
                await trio.sleep(0.05)
            await trio.sleep(1)  # the rejoin's claim now waits on the store
            left = trio.current_time()
        assert trio.current_time() - left < 1


async def test_stop_on_outside_the_main_thread_is_refused_before_the_store_is_opened() -> None:
    async def open_in_thread() -> None:
        async with zl.open_node("a", store="sqlite:///nonexistent-dir/x.db", listen=None,
                                stop_on=(signal.SIGTERM,)):
            pytest.fail("opened")

    def own_run() -> BaseException | None:
        try:
            trio.run(open_in_thread)
        except BaseException as exc:  # (the outcome under test)
            return exc
        return None

    with trio.fail_after(30):
        error = await trio.to_thread.run_sync(own_run)
    assert isinstance(error, zl.InvalidConfiguration), error
    assert "main thread" in error.message

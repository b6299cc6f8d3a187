"""Planned relocation and Message Follow between nodes of one process (issue #11).

The nodes share one store -- every test runs on ``memory://``, a SQLite file and Redis
(a fresh key prefix) -- and talk over real loopback links, as separate processes do;
the tests run on the real clock (links wait on sockets) and every one is bounded by
``trio.fail_after``. Where a test needs the move to happen while a turn runs, a gate
(a ``trio.Event``) holds that turn: nothing sleeps to wait for something.
"""

from __future__ import annotations

import time
import uuid
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

import zlink_trio as zl
from zlink_trio.core.deadline import Deadline
from zlink_trio.core.records import AuthorityState
from zlink_trio.runtime import charts
from zlink_trio.runtime.calls.completion import Completion
from zlink_trio.runtime.calls.delivery import Delivery
from zlink_trio.runtime.coordinators import relocation as relocation_module
from zlink_trio.runtime.coordinators.relocation_payload import RelocationPayload
from zlink_trio.runtime.coordinators.remote_relocation import send_relocate
from zlink_trio.runtime.incarnation.incarnation import Incarnation
from zlink_trio.runtime.mesh import remote_calls
from zlink_trio.store import open_store
from zlink_trio.wire.frames import FollowRoute as FollowFrameRoute
from zlink_trio.wire.frames import ReadyRoute

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

#: What the Spots below did: ``(event, spot_id, node_rid, detail)``.
EVENTS: list[tuple[Any, ...]] = []
KNOBS: dict[str, Any] = {}


@attrs.frozen
class Put:
    n: int


@attrs.frozen
class Where:
    total: int
    node: str


@attrs.frozen
class Hold:
    tag: str


@attrs.frozen
class Tick:
    seconds: float


class Adapter:
    def capture(self, spot: Any) -> bytes:
        if KNOBS.get("fail_capture"):
            raise RuntimeError("capture failed")
        return str(spot.total).encode()

    def restore(self, spot: Any, data: bytes) -> None:
        if KNOBS.get("fail_restore"):
            raise RuntimeError("restore failed")
        spot.total = int(data)


class _Base:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.total = 0
        EVENTS.append(("factory", ctx.spot_id, str(ctx.ref.node_rid), ctx.generation))

    @zl.handler
    async def put(self, msg: Put) -> Where:
        self.total += msg.n
        EVENTS.append(("put", self.ctx.spot_id, str(self.ctx.ref.node_rid), msg.n))
        return Where(self.total, str(self.ctx.ref.node_rid))

    @zl.handler
    async def hold(self, msg: Hold) -> None:
        EVENTS.append(("hold-start", self.ctx.spot_id, str(self.ctx.ref.node_rid), msg.tag))
        KNOBS["holding"].set()
        await KNOBS["gate"].wait()

    @zl.handler
    async def tick_every(self, msg: Tick) -> None:
        self.ctx.start_timer(msg.seconds, self.tick, period=msg.seconds)

    async def tick(self) -> None:
        EVENTS.append(("tick", self.ctx.spot_id, str(self.ctx.ref.node_rid), 0))
        if "ticked" in KNOBS:
            KNOBS["ticked"].set()

    async def on_close(self, reason: zl.CloseReason) -> None:
        EVENTS.append(("close", self.ctx.spot_id, str(self.ctx.ref.node_rid), reason))


@zl.instance_spot("kept", relocation=zl.PreserveStateWith(Adapter()))
class Kept(_Base):
    pass


@zl.instance_spot("fresh", relocation=zl.RecreateOnRelocation())
class Fresh(_Base):
    pass


@zl.instance_spot("pinned", relocation=zl.DisableRelocation())
class Pinned(_Base):
    pass


@zl.instance_spot("slow", relocation=zl.PreserveStateWith(Adapter()))
class Slow(_Base):
    """Its activation waits for ``KNOBS["activate_gate"]`` (when set)."""

    async def on_activate(self) -> None:
        if "activate_gate" in KNOBS:
            KNOBS["activating"].set()
            await KNOBS["activate_gate"].wait()


@zl.user_spot("room", relocation=zl.PreserveStateWith(Adapter()))
class Room(_Base):
    def __init__(self, ctx: zl.SpotContext, request: object) -> None:
        super().__init__(ctx)


SPOTS = [Kept, Fresh, Pinned, Slow, Room]


@pytest.fixture(autouse=True)
def _clean() -> None:
    EVENTS.clear()
    KNOBS.clear()


@asynccontextmanager
async def nodes(url: str, count: int, **options: Any) -> AsyncIterator[list[zl.Node]]:
    """``count`` nodes on the store at ``url``; the first takes every new Spot (the others
    have placement weight 0: only a ``to=`` names them as a target)."""
    async with AsyncExitStack() as stack:
        if url.startswith("memory://"):  # the named in-process store lives while held
            await stack.enter_async_context(open_store(url))
        yield [await stack.enter_async_context(zl.open_node(
            f"node-{i}", store=url, spots=SPOTS, placement_weight=1.0 if i == 0 else 0.0,
            on_stop="close", **options)) for i in range(count)]


def another_node(url: str, index: int) -> Any:
    """A node that placement may choose, opened after the first one's Spots were placed."""
    return zl.open_node(f"node-{index}", store=url, spots=SPOTS, on_stop="close")


@contextmanager
def on_step(chart: str, event: str) -> Iterator[trio.Event]:
    """An event set when the runtime steps ``chart`` by ``event`` (the charts' TRACE)."""
    seen = trio.Event()

    def observer(name: str, _state: str, taken: str, _target: str) -> None:
        if name == chart and taken == event:
            seen.set()

    charts.TRACE.append(observer)
    try:
        yield seen
    finally:
        charts.TRACE.remove(observer)


def done(kind: str, node: zl.Node) -> list[tuple[Any, ...]]:
    return [e for e in EVENTS if e[0] == kind and e[2] == str(node.node_rid)]


async def test_a_moved_spot_keeps_its_id_generation_and_state_and_serves_at_the_target(url: str):
    with trio.fail_after(20):
        async with nodes(url, 2) as (a, b):
            assert await a.client.request("k-1", Put(5), reply=Where).instance_spot("kept") \
                == Where(5, str(a.node_rid))
            before = await a.spots.find("k-1")
            result = await a.relocate("k-1", to="node-1")
            assert result.outcome is zl.RelocationOutcome.COMMITTED
            assert result.reason is None
            assert result.ref.node_rid == b.node_rid
            assert before is not None
            assert (result.ref.spot_id, result.ref.generation) == ("k-1", before.generation)
            # PreserveStateWith: the state came along; both nodes now reach it at b.
            assert await a.client.request("k-1", Put(1), reply=Where) == Where(6, str(b.node_rid))
            assert await b.client.request("k-1", Put(1), reply=Where) == Where(7, str(b.node_rid))
            assert a.statistics().active_spots == 0
            assert b.statistics().active_spots == 1
    factories = [e for e in EVENTS if e[0] == "factory"]
    assert [(e[2], e[3]) for e in factories] == [(str(a.node_rid), before.generation),
                                               (str(b.node_rid), before.generation)]
    assert ("close", "k-1", str(a.node_rid), zl.CloseReason.RELOCATED) in EVENTS


async def test_recreate_on_relocation_runs_the_factory_at_the_target_without_the_state(url: str):
    with trio.fail_after(20):
        async with nodes(url, 1) as (a,):
            await a.client.request("f-1", Put(5), reply=Where).instance_spot("fresh")
            async with another_node(url, 1) as b:
                result = await a.relocate("f-1")  # placement picks the only other node
                assert result.outcome is zl.RelocationOutcome.COMMITTED
                assert result.ref.node_rid == b.node_rid
                assert await a.client.request("f-1", Put(1), reply=Where) == \
                    Where(1, str(b.node_rid))


async def test_disable_relocation_and_the_entry_spot_are_refused_and_nothing_changes(url: str):
    with trio.fail_after(20):
        async with nodes(url, 2) as (a, _b):
            await a.client.request("p-1", Put(3), reply=Where).instance_spot("pinned")
            refused = await a.relocate("p-1")
            assert refused.outcome is zl.RelocationOutcome.REFUSED
            assert "DisableRelocation" in (refused.reason or "")
            entry = await a.relocate(a.entry_spot_id)
            assert entry.outcome is zl.RelocationOutcome.REFUSED
            assert "Entry" in (entry.reason or "")
            assert await a.client.request("p-1", Put(1), reply=Where) == Where(4, str(a.node_rid))


async def test_relocating_an_unknown_or_foreign_spot_raises(url: str):
    with trio.fail_after(20):
        async with nodes(url, 2) as (a, b):
            await a.client.request("k-2", Put(1), reply=Where).instance_spot("kept")
            with pytest.raises(zl.NotFound):
                await a.relocate("nobody")
            with pytest.raises(zl.InvalidOperation,
                               match=r"owned by node 'node-0' \(lifecycle 1\), not by "
                                     r"node 'node-1'") as foreign:
                await b.relocate("k-2")  # a owns it
            assert str(a.node_rid) not in foreign.value.message  # named by NodeId only
            no_such = await a.relocate("k-2", to="node-9")
            assert no_such.outcome is zl.RelocationOutcome.REFUSED
            assert "node-9" in (no_such.reason or "")


async def test_queued_work_moves_and_held_ingress_follows_in_order_exactly_once(url: str):
    KNOBS["gate"] = trio.Event()
    KNOBS["holding"] = trio.Event()
    replies: dict[int, Where] = {}
    moving: list[zl.RelocationResult] = []
    with trio.fail_after(20):
        async with nodes(url, 2) as (a, b), trio.open_nursery() as nursery:
            await a.client.request("k-3", Put(1), reply=Where).instance_spot("kept")
            await a.client.send("k-3", Hold("running"))  # the turn running at the seal
            await KNOBS["holding"].wait()

            async def put(n: int) -> None:
                replies[n] = await a.client.request("k-3", Put(n), reply=Where).timeout(15)

            async def relocate() -> None:
                moving.append(await a.relocate("k-3", to="node-1"))

            # Queued before the seal (a send returns at admission, so these are in order):
            # they move in the payload and run at the target.
            await a.client.send("k-3", Put(10))
            await a.client.send("k-3", Put(20))
            nursery.start_soon(put, 30)
            await trio.testing.wait_all_tasks_blocked()
            with on_step("PlannedRelocation", "seal") as sealed:
                nursery.start_soon(relocate)
                await sealed.wait()  # sealed, waiting for the running turn
            # Sealed: these go to the hold and follow the Spot after the commit.
            await a.client.send("k-3", Put(100))
            await a.client.send("k-3", Put(200))
            nursery.start_soon(put, 300)
            await trio.testing.wait_all_tasks_blocked()
            KNOBS["gate"].set()
    assert moving[0].outcome is zl.RelocationOutcome.COMMITTED
    puts = [e[3] for e in EVENTS if e[0] == "put"]
    assert puts == [1, 10, 20, 30, 100, 200, 300]  # each exactly once, in order
    assert [e[3] for e in done("put", b)] == [10, 20, 30, 100, 200, 300]
    assert replies == {30: Where(61, str(b.node_rid)), 300: Where(661, str(b.node_rid))}


async def test_a_call_on_the_old_route_follows_the_spot_without_running_at_the_source(url: str):
    with trio.fail_after(20):
        async with nodes(url, 3) as (a, b, c):
            await a.client.request("k-4", Put(1), reply=Where).instance_spot("kept")
            await c.client.request("k-4", Put(1), reply=Where)  # c caches the route to a
            assert (await a.relocate("k-4", to="node-1")).outcome is \
                zl.RelocationOutcome.COMMITTED
            # c's cached route still names a: a forwards along its Message Follow route.
            assert await c.client.request("k-4", Put(1), reply=Where) == Where(3, str(b.node_rid))
            await c.client.send("k-4", Put(1))  # one sender's messages keep their order
            assert await c.client.request("k-4", Put(0), reply=Where) == Where(4, str(b.node_rid))
    assert [e[3] for e in done("put", a)] == [1, 1]


async def test_a_spot_that_moved_twice_is_followed_over_two_hops(url: str):
    with trio.fail_after(20):
        async with nodes(url, 3) as (a, b, c):
            await a.client.request("k-5", Put(1), reply=Where).instance_spot("kept")
            await c.client.request("k-5", Put(1), reply=Where)  # c's route names a
            assert (await a.relocate("k-5", to="node-1")).outcome is \
                zl.RelocationOutcome.COMMITTED
            assert (await b.relocate("k-5", to="node-2")).outcome is \
                zl.RelocationOutcome.COMMITTED
            # c -> a (route to b) -> b (route to c) -> c: two Message Follow hops.
            assert await c.client.request("k-5", Put(1), reply=Where) == Where(3, str(c.node_rid))


async def test_an_adapter_failure_before_relay_ready_aborts_and_the_source_keeps_serving(url: str):
    with trio.fail_after(20):
        async with nodes(url, 2) as (a, _b):
            await a.client.request("k-6", Put(2), reply=Where).instance_spot("kept")
            KNOBS["fail_capture"] = True
            aborted = await a.relocate("k-6", to="node-1")
            assert aborted.outcome is zl.RelocationOutcome.ABORTED
            assert "capture" in (aborted.reason or "")
            KNOBS["fail_capture"] = False
            KNOBS["fail_restore"] = True
            aborted = await a.relocate("k-6", to="node-1")
            assert aborted.outcome is zl.RelocationOutcome.ABORTED
            assert "restore" in (aborted.reason or "")
            assert await a.client.request("k-6", Put(1), reply=Where) == Where(3, str(a.node_rid))
            ref = await a.spots.find("k-6")
            assert ref is not None
            assert ref.node_rid == a.node_rid


async def test_a_fault_of_the_source_after_the_seal_aborts_the_move_and_the_spot_serves_again(
        url: str, monkeypatch: pytest.MonkeyPatch):
    # A fault that is not a ZLinkError (a bug in the capture, here) after the seal: the
    # move is aborted, the Spot serves again at the source, and the fault reaches the
    # caller -- the Spot never stays sealed until the node stops.
    def broken(*_: object) -> object:
        raise KeyError("a bug in the capture")

    with trio.fail_after(20):
        async with nodes(url, 2) as (a, _b):
            await a.client.request("k-9", Put(2), reply=Where).instance_spot("kept")
            monkeypatch.setattr(relocation_module, "capture", broken)
            with pytest.raises(KeyError, match="a bug in the capture"):
                await a.relocate("k-9", to="node-1")
            monkeypatch.undo()
            served = await a.client.request("k-9", Put(1), reply=Where).timeout(3)
            assert served == Where(3, str(a.node_rid))
            ref = await a.spots.find("k-9")
            assert ref is not None
            assert ref.node_rid == a.node_rid
            moved = await a.relocate("k-9", to="node-1")  # and it moves afterwards
            assert moved.outcome is zl.RelocationOutcome.COMMITTED


async def test_timers_move_with_the_spot_and_fire_at_the_target_only(url: str):
    KNOBS["ticked"] = trio.Event()
    with trio.fail_after(20):
        async with nodes(url, 2) as (a, b):
            await a.client.request("k-7", Tick(0.05), reply=None).instance_spot("kept")
            await KNOBS["ticked"].wait()
            assert (await a.relocate("k-7", to="node-1")).outcome is \
                zl.RelocationOutcome.COMMITTED
            ticks_at_a = len(done("tick", a))
            KNOBS["ticked"] = trio.Event()
            await KNOBS["ticked"].wait()
            assert done("tick", b)
            assert len(done("tick", a)) == ticks_at_a  # the source fires no more


async def test_with_no_other_node_the_refusal_says_there_is_no_other_node(url: str):
    with trio.fail_after(20):
        async with nodes(url, 1) as (a,):
            await a.client.request("k-1", Put(1), reply=Where).instance_spot("kept")
            alone = await a.relocate("k-1")
            assert alone.outcome is zl.RelocationOutcome.REFUSED
            assert alone.reason is not None
            assert alone.reason.startswith("there is no other node to move Spot 'k-1'")
            assert "node 'node-0' is the only live node of mesh 'world' that serves " \
                   "INSTANCE type 'kept'" in alone.reason
            itself = await a.relocate("k-1", to="node-0")
            assert itself.outcome is zl.RelocationOutcome.REFUSED
            assert "'node-0' is the node that owns Spot 'k-1'" in (itself.reason or "")
            drained = await a.drain()  # nowhere to go either: listed with the same reason
            assert [r.reason for r in drained.not_moved] == [alone.reason]
            async with another_node(url, 1) as b:
                await b.drain()
                others_draining = await a.relocate("k-1")
                assert others_draining.outcome is zl.RelocationOutcome.REFUSED
                assert "(node 'node-1') is draining or stopping" in (
                    others_draining.reason or "")
                await b.undrain()
                moved = await a.relocate("k-1")
                assert moved.outcome is zl.RelocationOutcome.COMMITTED
                assert moved.ref.node_rid == b.node_rid


async def test_drain_moves_every_movable_spot_and_lists_the_rest(url: str):
    with trio.fail_after(30):
        async with nodes(url, 1) as (a,):
            for spot_id, kind in (("d-1", "kept"), ("d-2", "fresh"), ("d-3", "pinned")):
                await a.client.request(spot_id, Put(1), reply=Where).instance_spot(kind)
            async with another_node(url, 1) as b:
                drained = await a.drain()
                assert sorted(r.ref.spot_id for r in drained.moved) == ["d-1", "d-2"]
                assert [r.ref.spot_id for r in drained.not_moved] == ["d-3"]
                assert drained.not_moved[0].outcome is zl.RelocationOutcome.REFUSED
                assert all(r.ref.node_rid == b.node_rid for r in drained.moved)
                assert a.entry_spot_id not in {r.ref.spot_id for r in drained.not_moved}
                # A drained node places no new Spot on itself.
                await a.client.request("d-4", Put(1), reply=Where).instance_spot("fresh")
                ref = await a.spots.find("d-4")
                assert ref is not None
                assert ref.node_rid == b.node_rid


async def test_drain_also_moves_a_spot_activated_while_it_ran(url: str):
    KNOBS.update(gate=trio.Event(), holding=trio.Event(), activate_gate=trio.Event(),
                 activating=trio.Event())
    placed, finished = trio.Event(), trio.Event()
    drained: list[zl.DrainResult] = []
    with trio.fail_after(30):
        async with nodes(url, 1) as (a,), trio.open_nursery() as nursery:
            await a.client.request("d-5", Put(1), reply=Where).instance_spot("kept")
            await a.client.send("d-5", Hold("running"))  # the first pass waits for it
            await KNOBS["holding"].wait()

            async def first_call() -> None:  # placed on a before the drain
                await a.client.request("d-6", Put(2), reply=Where).instance_spot("slow")
                placed.set()

            async def drain() -> None:
                drained.append(await a.drain())
                finished.set()

            nursery.start_soon(first_call)
            await KNOBS["activating"].wait()
            async with another_node(url, 1) as b:
                with on_step("PlannedRelocation", "seal") as sealed:
                    nursery.start_soon(drain)
                    await sealed.wait()  # the first pass holds d-5 only
                KNOBS["activate_gate"].set()  # d-6 activates on a during the drain
                await placed.wait()
                KNOBS["gate"].set()
                await finished.wait()
                assert sorted(r.ref.spot_id for r in drained[0].moved) == ["d-5", "d-6"]
                assert drained[0].not_moved == []
                assert await a.client.request("d-6", Put(1), reply=Where) == Where(
                    3, str(b.node_rid))


async def test_a_second_relocation_of_a_moving_spot_is_refused(url: str):
    KNOBS["gate"] = trio.Event()
    KNOBS["holding"] = trio.Event()
    with trio.fail_after(20):
        async with nodes(url, 2) as (a, _b), trio.open_nursery() as nursery:
            await a.client.request("k-8", Put(1), reply=Where).instance_spot("kept")
            await a.client.send("k-8", Hold("running"))
            await KNOBS["holding"].wait()
            first: list[zl.RelocationResult] = []

            async def relocate() -> None:
                first.append(await a.relocate("k-8", to="node-1"))

            with on_step("PlannedRelocation", "seal") as sealed:
                nursery.start_soon(relocate)
                await sealed.wait()
            second = await a.relocate("k-8", to="node-1")
            assert second.outcome is zl.RelocationOutcome.REFUSED
            KNOBS["gate"].set()
    assert first[0].outcome is zl.RelocationOutcome.COMMITTED


async def test_closing_a_sealed_spot_is_unavailable_and_the_move_goes_on(url: str):
    KNOBS["gate"] = trio.Event()
    KNOBS["holding"] = trio.Event()
    with trio.fail_after(20):
        async with nodes(url, 2) as (a, b), trio.open_nursery() as nursery:
            ref = (await a.spots.create("room")).ref
            await a.client.send(ref.spot_id, Hold("running"))
            await KNOBS["holding"].wait()
            moved: list[zl.RelocationResult] = []

            async def relocate() -> None:
                moved.append(await a.relocate(ref.spot_id, to="node-1"))

            with on_step("PlannedRelocation", "seal") as sealed:
                nursery.start_soon(relocate)
                await sealed.wait()
            with pytest.raises(zl.Unavailable):
                await a.spots.close(ref)
            KNOBS["gate"].set()
    assert moved[0].outcome is zl.RelocationOutcome.COMMITTED
    assert moved[0].ref.node_rid == b.node_rid
    assert [e[3] for e in done("close", a)] == [zl.CloseReason.RELOCATED]  # not closed


async def test_a_relocating_spot_is_never_an_idle_candidate(url: str):
    with trio.fail_after(20):
        async with nodes(url, 2, instance_idle_timeout=0.05, idle_sweep_interval=0.01) as (
                a, _b), trio.open_nursery() as nursery:
            await a.client.request("k-12", Put(1), reply=Where).instance_spot("kept")
            location = a._rt.store.location
            seal = type(location).seal_relocation.__get__(location)
            seal_gate, sealing = trio.Event(), trio.Event()

            async def gated_seal(*args: Any, **kwargs: Any) -> Any:
                sealing.set()
                await seal_gate.wait()  # Relocating, waiting for the permit: not sealed
                return await seal(*args, **kwargs)

            location.seal_relocation = gated_seal  # type: ignore[method-assign]
            catalog = a._rt.catalog
            idle = catalog._idle
            declined = trio.Event()

            def watched(host: Any) -> bool:
                verdict = idle(host)
                if (host.spot_id == "k-12" and not verdict and host.move is not None
                        and trio.current_time() - host.last_work_finished_at > 0.1):
                    declined.set()  # idle for twice the timeout, yet no candidate
                return verdict

            catalog._idle = watched  # type: ignore[method-assign]
            moved: list[zl.RelocationResult] = []

            async def relocate() -> None:
                moved.append(await a.relocate("k-12", to="node-1"))

            nursery.start_soon(relocate)
            await sealing.wait()
            with trio.fail_after(5):
                await declined.wait()
            seal_gate.set()
    assert moved[0].outcome is zl.RelocationOutcome.COMMITTED
    assert [e[3] for e in done("close", a)] == [zl.CloseReason.RELOCATED]  # not evicted


async def test_with_message_follow_off_the_old_route_fails_and_the_next_call_resolves(
        url: str):
    with trio.fail_after(20):
        async with nodes(url, 3, message_follow_duration=0) as (a, b, c):
            await a.client.request("k-13", Put(1), reply=Where).instance_spot("kept")
            await c.client.request("k-13", Put(1), reply=Where)  # c caches the route to a
            assert (await a.relocate("k-13", to="node-1")).outcome is \
                zl.RelocationOutcome.COMMITTED
            # a has no route: it answers as a node that no longer owns the Spot (09 §4)
            with pytest.raises(zl.StaleRoute, match="no longer owns"):
                await c.client.request("k-13", Put(10), reply=Where)
            # Not run anywhere, not resent: the next call resolves the new owner afresh.
            assert await c.client.request("k-13", Put(1), reply=Where) == Where(
                3, str(b.node_rid))
    assert [e[3] for e in EVENTS if e[0] == "put"] == [1, 1, 1]


async def test_a_relocation_store_apart_carries_the_moves_payload(tmp_path: Path):
    location = f"sqlite://{tmp_path / 'location.db'}"
    relocation = f"sqlite://{tmp_path / 'relocation.db'}"
    with trio.fail_after(20):
        async with AsyncExitStack() as stack:
            a, b = [await stack.enter_async_context(zl.open_node(
                f"node-{i}", store=location, relocation_store=relocation, spots=SPOTS,
                placement_weight=1.0 - i)) for i in range(2)]
            await a.client.request("s-1", Put(4), reply=Where).instance_spot("kept")
            assert (await a.relocate("s-1", to="node-1")).outcome is \
                zl.RelocationOutcome.COMMITTED
            assert await a.client.request("s-1", Put(1), reply=Where) == Where(5, str(b.node_rid))
            async with open_store(relocation) as apart, open_store(location) as loc:
                assert (await apart.relocation.statistics()).roots == 0  # payload deleted
                assert (await loc.location.statistics()).ready >= 1
    with pytest.raises(zl.InvalidConfiguration):
        async with zl.open_node("bad", store=location, relocation_store="nope://x"):
            pass


async def test_a_caller_whose_route_predates_several_moves_is_still_followed(url: str):
    # The Spot leaves a, comes back, leaves again: c's route still names a at the owner
    # generation of before the first move, and a follows it along its latest route.
    with trio.fail_after(20):
        async with nodes(url, 3) as (a, b, c):
            await a.client.request("k-9", Put(1), reply=Where).instance_spot("kept")
            await c.client.request("k-9", Put(1), reply=Where)  # c's route: a, generation 1
            for source, to in ((a, "node-1"), (b, "node-0"), (a, "node-1")):
                assert (await source.relocate("k-9", to=to)).outcome is \
                    zl.RelocationOutcome.COMMITTED
            assert await c.client.request("k-9", Put(1), reply=Where) == Where(3, str(b.node_rid))


async def test_a_chain_of_eight_moves_is_followed_and_a_ninth_hop_is_unavailable():
    # The caller's route names node-0; the Spot then moves node-0 -> node-1 -> ... so the
    # call is forwarded once per move (06 §6: "up to 8 hops").
    with trio.fail_after(30):
        async with nodes("memory://chain-" + uuid.uuid4().hex, 11) as members:
            caller = members[10]
            await members[0].client.request("k-8", Put(1), reply=Where).instance_spot("kept")
            await caller.client.request("k-8", Put(1), reply=Where)  # route: node-0
            for hop in range(8):
                result = await members[hop].relocate("k-8", to=f"node-{hop + 1}")
                assert result.outcome is zl.RelocationOutcome.COMMITTED
            owner = members[8]
            assert await caller.client.request("k-8", Put(1), reply=Where) == \
                Where(3, str(owner.node_rid))  # eight hops: served, and the route renewed
            await caller.client.request("k-8", Put(1), reply=Where)
        async with nodes("memory://chain-" + uuid.uuid4().hex, 11) as members:
            caller = members[10]
            await members[0].client.request("k-9", Put(1), reply=Where).instance_spot("kept")
            await caller.client.request("k-9", Put(1), reply=Where)
            for hop in range(9):
                result = await members[hop].relocate("k-9", to=f"node-{hop + 1}")
                assert result.outcome is zl.RelocationOutcome.COMMITTED
            with pytest.raises(zl.Unavailable, match="followed 8 relocations"):
                await caller.client.request("k-9", Put(1), reply=Where)
            # only the next call resolves afresh, and reaches the owner
            assert await caller.client.request("k-9", Put(1), reply=Where) == \
                Where(3, str(members[9].node_rid))
    # the refused call ran nowhere: two puts at node-0, then the one at the owner
    assert [e[2] for e in EVENTS if e[0] == "put" and e[1] == "k-9"] == \
        [str(members[0].node_rid)] * 2 + [str(members[9].node_rid)]


async def test_a_spot_that_came_back_and_closed_is_not_followed_along_its_old_route(url: str):
    # a -> b -> a, then closed at a: a's route from the first move is stale. A caller whose
    # route names a (owner generation 3) gets a closed Spot's answer, never Unavailable.
    with trio.fail_after(20):
        async with nodes(url, 3) as (a, b, c):
            created = await a.spots.get_or_create("r-1", "room").request(Hold("x"))
            for source, to in ((a, "node-1"), (b, "node-0")):
                assert (await source.relocate("r-1", to=to)).outcome is \
                    zl.RelocationOutcome.COMMITTED
            assert await c.client.request("r-1", Put(1), reply=Where) == \
                Where(1, str(a.node_rid))  # c's route: a, owner generation 3
            ref = await a.spots.find("r-1")
            assert ref is not None
            assert ref.generation == created.ref.generation
            assert await a.spots.close(ref)
            with pytest.raises((zl.StaleRoute, zl.NotFound)):
                await c.client.request("r-1", Put(1), reply=Where)
            with pytest.raises(zl.NotFound):
                await c.client.request("r-1", Put(1), reply=Where)


async def test_a_call_to_a_closed_generation_is_not_refused_by_a_later_ones_route(url: str):
    # c's route names generation 1 at a; the Spot closed, came back as generation 2 and
    # moved to b. a's route is generation 2's: c's call is answered as for a Spot a no
    # longer hosts (not run; the call after it resolves afresh), not as a follow mismatch.
    with trio.fail_after(20):
        async with nodes(url, 3) as (a, b, c):
            first = await a.spots.get_or_create("r-2", "room").request(Hold("x"))
            await c.client.request("r-2", Put(1), reply=Where)  # c's route: generation 1
            assert await a.spots.close(first.ref)
            second = await a.spots.get_or_create("r-2", "room").request(Hold("y"))
            assert second.ref.generation > first.ref.generation
            assert (await a.relocate("r-2", to="node-1")).outcome is \
                zl.RelocationOutcome.COMMITTED
            with pytest.raises(zl.StaleRoute):
                await c.client.request("r-2", Put(1), reply=Where)
            assert await c.client.request("r-2", Put(5), reply=Where) == \
                Where(5, str(b.node_rid))


# ---------------------------------------------------------------- operation identity


@contextmanager
def operation_ids(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[dict[Any, int],
                                                                      list[tuple[str, Any, int]]]]:
    """``(sent, ran)``: the operation ID each message got when it first left a node
    (``msg -> u64``, the caller's own), and ``(node_rid, msg, operation ID)`` for every
    turn the runtime ran -- the IDs a handler's turn carried."""
    sent: dict[Any, int] = {}
    ran: list[tuple[str, Any, int]] = []
    number = remote_calls._operation_number

    def first_number(rt: Any, call: Any) -> int:
        op = number(rt, call)
        if call.msg is not None:
            sent.setdefault(call.msg, op)
        return op

    run_handler = Incarnation._run_handler

    async def recorded(self: Incarnation, item: Any, *args: Any) -> Any:
        ran.append((str(self.rt.node_rid), item.msg, item.operation_id))
        return await run_handler(self, item, *args)

    monkeypatch.setattr(remote_calls, "_operation_number", first_number)
    monkeypatch.setattr(Incarnation, "_run_handler", recorded)
    yield sent, ran


async def send_followed(sender: zl.Node, to: zl.Node, msg: Any, *, generation: int,
                        owner_generations: tuple[int, int], operation_id: int) -> Any:
    """Send ``msg`` from ``sender`` to ``to`` as a Message Follow message (route kind 3)
    naming ``generation`` and ``owner_generations`` (source, target), with operation ID
    ``operation_id``, as a node that relays it would; its reply (or raises its error)."""
    rt = sender._rt
    target = to._rt.owner
    link = await rt.peers.link_to_owner(target, "the test's followed message")
    completion = Completion()
    deadline = Deadline.after(5, now=trio.current_time(), wall_now=time.time())
    call = Delivery(spot_id="k-20", msg=msg, size=0, intent=None, completion=completion,
                    reply=Where, deadline=deadline, op_id=f"{operation_id:016x}")
    source, target_owner = owner_generations
    remote_calls.send_spot_message(rt, rt.peers, call, link, FollowFrameRoute(
        spot_id="k-20", object_generation=generation, source_owner_generation=source,
        target_owner_generation=target_owner, target=target, hops=1))
    return await completion.wait(deadline, "the test's followed message")


class WatchedHold(list):  # type: ignore[type-arg]
    """A relocation hold that wakes :meth:`wait_for` on every message it takes in."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = trio.Event()

    def append(self, item: Any) -> None:
        super().append(item)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, count: int) -> None:
        while len(self) < count:
            await self._changed.wait()


def watch_hold(node: zl.Node, spot_id: str) -> WatchedHold:
    """Watch the hold of ``spot_id``'s incarnation on ``node``, sealed a moment ago."""
    move = node._rt.catalog.hosts[spot_id].move
    assert move is not None
    assert not move.hold, "sealed a moment ago: nothing is held yet"
    hold = move.hold = WatchedHold()
    return hold


async def owner_generation(node: zl.Node, spot_id: str) -> int:
    record = await node._rt.store.location.find(spot_id)
    assert record is not None
    return record.owner_generation


def ran_at(node: zl.Node) -> list[int]:
    return [e[3] for e in done("put", node)]


async def test_held_and_followed_messages_keep_their_operation_ids_and_run_once(
        url: str, monkeypatch: pytest.MonkeyPatch):
    """06 §6, §6.1: a message held during a move, or followed after it, reaches the new
    owner with its caller's operation ID (the turn that runs it carries the ID the
    caller's frame did), and a redelivery of that ID does not run again there."""
    KNOBS["gate"] = trio.Event()
    KNOBS["holding"] = trio.Event()
    replies: dict[int, Any] = {}
    moved: list[zl.RelocationResult] = []
    with operation_ids(monkeypatch) as (sent, ran), trio.fail_after(20):
        async with nodes(url, 3) as (a, b, c):
            await a.client.request("k-20", Put(1), reply=Where).instance_spot("kept")
            await c.client.request("k-20", Put(1), reply=Where)  # c's route names a
            await a.client.send("k-20", Hold("running"))
            await KNOBS["holding"].wait()
            lane = a._rt.catalog.hosts["k-20"].lanes.application

            async def relocate() -> None:
                moved.append(await a.relocate("k-20", to="node-1"))

            async def put(n: int) -> None:
                replies[n] = await c.client.request("k-20", Put(n), reply=Where).timeout(15)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(put, 50)  # queued behind the running turn: it moves
                while not lane.queued:  # with the payload
                    await trio.testing.wait_all_tasks_blocked()
                with on_step("PlannedRelocation", "seal") as sealed:
                    nursery.start_soon(relocate)
                    await sealed.wait()
                hold = watch_hold(a, "k-20")
                for count, n in enumerate((100, 200), 1):  # requests from c, held at a
                    nursery.start_soon(put, n)
                    await hold.wait_for(count)
                await c.client.send("k-20", Put(300))
                await hold.wait_for(3)
                KNOBS["gate"].set()
            # c's route still names a, which follows this call along its route to b.
            replies[400] = await c.client.request("k-20", Put(400), reply=Where)
            generation, owner = moved[0].ref.generation, await owner_generation(b, "k-20")
            held_100 = sent[Put(100)]
            # a redelivers operations 100 (held) and 50 (moved in the payload), with
            # other messages: refused, not run
            for op in (held_100, sent[Put(50)]):
                with pytest.raises(zl.InvalidOperation, match="already reached"):
                    await send_followed(a, b, Put(7), generation=generation,
                                        owner_generations=(owner - 1, owner), operation_id=op)
            # a message with an ID of its own goes the same way and runs
            assert await send_followed(a, b, Put(8), generation=generation,
                                       owner_generations=(owner - 1, owner),
                                       operation_id=held_100 ^ 1) == Where(1060, str(b.node_rid))
    assert moved[0].outcome is zl.RelocationOutcome.COMMITTED
    assert replies == {50: Where(52, str(b.node_rid)), 100: Where(152, str(b.node_rid)),
                       200: Where(352, str(b.node_rid)), 400: Where(1052, str(b.node_rid))}
    originals = {n: sent[Put(n)] for n in (50, 100, 200, 300, 400)}
    assert 0 not in originals.values()
    assert len(set(originals.values())) == 5
    at_b = [(msg.n, op) for rid, msg, op in ran if rid == str(b.node_rid)
            and isinstance(msg, Put)]
    # each ran at b once, under its caller's operation ID; the redeliveries never ran
    assert at_b == [*originals.items(), (8, held_100 ^ 1)]
    assert ran_at(b) == [50, 100, 200, 300, 400, 8]


async def test_a_forged_message_follow_is_refused_and_direct_messages_ignore_generations(
        url: str):
    """06 §6, 09 §4: the receiver of a followed message checks it against the relocation
    that brought the Spot: another ObjectGeneration is InvalidOperation; another owner
    generation, or a sender that is not the node the Spot moved from, is Unavailable --
    and none of them runs. A direct message naming wrong generations runs (ordinary
    messages are not filtered by generation)."""
    with trio.fail_after(20):
        async with nodes(url, 3) as (a, b, c):
            await a.client.request("k-20", Put(1), reply=Where).instance_spot("kept")
            for source, to in ((a, "node-1"), (b, "node-0"), (a, "node-1")):
                moved = await source.relocate("k-20", to=to)
                assert moved.outcome is zl.RelocationOutcome.COMMITTED
            generation, owner = moved.ref.generation, await owner_generation(b, "k-20")
            assert owner == 4
            right = (owner - 1, owner)
            with pytest.raises(zl.InvalidOperation, match="hosts generation"):
                await send_followed(a, b, Put(10), generation=generation + 1,
                                    owner_generations=right, operation_id=11)
            for wrong in ((owner, owner + 1), (owner - 1, owner + 1), (owner - 2, owner)):
                with pytest.raises(zl.Unavailable, match="no relocation here matches"):
                    await send_followed(a, b, Put(20), generation=generation,
                                        owner_generations=wrong, operation_id=12)
            with pytest.raises(zl.Unavailable, match="the only node that relays to it"):
                await send_followed(c, b, Put(30), generation=generation,
                                    owner_generations=right, operation_id=13)
            # The same message, from the node it moved from, runs.
            assert await send_followed(a, b, Put(40), generation=generation,
                                       owner_generations=right, operation_id=14) == \
                Where(41, str(b.node_rid))
            # A direct message (route kind 1) naming other generations is run by the
            # current instance: generations filter relays, not ordinary messages.
            rt = c._rt
            link = await rt.peers.link_to_owner(b._rt.owner, "the test's direct message")
            completion = Completion()
            deadline = Deadline.after(5, now=trio.current_time(), wall_now=time.time())
            remote_calls.send_spot_message(rt, rt.peers, Delivery(
                spot_id="k-20", msg=Put(50), size=0, intent=None, completion=completion,
                reply=Where, deadline=deadline, op_id=""), link, ReadyRoute(
                    spot_id="k-20", object_generation=generation + 5,
                    owner_generation=owner + 5, target=b._rt.owner))
            assert await completion.wait(deadline, "the direct message") == \
                Where(91, str(b.node_rid))
    assert ran_at(b) == [40, 50]


async def test_a_call_on_an_expired_route_is_a_stale_route_and_the_next_call_resolves(url: str):
    """06 §6, 09 §4: once its Message Follow route expired, the old owner answers a call
    on the old route as any node that no longer owns the Spot: StaleRoute, not run."""
    with trio.fail_after(20):
        async with nodes(url, 3) as (a, b, c):
            await a.client.request("k-21", Put(1), reply=Where).instance_spot("kept")
            await c.client.request("k-21", Put(1), reply=Where)  # c's route names a
            assert (await a.relocate("k-21", to="node-1")).outcome is \
                zl.RelocationOutcome.COMMITTED
            route = a._rt.follow.get("k-21", trio.current_time())
            assert route is not None
            a._rt.follow.install(attrs.evolve(route, expires_at=trio.current_time()))
            with pytest.raises(zl.StaleRoute, match="no longer owns"):
                await c.client.request("k-21", Put(10), reply=Where)
            assert await c.client.request("k-21", Put(1), reply=Where) == \
                Where(3, str(b.node_rid))
    assert ran_at(a) == [1, 1]


async def test_a_followed_message_that_finds_no_route_is_unavailable(url: str):
    """06 §6: a message that follows a Spot to a node that neither hosts it nor has a
    Message Follow route of its own (it moved there, then closed) ends Unavailable, not
    run; only the next call resolves afresh."""
    with trio.fail_after(20):
        async with nodes(url, 3) as (a, b, c):
            created = await a.spots.get_or_create("r-20", "room").request(Hold("x"))
            await c.client.request("r-20", Put(1), reply=Where)  # c's route names a
            assert (await a.relocate("r-20", to="node-1")).outcome is \
                zl.RelocationOutcome.COMMITTED
            assert await b.spots.close(created.ref)
            with pytest.raises(zl.Unavailable, match="neither hosts it nor has a Message"):
                await c.client.request("r-20", Put(2), reply=Where)
            with pytest.raises(zl.NotFound):
                await c.client.request("r-20", Put(3), reply=Where)
    assert [e[3] for e in EVENTS if e[0] == "put"] == [1]


async def test_held_messages_of_a_move_aborted_before_relay_ready_run_in_arrival_order(
        url: str):
    """06 §6.1: a move that aborts before relay-ready returns its hold to the source's
    queue in arrival order, behind the work queued at the seal."""
    KNOBS.update(gate=trio.Event(), holding=trio.Event(), fail_restore=True)
    moved: list[zl.RelocationResult] = []
    with trio.fail_after(20):
        async with nodes(url, 2) as (a, _b):
            await a.client.request("k-22", Put(1), reply=Where).instance_spot("kept")
            await a.client.send("k-22", Hold("running"))
            await KNOBS["holding"].wait()
            await a.client.send("k-22", Put(10))  # queued before the seal
            await a.client.send("k-22", Put(20))

            async def relocate() -> None:
                moved.append(await a.relocate("k-22", to="node-1"))

            async with trio.open_nursery() as nursery:
                with on_step("PlannedRelocation", "seal") as sealed:
                    nursery.start_soon(relocate)
                    await sealed.wait()
                for n in (100, 200, 300, 400):  # held, in this order
                    await a.client.send("k-22", Put(n))
                KNOBS["gate"].set()
            last = await a.client.request("k-22", Put(0), reply=Where)
    assert moved[0].outcome is zl.RelocationOutcome.ABORTED
    assert "restore" in (moved[0].reason or "")
    assert ran_at(a) == [1, 10, 20, 100, 200, 300, 400, 0]
    assert last == Where(1031, str(a.node_rid))


async def test_ingress_after_the_capture_waits_in_the_hold_and_follows_the_spot(url: str):
    """06 §6.1, 09 §9: while the target builds its shell (the source sealed and captured),
    the source's ingress waits in the relocation hold -- it is neither run nor queued --
    and follows the Spot once the target commits, in arrival order, each once."""
    replies: list[Where] = []
    with trio.fail_after(20):
        async with nodes(url, 2) as (a, b), trio.open_nursery() as nursery:
            await a.client.request("s-20", Put(1), reply=Where).instance_spot("slow")
            KNOBS.update(activate_gate=trio.Event(), activating=trio.Event())
            moved: list[zl.RelocationResult] = []

            async def relocate() -> None:
                moved.append(await a.relocate("s-20", to="node-1"))

            async def put(n: int) -> None:
                replies.append(await a.client.request("s-20", Put(n), reply=Where))

            nursery.start_soon(relocate)
            await KNOBS["activating"].wait()  # b runs on_activate of its shell
            host = a._rt.catalog.hosts["s-20"]
            await a.client.send("s-20", Put(5))
            await a.client.send("s-20", Put(6))
            nursery.start_soon(put, 7)
            await trio.testing.wait_all_tasks_blocked()
            assert host.move is not None
            assert [work.msg for work, _ in host.move.hold] == [Put(5), Put(6), Put(7)]
            assert host.lanes.counts() == (0, 0)
            assert ran_at(a) == [1]
            KNOBS["activate_gate"].set()
    assert moved[0].outcome is zl.RelocationOutcome.COMMITTED
    assert ran_at(b) == [5, 6, 7]
    assert replies == [Where(19, str(b.node_rid))]


async def test_the_target_takes_over_only_the_sealed_record_its_command_names(url: str):
    """06 §6.1, §8: command 60 is checked against the store's record before anything is
    built -- Sealed toward this node, owned by the sender, the same owner generation and
    StoreVersion (a delayed 60 of an earlier seal names an older one) -- so a stale or
    forged one moves nothing, and the real move still commits, once."""
    with trio.fail_after(30):
        async with nodes(url, 3) as (a, b, c):
            await a.client.request("s-21", Put(1), reply=Where).instance_spot("slow")
            KNOBS.update(activate_gate=trio.Event(), activating=trio.Event())
            moved: list[zl.RelocationResult] = []

            async def relocate() -> None:
                moved.append(await a.relocate("s-21", to="node-1"))

            async def forged(sender: zl.Node, record: Any) -> str:
                rt = sender._rt
                link = await rt.peers.link_to_owner(b._rt.owner, "the test's command 60")
                deadline = Deadline.after(3, now=trio.current_time(), wall_now=time.time())
                with pytest.raises(zl.Unavailable) as refused:
                    await send_relocate(rt, link, record, b._rt.owner, root, deadline)
                return refused.value.message

            async with trio.open_nursery() as nursery:
                nursery.start_soon(relocate)
                await KNOBS["activating"].wait()  # b builds its shell for the real command
                sealed = await a._rt.store.location.find("s-21")
                assert sealed is not None
                assert sealed.state is AuthorityState.SEALED
                root = await a._rt.store.relocation.put_root(RelocationPayload(
                    spot_id="s-21", object_generation=sealed.object_generation,
                    stable_type="slow", mesh=sealed.mesh,
                    owner_generation=sealed.owner_generation, state=b"1000", timers=(),
                    messages=()).encode())
                stale = [
                    await forged(a, attrs.evolve(sealed, store_version=sealed.store_version - 1)),
                    await forged(a, attrs.evolve(sealed, owner_generation=2)),
                    await forged(c, sealed)]
                KNOBS["activate_gate"].set()
                ready = await a._rt.store.location.find("s-21")
            after = await forged(a, sealed)  # the record is Ready at b now
            assert await c.client.request("s-21", Put(1), reply=Where) == \
                Where(2, str(b.node_rid))
    assert moved[0].outcome is zl.RelocationOutcome.COMMITTED
    assert [why.partition("no longer matches the store: ")[2] for why in stale] == [
        f"its StoreVersion is {sealed.store_version}; nothing moved",
        f"its owner generation is {sealed.owner_generation}; nothing moved",
        "it is owned by node 'node-0' (lifecycle 1); nothing moved"]  # named by NodeId
    assert ready is not None
    assert "no longer matches the store: it is ready" in after
    assert [e for e in EVENTS if e[0] == "factory" and e[2] == str(b.node_rid)] == [
        ("factory", "s-21", str(b.node_rid), sealed.object_generation)]


async def test_past_relay_ready_the_source_is_never_restored_and_ends_its_hold(url: str):
    """06 §6.1, §8: once the target accepted relay-ready the source never serves again.
    When the target then cannot commit, the move ends Unavailable: the held requests end
    Unavailable without running anywhere, new ingress at the source is refused the same
    way, and the record stays RelayReady (only the target may end it)."""
    KNOBS["gate"] = trio.Event()
    KNOBS["holding"] = trio.Event()
    outcomes: dict[str, Any] = {}
    with trio.fail_after(20):
        async with nodes(url, 2, default_timeout=1.0) as (a, b):
            await a.client.request("k-23", Put(1), reply=Where).instance_spot("kept")
            location = b._rt.store.location

            async def refused_commit(*args: Any, **kwargs: Any) -> Any:
                raise zl.InvalidOperation("the test refuses CommitRelocation")

            location.commit_relocation = refused_commit  # type: ignore[method-assign]
            await a.client.send("k-23", Hold("running"))
            await KNOBS["holding"].wait()

            async def relocate() -> None:
                try:
                    outcomes["move"] = await a.relocate("k-23", to="node-1", timeout=10)
                except zl.ZLinkError as exc:
                    outcomes["move"] = exc

            async def held() -> None:
                try:
                    outcomes["held"] = await a.client.request("k-23", Put(10),
                                                              reply=Where).timeout(5)
                except zl.ZLinkError as exc:
                    outcomes["held"] = exc

            async with trio.open_nursery() as nursery:
                with on_step("PlannedRelocation", "seal") as sealed:
                    nursery.start_soon(relocate)
                    await sealed.wait()
                nursery.start_soon(held)
                await trio.testing.wait_all_tasks_blocked()
                KNOBS["gate"].set()
            with pytest.raises(zl.Unavailable, match="passed relay-ready"):
                await a.client.request("k-23", Put(20), reply=Where).timeout(5)
            record = await a._rt.store.location.find("k-23")
            del location.commit_relocation
    assert isinstance(outcomes["move"], zl.Unavailable), outcomes
    assert isinstance(outcomes["held"], zl.Unavailable), outcomes
    assert "passed relay-ready" in outcomes["held"].message
    assert record is not None
    assert record.state is AuthorityState.RELAY_READY
    assert [e[3] for e in EVENTS if e[0] == "put"] == [1]

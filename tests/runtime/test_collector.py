"""The garbage collector against the lease (``zlink_trio/runtime/collector.py``).

A node freezes its long-lived objects out of the cyclic collector's view after each
burst of activations, so a full collection costs in proportion to what is new, not to
the node. That is only sound if an ended Spot leaves no reference cycle behind (a
frozen cycle is never collected): the first test checks it with the collector off, for
each way an incarnation ends. The others check the freezes themselves, and the full
collection a node runs when Spot instances outlive their incarnations.
"""

from __future__ import annotations

import gc
import logging
import weakref
from typing import TYPE_CHECKING

import attrs
import pytest
import trio
import trio.testing

import zlink_trio as zl
from zlink_trio.runtime.collector import CHECK_INTERVAL, outlived_instances
from zlink_trio.runtime.incarnation.incarnation import Incarnation
from zlink_trio.testing import open_test_node

if TYPE_CHECKING:
    from collections.abc import Iterator


@attrs.frozen
class Tally:
    total: int = 0


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Total:
    value: int


@zl.instance_spot("collector-plain", relocation=zl.RecreateOnRelocation())
class Plain:
    """Keeps its ctx, as most Spot classes do, and a timer."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.total = 0

    async def on_activate(self) -> None:
        self.ctx.start_timer(3_600, self.tick, period=3_600)

    async def tick(self) -> None:
        pass

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total)


@zl.user_spot("collector-kept", relocation=zl.RecreateOnRelocation(), state=Tally)
class Kept:
    """A User Spot with durable state and a reminder-free fence of its own."""

    def __init__(self, ctx: zl.SpotContext, request: object) -> None:
        self.ctx = ctx

    @zl.handler
    async def add(self, msg: Add) -> Total:
        total = (self.ctx.state.load() or Tally()).total + msg.n
        await self.ctx.state.save(Tally(total))
        return Total(total)


#: Weak references to every ``Cyclic`` instance built.
CYCLIC: list[weakref.ref[Cyclic]] = []


@zl.instance_spot("collector-cyclic", relocation=zl.RecreateOnRelocation())
class Cyclic:
    """An application class with a reference cycle of its own: ``self.me``."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.me = self
        CYCLIC.append(weakref.ref(self))

    @zl.handler
    async def add(self, msg: Add) -> Total:
        return Total(msg.n)


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    """Every test starts and ends with nothing frozen and the collector on."""
    gc.unfreeze()
    CYCLIC.clear()
    yield
    gc.enable()
    gc.unfreeze()


def _live_incarnations() -> list[Incarnation]:
    """This module's incarnations the collector sees (other tests' may live on)."""
    return [o for o in gc.get_objects() if isinstance(o, Incarnation)
            and o.spot_type.stable_type.startswith("collector-")]


async def test_an_ended_incarnation_is_freed_without_the_garbage_collector(autojump_clock):
    gc.collect()
    gc.disable()  # from here only reference counting frees anything
    with trio.fail_after(300):
        async with open_test_node("node-a", spots=[Plain, Kept],
                                  instance_idle_timeout=10, gc_freeze_after=0) as node:
            refs: list[zl.SpotRef] = []
            for i in range(10):
                await node.client.request(f"p-{i}", Add(i), reply=Total).instance_spot(
                    "collector-plain")
                refs.append((await node.spots.get_or_create(f"k-{i}", "collector-kept")).ref)
                await node.client.request(f"k-{i}", Add(i), reply=Total)
            assert len(_live_incarnations()) == 20
            assert gc.get_freeze_count() == 0  # gc_freeze_after=0: never frozen
            await trio.sleep(30)  # idle eviction ends the Instance Spots
            for i in range(5):  # a close ends User Spots; the node's stop the others
                assert await node.spots.close(refs[i])
            await trio.testing.wait_all_tasks_blocked()  # every ended task has finished
            left = {host.spot_id for host in _live_incarnations()}
            assert left == {f"k-{i}" for i in range(5, 10)}
    assert _live_incarnations() == []


async def test_a_node_freezes_its_spots_after_each_burst_and_unfreezes_when_it_stops(
        autojump_clock):
    with trio.fail_after(300):
        async with open_test_node("node-a", spots=[Plain], instance_idle_timeout=0,
                                  gc_freeze_after=50) as node:
            for i in range(40):
                await node.client.request(f"p-{i}", Add(i), reply=Total).instance_spot(
                    "collector-plain")
            await trio.sleep(3 * CHECK_INTERVAL)
            assert gc.get_freeze_count() > 0  # what was there when it started
            assert len(_live_incarnations()) == 40  # 40 new Spots: not a burst yet
            for i in range(40, 90):
                await node.client.request(f"p-{i}", Add(i), reply=Total).instance_spot(
                    "collector-plain")
            await trio.sleep(3 * CHECK_INTERVAL)
            assert gc.get_freeze_count() > 0
            assert _live_incarnations() == []  # all 90 frozen: no collection visits them
            # The next burst is counted from the freeze: 30 more are not one.
            for i in range(90, 120):
                await node.client.request(f"p-{i}", Add(i), reply=Total).instance_spot(
                    "collector-plain")
            await trio.sleep(3 * CHECK_INTERVAL)
            assert len(_live_incarnations()) == 30
            assert node.statistics().active_spots == 120
    assert gc.get_freeze_count() == 0  # handed back to the collector as it was


async def test_instances_that_outlive_their_incarnation_make_the_node_collect_everything(
        autojump_clock, caplog):
    caplog.set_level(logging.WARNING, logger="zlink_trio.runtime.collector")
    with trio.fail_after(300):
        async with open_test_node("node-a", spots=[Cyclic], instance_idle_timeout=10,
                                  gc_freeze_after=20) as node:
            for i in range(30):
                await node.client.request(f"c-{i}", Add(i), reply=Total).instance_spot(
                    "collector-cyclic")
            await trio.sleep(3 * CHECK_INTERVAL)
            assert gc.get_freeze_count() > 0
            assert all(ref() is not None for ref in CYCLIC)
            # All evicted: 30 frozen cycles became garbage, which no collection of the
            # unfrozen objects could free; the node collects everything instead.
            await trio.sleep(30)
            assert node.statistics().active_spots == 0
            assert [ref for ref in CYCLIC if ref() is not None] == []  # collected
            assert outlived_instances() == 0
    warnings = [r.getMessage() for r in caplog.records
                if r.name == "zlink_trio.runtime.collector"]
    assert len(warnings) == 1
    assert "were still referenced when their incarnation ended" in warnings[0]
    assert "Break such cycles in on_close" in warnings[0]


@pytest.mark.parametrize("after", [-1, 1.5, "10", True])
def test_gc_freeze_after_must_be_a_count(after: object) -> None:
    with pytest.raises(zl.InvalidConfiguration, match="gc_freeze_after must be an int >= 0"):
        zl.CapacityOptions(gc_freeze_after=after)  # type: ignore[arg-type]

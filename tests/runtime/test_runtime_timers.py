"""Spot timers and ctx.close() through the public API, on MockClock."""

from __future__ import annotations

import attrs
import pytest
import trio
from runtime_spots import Add, Total

import zlink_trio as zl

TICKS: list[tuple[str, float]] = []


@attrs.frozen
class Start:
    delay: float
    period: float | None = None


@attrs.frozen
class Stop:
    pass


@zl.instance_spot("ticker", relocation=zl.RecreateOnRelocation())
class Ticker:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.handle: zl.TimerHandle | None = None
        self.ticks = 0

    @zl.handler
    async def start(self, msg: Start) -> None:
        self.handle = self.ctx.start_timer(msg.delay, self.tick, period=msg.period)

    @zl.handler
    async def stop(self, msg: Stop) -> Total:
        assert self.handle is not None
        self.handle.cancel()
        return Total(self.ticks)

    @zl.handler
    async def add(self, msg: Add) -> Total:
        return Total(self.ticks)

    async def tick(self) -> None:
        self.ticks += 1
        TICKS.append((self.ctx.spot_id, trio.current_time()))
        if self.ticks == 100:
            self.ctx.close()

    async def on_close(self, reason: zl.CloseReason) -> None:
        TICKS.append(("closed:" + reason.value, trio.current_time()))


async def test_one_shot_and_periodic_timers_run_as_turns_and_cancel(autojump_clock):
    TICKS.clear()
    with trio.fail_after(100):
        async with zl.open_node("node-a", spots=[Ticker]) as node:
            start = trio.current_time()
            await node.client.request("t", Start(2.0), reply=None).instance_spot()
            await trio.sleep(5)
            assert [round(t - start, 6) for _, t in TICKS] == [2.0]
            await node.client.request("p", Start(1.0, period=1.0), reply=None).instance_spot()
            await trio.sleep(3.5)
            ticks = (await node.client.request("p", Stop(), reply=Total)).value
            assert ticks == 3
            await trio.sleep(5)
            assert (await node.client.request("p", Add(0), reply=Total)).value == 3


async def test_timers_are_cancelled_at_close_and_ctx_close_closes_after_the_turn(autojump_clock):
    TICKS.clear()
    with trio.fail_after(1000):
        async with zl.open_node("node-a", spots=[Ticker]) as node:
            await node.client.request("p", Start(1.0, period=1.0), reply=None).instance_spot()
            await trio.sleep(150)
            closed = [name for name, _ in TICKS if name.startswith("closed")]
            assert closed == ["closed:closed"]
            assert len([1 for name, _ in TICKS if name == "p"]) == 100
            assert await node.spots.find("p") is None


async def test_start_timer_refuses_a_sync_callback(autojump_clock):
    @zl.instance_spot("bad-timer", relocation=zl.DisableRelocation())
    class BadTimer:
        def __init__(self, ctx: zl.SpotContext) -> None:
            with pytest.raises(zl.InvalidOperation, match="async"):
                ctx.start_timer(1, lambda: None)  # type: ignore[arg-type, return-value]
            self.ok = True

        @zl.handler
        async def add(self, msg: Add) -> Total:
            return Total(1 if self.ok else 0)

    with trio.fail_after(10):
        async with zl.open_node("node-a", spots=[BadTimer]) as node:
            assert await node.client.request("b", Add(0), reply=Total).instance_spot() \
                == Total(1)

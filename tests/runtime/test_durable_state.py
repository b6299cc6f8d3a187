"""Durable Spot state through the public API: ``state=`` on the decorator, ``ctx.state``.

The state outlives its incarnation (idle eviction, a close of an Instance Spot, a move
that recreates the Spot at its target), the close of a User Spot ends it, and an
incarnation that no longer owns its Spot writes nothing (docs/state.md). The
single-node tests run on MockClock over every backend (``store_url``); the move runs on
the real clock between two nodes (``url``), bounded by ``trio.fail_after``.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

import attrs
import pytest
import trio

import zlink_trio as zl
from zlink_trio.store import open_store
from zlink_trio.testing import open_test_node


@attrs.frozen
class Tally:
    total: int = 0


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Total:
    value: int
    #: The version ``ctx.state`` reports after the save.
    version: int


@attrs.frozen
class Forget:
    pass


CONTEXTS: dict[str, zl.SpotContext] = {}


class _Counting:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        CONTEXTS[ctx.spot_id] = ctx
        self.total = (ctx.state.load() or Tally()).total  # loaded before the factory

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        await self.ctx.state.save(Tally(self.total))
        return Total(self.total, self.ctx.state.version)

    @zl.handler
    async def forget(self, msg: Forget) -> Total:
        await self.ctx.state.clear()
        self.total = 0
        return Total(0, self.ctx.state.version)


@zl.instance_spot("tally", relocation=zl.RecreateOnRelocation(), state=Tally)
class Counter(_Counting):
    pass


@zl.user_spot("tally-room", relocation=zl.RecreateOnRelocation(), state=Tally)
class Room(_Counting):
    def __init__(self, ctx: zl.SpotContext, request: object) -> None:
        super().__init__(ctx)


@zl.instance_spot("plain", relocation=zl.RecreateOnRelocation())
class Plain:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.ctx.state.load()  # no state declared: refused
        return Total(0, 0)


SPOTS = [Counter, Room, Plain]


@pytest.fixture(autouse=True)
def _clean() -> None:
    CONTEXTS.clear()


async def test_an_instance_spots_state_outlives_idle_eviction(
        autojump_clock, store_url):
    with trio.fail_after(100):
        async with open_test_node("node-a", store=store_url, spots=SPOTS,
                                  instance_idle_timeout=10) as node:
            for n in (1, 2, 3):
                reply = await node.client.request("c-1", Add(n), reply=Total).instance_spot("tally")
            assert reply == Total(6, 3)
            first = await node.spots.find("c-1")
            await trio.sleep(15)  # idle eviction ends the incarnation
            assert await node.spots.find("c-1") is None
            assert await node.client.request("c-1", Add(1), reply=Total).instance_spot("tally") \
                == Total(7, 4)
            again = await node.spots.find("c-1")
            assert again is not None
            assert first is not None
            assert again.generation > first.generation
            assert await node.client.request("c-1", Forget(), reply=Total) == Total(0, 0)
            assert await node.client.request("c-1", Add(2), reply=Total) == Total(2, 1)


async def test_the_state_outlives_the_node_that_saved_it(autojump_clock, store_url):
    """A node stops (its Spots end with it) and another opens on the same store: the
    Spot's next incarnation there starts from what the first one saved."""
    with trio.fail_after(100):
        async with AsyncExitStack() as stack:
            if store_url.startswith("memory://"):  # the named store lives while held
                await stack.enter_async_context(open_store(store_url))
            async with open_test_node("node-a", store=store_url, spots=SPOTS) as a:
                for _ in range(149):
                    await a.client.request("c-2", Add(1), reply=Total).instance_spot("tally")
            async with open_test_node("node-b", store=store_url, spots=SPOTS) as b:
                assert await b.client.request("c-2", Add(1), reply=Total).instance_spot("tally") \
                    == Total(150, 150)


async def test_the_close_of_a_user_spot_ends_its_state(autojump_clock, store_url):
    with trio.fail_after(100):
        async with open_test_node("node-a", store=store_url, spots=SPOTS) as node:
            created = await node.spots.get_or_create("r-1", "tally-room")
            assert await node.client.request("r-1", Add(5), reply=Total) == Total(5, 1)
            assert await node.spots.close(created.ref) is True
            await node.spots.get_or_create("r-1", "tally-room")
            assert await node.client.request("r-1", Add(1), reply=Total) == Total(1, 1)


async def test_an_incarnation_that_lost_its_spot_writes_no_state(url):
    """The Spot moved (recreated at the target, which loads the state); the source's
    incarnation kept its context, and its writes are refused: the target's state stays."""
    with trio.fail_after(20):
        async with AsyncExitStack() as stack:
            if url.startswith("memory://"):
                await stack.enter_async_context(open_store(url))
            a = await stack.enter_async_context(zl.open_node(
                "node-0", store=url, spots=SPOTS, on_stop="close"))
            assert await a.client.request("c-3", Add(4), reply=Total).instance_spot("tally") \
                == Total(4, 1)
            old = CONTEXTS["c-3"]
            b = await stack.enter_async_context(zl.open_node(
                "node-1", store=url, spots=SPOTS, on_stop="close"))
            moved = await a.relocate("c-3", to="node-1")
            assert moved.outcome is zl.RelocationOutcome.COMMITTED
            assert await b.client.request("c-3", Add(1), reply=Total) == Total(5, 2)
            with pytest.raises(zl.Unavailable):  # StaleFence: another owns it now
                await old.state.save(Tally(100))
            with pytest.raises(zl.Unavailable):
                await old.state.clear()
            assert await b.client.request("c-3", Add(1), reply=Total) == Total(6, 3)


async def test_a_state_needs_its_declaration(autojump_clock, store_url):
    with pytest.raises(zl.InvalidConfiguration, match="attrs class"):
        zl.instance_spot("bad", relocation=zl.RecreateOnRelocation(), state=int)
    with trio.fail_after(100):
        async with open_test_node("node-a", store=store_url, spots=SPOTS) as node:
            with pytest.raises(zl.HandlerError) as caught:
                await node.client.request("p-1", Add(1), reply=Total).instance_spot("plain")
            assert "declares no durable state" in str(caught.value.__cause__)
            await node.client.request("c-4", Add(1), reply=Total).instance_spot("tally")
            with pytest.raises(zl.InvalidOperation, match="keeps a Tally"):
                await CONTEXTS["c-4"].state.save(Total(1, 1))


@attrs.frozen
class Early:
    pass


@zl.instance_spot("eager", relocation=zl.RecreateOnRelocation(), state=Tally)
class Eager:
    """Saves from ``on_activate``, before it serves: refused."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.refused: str = ""

    async def on_activate(self) -> None:
        try:
            await self.ctx.state.save(Tally(1))
        except zl.Unavailable as exc:
            self.refused = exc.message

    @zl.handler
    async def early(self, msg: Early) -> Total:
        assert "does not serve yet" in self.refused, self.refused
        return Total(self.ctx.state.version, 0)


async def test_a_spot_saves_only_while_it_serves(autojump_clock, store_url):
    with trio.fail_after(100):
        async with open_test_node("node-a", store=store_url, spots=[Eager]) as node:
            assert await node.client.request("e-1", Early(), reply=Total).instance_spot() \
                == Total(0, 0)

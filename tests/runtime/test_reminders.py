"""Durable reminders through the public API: ``ctx.remind``, a ``zl.Reminder`` handler.

A due reminder reaches its Spot even when it is not active (idle-evicted, its node
gone), as a message through the normal call path; a repeating one comes back every
period; the close of a User Spot ends its reminders; an incarnation that lost its Spot
sets none (docs/reminders.md). The single-node tests run on MockClock over every
backend (``store_url``); the move runs on the real clock (``url``).
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
class Wake:
    name: str
    after: float | None = None
    every: float | None = None


@attrs.frozen
class Cancel:
    name: str


@attrs.frozen
class Cancelled:
    was: bool


@attrs.frozen
class Set:
    due: float
    period: float | None


#: (Spot ID, reminder name, its due, the incarnation's generation) per delivery.
DELIVERED: list[tuple[str, str, float, int]] = []
CONTEXTS: dict[str, zl.SpotContext] = {}


class _Waking:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        CONTEXTS[ctx.spot_id] = ctx

    @zl.handler
    async def wake(self, msg: Wake) -> Set:
        reminder = await self.ctx.remind(msg.name, after=msg.after, every=msg.every)
        return Set(reminder.due, reminder.period)

    @zl.handler
    async def cancel(self, msg: Cancel) -> Cancelled:
        return Cancelled(await self.ctx.cancel_reminder(msg.name))

    @zl.handler
    async def reminded(self, msg: zl.Reminder) -> None:
        DELIVERED.append((self.ctx.spot_id, msg.name, msg.due, self.ctx.generation))


@zl.instance_spot("waker", relocation=zl.RecreateOnRelocation())
class Waker(_Waking):
    pass


@zl.user_spot("waker-room", relocation=zl.RecreateOnRelocation())
class WakerRoom(_Waking):
    def __init__(self, ctx: zl.SpotContext, request: object) -> None:
        super().__init__(ctx)


@attrs.frozen
class Quiet:
    pass


@zl.instance_spot("deaf", relocation=zl.RecreateOnRelocation(), state=Quiet)
class Deaf:
    """Has no Reminder handler (but durable state): sets no reminder."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx

    @zl.handler
    async def wake(self, msg: Wake) -> Set:
        reminder = await self.ctx.remind(msg.name, after=msg.after)
        return Set(reminder.due, reminder.period)


SPOTS = [Waker, WakerRoom, Deaf]


@pytest.fixture(autouse=True)
def _clean() -> None:
    DELIVERED.clear()
    CONTEXTS.clear()


async def test_a_due_reminder_reaches_an_idle_evicted_spot(autojump_clock, store_url):
    with trio.fail_after(1000):
        async with open_test_node("node-a", store=store_url, spots=SPOTS,
                                  instance_idle_timeout=10) as node:
            set_ = await node.client.request("w-1", Wake("tick", after=60), reply=Set) \
                .instance_spot("waker")
            first = await node.spots.find("w-1")
            await trio.sleep(30)
            assert await node.spots.find("w-1") is None  # evicted long before it is due
            assert DELIVERED == []
            await trio.sleep(35)  # due at 60, evicted again at 70
            again = await node.spots.find("w-1")
            assert first is not None
            assert again is not None
            assert again.generation > first.generation  # activated for it
            assert [("w-1", "tick", set_.due, again.generation)] == DELIVERED
            assert await CONTEXTS["w-1"].reminders() == []  # a one-shot reminder is done
            await trio.sleep(100)
            assert len(DELIVERED) == 1


async def test_a_repeating_reminder_comes_back_until_cancelled(autojump_clock, store_url):
    with trio.fail_after(1000):
        async with open_test_node("node-a", store=store_url, spots=SPOTS) as node:
            set_ = await node.client.request("w-2", Wake("beat", every=10), reply=Set) \
                .instance_spot("waker")
            assert set_.period == 10.0
            await trio.sleep(35)
            dues = [due for _, _, due, _ in DELIVERED]
            assert dues == [set_.due, set_.due + 10, set_.due + 20]
            cancelled = await node.client.request("w-2", Cancel("beat"), reply=Cancelled)
            assert cancelled == Cancelled(True)
            await trio.sleep(50)
            assert len(DELIVERED) == 3


async def test_a_reminder_outlives_the_node_that_set_it(autojump_clock, store_url):
    """The node stops (its Spots end with it); a node opened later on the same store
    delivers the reminder, activating the Spot there."""
    with trio.fail_after(1000):
        async with AsyncExitStack() as stack:
            if store_url.startswith("memory://"):  # the named store lives while held
                await stack.enter_async_context(open_store(store_url))
            async with open_test_node("node-a", store=store_url, spots=SPOTS) as a:
                set_ = await a.client.request("w-3", Wake("later", after=100), reply=Set) \
                    .instance_spot("waker")
            assert DELIVERED == []
            await trio.sleep(200)
            async with open_test_node("node-b", store=store_url, spots=SPOTS) as b:
                await trio.sleep(5)
                found = await b.spots.find("w-3")
                assert found is not None
                assert [("w-3", "later", set_.due, found.generation)] == DELIVERED


async def test_the_close_of_a_user_spot_ends_its_reminders(autojump_clock, store_url):
    with trio.fail_after(1000):
        async with open_test_node("node-a", store=store_url, spots=SPOTS) as node:
            created = await node.spots.get_or_create("r-1", "waker-room")
            await node.client.request("r-1", Wake("tick", after=30), reply=Set)
            await trio.sleep(40)
            assert [d[:2] for d in DELIVERED] == [("r-1", "tick")]  # delivered, existing
            await node.client.request("r-1", Wake("tock", after=30), reply=Set)
            assert await node.spots.close(created.ref) is True
            await trio.sleep(60)
            assert [d[:2] for d in DELIVERED] == [("r-1", "tick")]
            await node.spots.get_or_create("r-1", "waker-room")
            assert await CONTEXTS["r-1"].reminders() == []


async def test_a_reminder_needs_a_handler_for_it(autojump_clock, store_url):
    with trio.fail_after(100):
        async with open_test_node("node-a", store=store_url, spots=SPOTS) as node:
            with pytest.raises(zl.HandlerError) as caught:
                await node.client.request("d-1", Wake("tick", after=1), reply=Set) \
                    .instance_spot("deaf")
            assert "no handler for zl.Reminder" in str(caught.value.__cause__)
            for bad, match in ((Wake("tick"), "needs at=, after= or every="),
                               (Wake("tick", after=-1), "0 s or more"),
                               (Wake("tick", every=0.5), "at least 1.0 s")):
                with pytest.raises(zl.HandlerError) as caught:
                    await node.client.request("w-4", bad, reply=Set).instance_spot("waker")
                assert match in str(caught.value.__cause__)


async def test_an_incarnation_that_lost_its_spot_sets_no_reminder(url):
    """The Spot moved (recreated at the target); the source's incarnation kept its
    context, and its reminder writes are refused."""
    with trio.fail_after(20):
        async with AsyncExitStack() as stack:
            if url.startswith("memory://"):
                await stack.enter_async_context(open_store(url))
            a = await stack.enter_async_context(zl.open_node(
                "node-0", store=url, spots=SPOTS, on_stop="close"))
            await a.client.request("w-5", Wake("tick", after=3600), reply=Set) \
                .instance_spot("waker")
            old = CONTEXTS["w-5"]
            await stack.enter_async_context(zl.open_node(
                "node-1", store=url, spots=SPOTS, on_stop="close"))
            moved = await a.relocate("w-5", to="node-1")
            assert moved.outcome is zl.RelocationOutcome.COMMITTED
            for write in (lambda: old.remind("tick", after=1),
                          lambda: old.cancel_reminder("tick")):
                with pytest.raises(zl.Unavailable):  # StaleFence: another owns it now
                    await write()
            [kept] = await CONTEXTS["w-5"].reminders()
            assert (kept.name, kept.period) == ("tick", None)


async def test_a_node_with_metrics_counts_its_reminder_deliveries(autojump_clock, store_url):
    """``zlink_reminders_total`` by outcome and ``zlink_reminder_lateness_seconds``: a
    delivered reminder, and a User Spot's that found its Spot gone (docs/observability.md)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    with trio.fail_after(1000):
        async with open_test_node("node-a", store=store_url, spots=SPOTS,
                                  metrics=registry) as node:
            await node.client.request("w-6", Wake("tick", after=10), reply=Set) \
                .instance_spot("waker")
            await trio.sleep(15)
            assert [d[:2] for d in DELIVERED] == [("w-6", "tick")]

            def value(name: str, **labels: str) -> float | None:
                return registry.get_sample_value(name, {"node_id": "node-a", **labels})

            assert value("zlink_reminders_total", outcome="delivered") == 1
            assert value("zlink_reminders_total", outcome="retry") == 0
            assert value("zlink_reminder_lateness_seconds_count") == 1
            assert value("zlink_reminder_lateness_seconds_bucket", le="1.0") == 1

"""A relocation's hold far larger than a link may queue is relayed within its flow control.

Issue #26 item 5. The hold has no bound of its own (09 §6), while a link closes once more
than ``max_send_buffer_bytes`` (64 MiB) would be queued on it unsent. Here 80 MiB are held
while a Spot moves: the relay must stream them (``mesh.message_follow``, "The relay
streams"), every message must reach the new owner exactly once and in order -- one sent
after the commit as well -- and other calls on the same link must keep working, with their
latency bounded, while it runs. And the new owner queues the relayed hold even when
its application lane is full: the source accepted it already. Two nodes in one process
over real loopback links, on the real clock (a link waits on its socket), bounded by
``trio.fail_after``; gates and events, no sleeps.
"""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio
import trio.testing

import zlink_trio as zl
from zlink_trio.runtime import charts
from zlink_trio.store import open_store
from zlink_trio.transport import HIGH_WATER_BYTES

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

#: 1,280 one-way messages of 64 KiB: 80 MiB held, above the link's 64 MiB bound.
HELD = 1280
BODY = "x" * (64 * 1024)

STATE: dict[str, Any] = {}


@attrs.frozen
class Chunk:
    n: int
    body: str


@attrs.frozen
class Block:
    gate: str = "gate"


@attrs.frozen
class Ping:
    pass


@attrs.frozen
class Pong:
    node: str


class Adapter:
    def capture(self, spot: Any) -> bytes:
        return b""

    def restore(self, spot: Any, data: bytes) -> None:
        pass


@zl.instance_spot("sink", relocation=zl.PreserveStateWith(Adapter()))
class Sink:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx

    @zl.handler
    async def chunk(self, msg: Chunk) -> None:
        received = STATE["received"]
        received.append(msg.n)
        if "first_in" in STATE:
            STATE["first_in"].set()
        if len(received) == STATE.get("expect", HELD + 1):
            STATE["all_in"].set()

    @zl.handler
    async def hello(self, msg: Ping) -> None:
        pass

    @zl.handler
    async def block(self, msg: Block) -> None:
        STATE["blocking"].set()
        await STATE[msg.gate].wait()


@zl.instance_spot("echo", relocation=zl.PreserveStateWith(Adapter()))
class Echo:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx

    @zl.handler
    async def ping(self, msg: Ping) -> Pong:
        return Pong(str(self.ctx.ref.node_rid))


@asynccontextmanager
async def two_nodes(**options: Any) -> AsyncIterator[tuple[zl.Node, zl.Node]]:
    """Nodes ``node-0`` (where new Spots go) and ``node-1``, linked; ``echo-1`` at node-1."""
    async with AsyncExitStack() as stack:
        url = f"memory://relay-{uuid.uuid4().hex}"
        await stack.enter_async_context(open_store(url))
        a, b = [await stack.enter_async_context(zl.open_node(
            f"node-{i}", store=url, spots=[Sink, Echo],
            placement_weight=1.0 if i == 0 else 0.0, **options)) for i in range(2)]
        # The other calls' Spot lives at b: a's calls to it share the link a -> b.
        await a.client.request("echo-1", Ping(), reply=Pong).instance_spot("echo")
        assert (await a.relocate("echo-1", to="node-1")).outcome is \
            zl.RelocationOutcome.COMMITTED
        assert await a.client.request("echo-1", Ping(), reply=Pong) == Pong(str(b.node_rid))
        yield a, b


async def busy_sink(a: zl.Node) -> None:
    """Activate ``sink-1`` at ``a`` and start a turn there that blocks until
    ``STATE["gate"]`` is set (a move then waits for it at the seal)."""
    await a.client.request("sink-1", Ping(), reply=None).instance_spot("sink")
    await a.client.send("sink-1", Block())
    await STATE["blocking"].wait()


@contextmanager
def on_step(chart: str, event: str) -> Iterator[trio.Event]:
    seen = trio.Event()

    def observer(name: str, _state: str, taken: str, _target: str) -> None:
        if name == chart and taken == event:
            seen.set()

    charts.TRACE.append(observer)
    try:
        yield seen
    finally:
        charts.TRACE.remove(observer)


async def test_a_hold_above_the_links_bound_streams_exactly_once_in_order_beside_other_calls():
    STATE.update(received=[], all_in=trio.Event(), blocking=trio.Event(), gate=trio.Event(),
                 first_in=trio.Event())
    late: list[bool] = []
    latencies: list[float] = []
    unsent: list[int] = []
    moved: list[zl.RelocationResult] = []
    relayed = trio.Event()
    with trio.fail_after(120):
        async with two_nodes() as (a, b):
            await busy_sink(a)  # the turn running at the seal

            async def relocate() -> None:
                moved.append(await a.relocate("sink-1", to="node-1"))
                relayed.set()

            async def after_commit() -> None:
                await STATE["first_in"].wait()  # the relay reached b and goes on
                late.append(relayed.is_set())
                await a.client.send("sink-1", Chunk(HELD, BODY))  # behind the hold

            async def other_calls() -> None:
                while not relayed.is_set():
                    began = trio.current_time()
                    assert await a.client.request("echo-1", Ping(), reply=Pong).timeout(10) \
                        == Pong(str(b.node_rid))
                    latencies.append(trio.current_time() - began)
                    unsent.append(a.inspection.unsent_bytes("node-1"))

            async with trio.open_nursery() as nursery:
                with on_step("PlannedRelocation", "seal") as sealed:
                    nursery.start_soon(relocate)
                    await sealed.wait()
                    for n in range(HELD):  # all held: 80 MiB
                        await a.client.send("sink-1", Chunk(n, BODY))
                    nursery.start_soon(after_commit)
                    nursery.start_soon(other_calls)
                    STATE["gate"].set()
                    await STATE["all_in"].wait()
    assert moved[0].outcome is zl.RelocationOutcome.COMMITTED
    # Every held message once, in arrival order, and the one sent after the commit, while
    # the relay still ran, last.
    assert late == [False]
    assert STATE["received"] == list(range(HELD + 1))
    # The other calls on the link went on while the relay ran, none waiting long, and the
    # link never held much more than its high-water mark unsent.
    assert len(latencies) >= 2
    assert max(latencies) < 5.0, latencies
    assert max(unsent) <= HIGH_WATER_BYTES + 2 * len(BODY), max(unsent)


async def test_the_new_owner_queues_a_relayed_hold_past_its_full_application_lane():
    """The hold was accepted at the source (its one-way sends returned): the new owner
    does not refuse it for capacity, though its lane (8 items here) is full."""
    held = 20
    STATE.update(received=[], all_in=trio.Event(), blocking=trio.Event(), gate=trio.Event(),
                 target_gate=trio.Event(), expect=held)
    moved: list[zl.RelocationResult] = []
    relocated, answered = trio.Event(), trio.Event()
    with trio.fail_after(60):
        async with two_nodes(application_lane=zl.LaneBounds(8, 64 * 1024 * 1024)) as (a, b), \
                trio.open_nursery() as nursery:
            try:
                await busy_sink(a)  # the turn running at the seal

                async def relocate() -> None:
                    moved.append(await a.relocate("sink-1", to="node-1"))
                    relocated.set()

                async def last() -> None:  # held last: it runs after every chunk, at b
                    await a.client.request("sink-1", Ping(), reply=None).timeout(30)
                    answered.set()

                with on_step("PlannedRelocation", "seal") as sealed:
                    nursery.start_soon(relocate)
                    await sealed.wait()
                # Held: a turn that blocks b's lane first, then 20 chunks and a request.
                await a.client.send("sink-1", Block("target_gate"))
                for n in range(held):
                    await a.client.send("sink-1", Chunk(n, "x"))
                nursery.start_soon(last)
                await trio.testing.wait_all_tasks_blocked()
                STATE["gate"].set()
                await relocated.wait()
                assert moved[0].outcome is zl.RelocationOutcome.COMMITTED
                # b dispatched every relayed frame before this reply (one link, in order).
                assert await a.client.request("echo-1", Ping(), reply=Pong) == Pong(str(b.node_rid))
                STATE["target_gate"].set()
                await answered.wait()
            finally:  # a failure must not leave a turn blocked (nodes wait for it)
                STATE["gate"].set()
                STATE["target_gate"].set()
    assert STATE["received"] == list(range(held))


async def test_a_sender_on_the_new_owner_waits_until_the_hold_is_relayed():
    """A sender on the move's target node sends once the held messages began to run
    there: its message is admitted at once, but runs only after the whole hold -- the
    source said its relay was over (command 62) -- so it overtakes no held message,
    wherever it was sent from (docs/relocation.md, "Order across the commit")."""
    held = 200  # 12.5 MiB: still streaming when the first one runs at the target
    STATE.update(received=[], all_in=trio.Event(), blocking=trio.Event(), gate=trio.Event(),
                 first_in=trio.Event(), expect=held + 1)
    moved: list[zl.RelocationResult] = []
    with trio.fail_after(60):
        async with two_nodes() as (a, b):
            await busy_sink(a)  # the turn running at the seal

            async def relocate() -> None:
                moved.append(await a.relocate("sink-1", to="node-1"))

            async def from_the_target() -> None:
                await STATE["first_in"].wait()  # the relay reached b and goes on
                await b.client.send("sink-1", Chunk(held, "late"))

            async with trio.open_nursery() as nursery:
                with on_step("PlannedRelocation", "seal") as sealed:
                    nursery.start_soon(relocate)
                    await sealed.wait()
                    for n in range(held):
                        await a.client.send("sink-1", Chunk(n, BODY))
                    nursery.start_soon(from_the_target)
                    STATE["gate"].set()
                    await STATE["all_in"].wait()
    assert moved[0].outcome is zl.RelocationOutcome.COMMITTED
    assert STATE["received"] == list(range(held + 1))

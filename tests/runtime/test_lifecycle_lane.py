"""Lifecycle work is admitted on its own lane, however full the application lane is.

Issue #26 item 6, 09 §6: "Execution queues keep application and lifecycle work in separate
FIFO lanes, each with count and byte reservations." A relocation's seal and
``ctx.close()``'s BeginClose are lifecycle work (docs/decisions.md, "The lifecycle lane"):
a Spot whose application lane is full (4 items here, one running behind a gate) still
moves, and still closes, with the accepted application work run first. Real nodes on
``memory://`` (the relocation over loopback links), bounded by ``trio.fail_after``;
gates and events, no sleeps.
"""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import zlink_trio as zl
from zlink_trio.store import open_store

EVENTS: list[tuple[str, str, object]] = []
STATE: dict[str, Any] = {}

#: The application lane of every node here: 4 items.
FULL = zl.LaneBounds(4, 64 * 1024 * 1024)


@attrs.frozen
class Put:
    n: int


@attrs.frozen
class Block:
    close: bool = False


class Adapter:
    def capture(self, spot: Any) -> bytes:
        return b""

    def restore(self, spot: Any, data: bytes) -> None:
        pass


@zl.instance_spot("lane", relocation=zl.PreserveStateWith(Adapter()))
class LaneSpot:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx

    @zl.handler
    async def put(self, msg: Put) -> None:
        EVENTS.append(("put", str(self.ctx.ref.node_rid), msg.n))

    @zl.handler
    async def block(self, msg: Block) -> None:
        STATE["blocking"].set()
        await STATE["gate"].wait()
        if msg.close:
            try:
                self.ctx.close()  # the application lane is full: 1 running + 3 queued
            except zl.ZLinkError as exc:
                STATE["close_error"] = exc
            STATE["asked"].set()

    async def on_close(self, reason: zl.CloseReason) -> None:
        EVENTS.append(("close", str(self.ctx.ref.node_rid), reason))
        if reason is zl.CloseReason.CLOSED:
            STATE["closed"].set()


@pytest.fixture(autouse=True)
def _clean() -> None:
    EVENTS.clear()
    STATE.clear()
    STATE.update(blocking=trio.Event(), gate=trio.Event(), asked=trio.Event(),
                 closed=trio.Event())


async def _fill(node: zl.Node, spot_id: str, block: Block) -> None:
    """Activate ``spot_id`` on ``node``, block its turn and fill its application lane."""
    await node.client.request(spot_id, Put(-1), reply=None).instance_spot("lane")
    await node.client.send(spot_id, block)
    await STATE["blocking"].wait()
    for n in range(3):
        await node.client.send(spot_id, Put(n))
    with pytest.raises(zl.CapacityExceeded) as full:
        await node.client.send(spot_id, Put(99))
    assert full.value.lane == "application"


async def test_a_spot_with_a_full_application_lane_still_moves():
    url = f"memory://lanes-{uuid.uuid4().hex}"
    result: list[zl.RelocationResult] = []
    with trio.fail_after(30):
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(open_store(url))
            a, b = [await stack.enter_async_context(zl.open_node(
                f"node-{i}", store=url, spots=[LaneSpot], application_lane=FULL,
                placement_weight=1.0 if i == 0 else 0.0)) for i in range(2)]
            try:
                await _fill(a, "l-1", Block())

                async def relocate() -> None:
                    result.append(await a.relocate("l-1", to="node-1"))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(relocate)
                    # The seal is admitted now (lane full); its turn waits for the gate.
                    await trio.testing.wait_all_tasks_blocked()
                    STATE["gate"].set()
            finally:
                STATE["gate"].set()
    assert result[0].outcome is zl.RelocationOutcome.COMMITTED, result[0].reason
    # The queued work moved with the Spot and ran at the target, in order.
    assert [e[2] for e in EVENTS if e[0] == "put" and e[1] == str(b.node_rid)] == [0, 1, 2]


async def test_a_spot_with_a_full_application_lane_still_closes_itself_after_its_work():
    url = f"memory://lanes-{uuid.uuid4().hex}"
    with trio.fail_after(30):
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(open_store(url))
            node = await stack.enter_async_context(zl.open_node(
                "node-0", store=url, spots=[LaneSpot], application_lane=FULL, listen=None))
            try:
                await _fill(node, "l-2", Block(close=True))
                closed = node.inspection.hosted_spot("l-2")
                assert closed is not None
                STATE["gate"].set()
                await STATE["asked"].wait()
                assert "close_error" not in STATE, STATE.get("close_error")
                await STATE["closed"].wait()
            finally:
                STATE["gate"].set()
            # The next call with Instance intent waits for the close to end, then
            # activates a new generation: the close went all the way.
            await node.client.request("l-2", Put(7), reply=None).instance_spot("lane")
            again = node.inspection.hosted_spot("l-2")
            assert again is not None
            assert again.generation > closed.generation
            seen = EVENTS[:]
    rid = str(node.node_rid)
    # The work accepted before the close ran first, then on_close, once.
    expected = [("put", rid, -1), ("put", rid, 0), ("put", rid, 1), ("put", rid, 2),
                ("close", rid, zl.CloseReason.CLOSED), ("put", rid, 7)]
    assert expected == seen

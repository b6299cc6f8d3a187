"""Spot types and helpers shared by the runtime's own tests (not the contract tests).

Every Spot here appends what happens to it to :data:`EVENTS` as tuples, so a test can
check order ("factory", "activate", "handle", "close") without reaching into the
runtime. Call :func:`journal` at the start of a test to get a cleared list.

The store reader (:func:`store_counts`) and the create request and reply
(:class:`RoomSpec`, :class:`Welcome`) also serve the contract tests' own Spots
(``spec_helpers.py``). The node opener and the store double are the public test kit's
(``zlink_trio.testing.open_test_node``, ``MemoryStoreWith``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import trio

import zlink_trio as zl

if TYPE_CHECKING:
    from zlink_trio.store import Store

#: What the Spots below did, in order.
EVENTS: list[tuple[Any, ...]] = []
#: Knobs a test turns before a Spot is built: ``fail_factory``, ``fail_activate``,
#: ``slow_activate`` (seconds), ``reject`` (a reply or True), ``gate`` (a trio.Event a
#: ``Block`` handler waits for), ``activating`` (a trio.Event ``Counter.on_activate`` sets),
#: ``activate_gate`` (a trio.Event ``Counter.on_activate`` then waits for).
KNOBS: dict[str, Any] = {}


def journal() -> list[tuple[Any, ...]]:
    """Clear and return :data:`EVENTS` (and :data:`KNOBS`)."""
    EVENTS.clear()
    KNOBS.clear()
    return EVENTS


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Total:
    value: int


@attrs.frozen
class Block:
    """Handled by waiting for ``KNOBS["gate"]``."""

    tag: str


@attrs.frozen
class Boom:
    text: str


@attrs.frozen
class Note:
    text: str


@attrs.frozen
class Big:
    data: str


@attrs.frozen
class RoomSpec:
    name: str = "lobby"


@attrs.frozen
class Welcome:
    text: str


@attrs.frozen
class Unhandled:
    x: int


class _Base:
    ctx: zl.SpotContext
    total: int

    @zl.handler
    async def add(self, msg: Add) -> Total:
        EVENTS.append(("handle", self.ctx.spot_id, self.ctx.generation, msg.n))
        self.total += msg.n
        return Total(self.total)

    @zl.handler
    async def block(self, msg: Block) -> None:
        EVENTS.append(("block-start", self.ctx.spot_id, msg.tag))
        await KNOBS["gate"].wait()
        EVENTS.append(("block-end", self.ctx.spot_id, msg.tag))

    @zl.handler
    async def boom(self, msg: Boom) -> Total:
        raise ValueError(msg.text)

    @zl.handler
    async def note(self, msg: Note) -> None:
        EVENTS.append(("note", self.ctx.spot_id, msg.text))
        if msg.text == "close-me":
            self.ctx.close()

    @zl.handler
    async def big(self, msg: Big) -> None:
        EVENTS.append(("big", self.ctx.spot_id, len(msg.data)))

    async def on_close(self, reason: zl.CloseReason) -> None:
        EVENTS.append(("close", self.ctx.spot_id, self.ctx.generation, reason))


@zl.instance_spot("counter", relocation=zl.RecreateOnRelocation())
class Counter(_Base):
    def __init__(self, ctx: zl.SpotContext) -> None:
        if KNOBS.get("fail_factory"):
            raise RuntimeError("factory failed")
        self.ctx = ctx
        self.total = 0
        EVENTS.append(("factory", ctx.spot_id, ctx.generation))

    async def on_activate(self) -> None:
        if "activating" in KNOBS:
            KNOBS["activating"].set()
        if "activate_gate" in KNOBS:
            await KNOBS["activate_gate"].wait()
        if KNOBS.get("slow_activate"):
            await trio.sleep(KNOBS["slow_activate"])
        if KNOBS.get("fail_activate"):
            raise KeyError("activate failed")
        EVENTS.append(("activate", self.ctx.spot_id, self.ctx.generation))


@zl.instance_spot("gauge", relocation=zl.DisableRelocation())
class Gauge(_Base):
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.total = 0
        EVENTS.append(("factory", ctx.spot_id, ctx.generation))


@zl.user_spot("room", relocation=zl.DisableRelocation())
class Room(_Base):
    def __init__(self, ctx: zl.SpotContext, request: RoomSpec | None) -> None:
        if KNOBS.get("fail_factory"):
            raise RuntimeError("factory failed")
        self.ctx = ctx
        self.total = 0
        self.request = request
        EVENTS.append(("factory", ctx.spot_id, ctx.generation, request))

    async def on_create(self, request: RoomSpec | None) -> Welcome | zl.Reject | None:
        if KNOBS.get("slow_activate"):
            await trio.sleep(KNOBS["slow_activate"])
        if request is not None and request.name == "reject":
            return zl.Reject(Welcome("declined"))
        reject = KNOBS.get("reject")
        if reject is not None:
            return zl.Reject(None if reject is True else reject)
        return Welcome(f"welcome to {request.name}" if request else "welcome")


async def store_counts(store: Store) -> tuple[int, int, int]:
    """``(authority records except Entry claims, roots, inboxes)`` of any backend's store."""
    records = 0
    cursor: str | None = None
    while True:
        page = await store.location.query(page_size=1000, cursor=cursor)
        records += sum(r.kind is not zl.SpotKind.ENTRY for r in page.records)
        cursor = page.next_cursor
        if cursor is None:
            break
    stats = await store.relocation.statistics()
    return records, stats.roots, stats.inboxes

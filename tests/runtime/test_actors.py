"""Actors on one node and across two: create, call, join, leave, close (docs/actors.md).

The single-node tests run on each backend (``store_url``: memory, SQLite, Redis) on
``MockClock``; the cross-node ones on two listening nodes sharing a store on the real
clock (``url``), bounded by ``trio.fail_after``. Only the public surface is used, plus
reads of the store for what it holds.

The specification's items are named tests here:

- 06 §10 "User Spot Close doesn't secretly clean up active membership" -- locally and
  over command 48 (:func:`test_user_spot_close_does_not_secretly_clean_up_active_membership`
  and ``..._remote``);
- 06 §10 "Entry Spot join and placement use the descriptor's lifecycle mapping and
  don't parse the Spot ID string" --
  :func:`test_entry_spot_join_and_placement_use_the_descriptor_mapping`.
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
from cross_node_helpers import shared_store
from spec_helpers import wait_until

import zlink_trio as zl
from zlink_trio.core.records import AuthorityState
from zlink_trio.runtime.coordinators import relocation as relocation_module
from zlink_trio.testing import open_test_node

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

LIMIT = 30


@attrs.frozen
class Say:
    text: str


@attrs.frozen
class Heard:
    by: str
    text: str


@attrs.frozen
class Enroll:
    """Ask a room to create a member of type ``player`` named ``actor_id``."""

    actor_id: str


@attrs.frozen
class Roll:
    """A room's members on this node, as its handler sees them."""

    ids: tuple[str, ...]


@attrs.frozen
class List:
    pass


@attrs.frozen
class Quit:
    pass


@attrs.frozen
class Hold:
    """Keep the Actor's turn until the test's ``HELD["release"]`` is set."""


#: The events a ``Hold`` turn sets (``began``) and waits for (``release``).
HELD: dict[str, trio.Event] = {}


@zl.actor("player", relocation=zl.RecreateOnRelocation())
class Player:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.heard: list[str] = []

    @zl.handler
    async def say(self, msg: Say) -> Heard:
        self.heard.append(msg.text)
        return Heard(self.ctx.spot_id, msg.text)

    @zl.handler
    async def quit(self, msg: Quit) -> None:
        self.ctx.close()

    @zl.handler
    async def hold(self, msg: Hold) -> Heard:
        HELD["began"].set()
        await HELD["release"].wait()
        return Heard(self.ctx.spot_id, "held")


@attrs.frozen
class Fanout:
    """Ask a room to wait for ``HELD["release"]``, then say ``text`` to each member."""

    text: str


@zl.user_spot("room", relocation=zl.RecreateOnRelocation())
class Room:
    def __init__(self, ctx: zl.SpotContext, request: object | None) -> None:
        self.ctx = ctx

    @zl.handler
    async def enroll(self, msg: Enroll) -> Roll:
        await self.ctx.actors.create("player", msg.actor_id).in_spot(self.ctx.ref)
        return Roll(tuple(ref.actor_id for ref in self.ctx.members()))

    @zl.handler
    async def fanout(self, msg: Fanout) -> Roll:
        HELD["began"].set()
        await HELD["release"].wait()
        heard = [await self.ctx.client.request_actor(ref.actor_id, Say(msg.text),
                                                     reply=Heard)
                 for ref in self.ctx.members()]
        return Roll(tuple(h.by for h in heard))

    @zl.handler
    async def roll(self, msg: List) -> Roll:
        return Roll(tuple(ref.actor_id for ref in self.ctx.members()))

    @zl.handler
    async def say(self, msg: Say) -> Heard:
        return Heard(self.ctx.spot_id, msg.text)


@zl.user_spot("lounge", relocation=zl.RecreateOnRelocation(),
              unit=zl.RelocationUnit.PER_ACTOR)
class Lounge(Room):
    """A room whose members follow it one by one when it moves (PerActor)."""


@zl.instance_spot("counter", relocation=zl.RecreateOnRelocation())
class Counter:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx

    @zl.handler
    async def say(self, msg: Say) -> Heard:
        return Heard(self.ctx.spot_id, msg.text)


SPOTS = [Player, Room, Lounge, Counter]


def node(store_url: str, name: str = "node-a", **options: object):
    return open_test_node(name, store=store_url, spots=SPOTS, **options)


async def room(n: zl.Node, spot_id: str = "room-1") -> zl.SpotRef:
    result = await n.spots.get_or_create(spot_id, "room")
    assert result.ref is not None
    return result.ref


# -- one node ------------------------------------------------------------------------------


async def test_an_actor_starts_on_its_nodes_entry_spot_and_answers_by_actor_id(store_url, store):
    with trio.fail_after(LIMIT):
        async with node(store_url) as n:
            ref = await n.actors.create("player", "p-1")
            assert (ref.actor_id, ref.container, ref.node_rid) == (
                "p-1", n.entry_spot_id, n.node_rid)
            heard = await n.client.request_actor("p-1", Say("hi"), reply=Heard)
            assert heard == Heard("p-1", "hi")
            await n.client.send_actor("p-1", Say("again"))
            assert await n.actors.find("p-1") == ref
            assert await n.actors.members(n.entry_spot_id) == [ref]
            record = await store.location.find("p-1")
            assert (record.kind, record.container) == (zl.SpotKind.ACTOR, n.entry_spot_id)


async def test_a_fresh_actor_id_is_a_uuid4_and_a_taken_id_is_already_exists(store_url):
    with trio.fail_after(LIMIT):
        async with node(store_url) as n:
            await room(n)
            fresh = await n.actors.create("player")
            assert len(fresh.actor_id) == 36
            with pytest.raises(zl.AlreadyExists, match="one namespace"):
                await n.actors.create("player", "room-1")
            with pytest.raises(zl.AlreadyExists):
                await n.actors.create("player", fresh.actor_id)


async def test_spot_calls_and_actor_calls_do_not_cross(store_url):
    with trio.fail_after(LIMIT):
        async with node(store_url) as n:
            await room(n)
            await n.actors.create("player", "p-1")
            with pytest.raises(zl.TypeMismatch, match="request_actor"):
                await n.client.request("p-1", Say("hi"), reply=Heard)
            with pytest.raises(zl.TypeMismatch, match="not an Actor"):
                await n.client.request_actor("room-1", Say("hi"), reply=Heard)
            with pytest.raises(zl.NotFound, match="never creates an Actor"):
                await n.client.request_actor("p-404", Say("hi"), reply=Heard)
            with pytest.raises(zl.TypeMismatch):
                await n.actors.find("room-1")


async def test_a_spot_creates_members_and_lists_them(store_url):
    with trio.fail_after(LIMIT):
        async with node(store_url) as n:
            ref = await room(n)
            assert await n.client.request("room-1", Enroll("p-2"), reply=Roll) == Roll(("p-2",))
            assert await n.client.request("room-1", Enroll("p-1"), reply=Roll) == Roll(
                ("p-1", "p-2"))
            members = await n.actors.members(ref)
            assert [m.container for m in members] == ["room-1", "room-1"]
            assert await n.actors.members(n.entry_spot_id) == []


async def test_an_instance_spot_refuses_every_membership_operation(store_url, store):
    with trio.fail_after(LIMIT):
        async with node(store_url) as n:
            await n.client.request("c-1", Say("x"), reply=Heard).instance_spot("counter")
            with pytest.raises(zl.InvalidOperation, match="Instance Spot never"):
                await n.actors.create("player", "p-1").in_spot("c-1")
            player = await n.actors.create("player", "p-2")
            with pytest.raises(zl.InvalidOperation, match="Instance Spot never"):
                await n.actors.join(player, "c-1")
            assert await store.location.find("p-1") is None
            assert (await n.actors.find("p-2")).container == n.entry_spot_id


async def test_join_and_leave_move_the_membership_and_the_actor_keeps_running(store_url):
    with trio.fail_after(LIMIT):
        async with node(store_url) as n:
            spot = await room(n)
            player = await n.actors.create("player", "p-1")
            joined = await n.actors.join(player, spot)
            assert joined.container == "room-1"
            assert await n.client.request("room-1", List(), reply=Roll) == Roll(("p-1",))
            assert await n.client.request_actor("p-1", Say("in"), reply=Heard) == Heard(
                "p-1", "in")
            left = await n.actors.leave(joined)
            assert left.container == n.entry_spot_id
            assert await n.client.request("room-1", List(), reply=Roll) == Roll(())
            assert await n.actors.members(n.entry_spot_id) == [left]


async def test_a_control_with_another_generation_is_invalid_operation(store_url):
    with trio.fail_after(LIMIT):
        async with node(store_url) as n:
            spot = await room(n)
            first = await n.actors.create("player", "p-1")
            assert await n.actors.close(first) is True
            second = await n.actors.create("player", "p-1")
            assert second.generation > first.generation
            for control in (n.actors.join(first, spot), n.actors.leave(first),
                            n.actors.close(first)):
                with pytest.raises(zl.InvalidOperation, match="generation"):
                    await control
            # A direct message compares no generation: it reaches the current one.
            assert await n.client.request_actor("p-1", Say("x"), reply=Heard) == Heard(
                "p-1", "x")


async def test_user_spot_close_does_not_secretly_clean_up_active_membership(store_url, store):
    """06 §10: "User Spot Close doesn't secretly clean up active membership." """
    with trio.fail_after(LIMIT):
        async with node(store_url) as n:
            spot = await room(n)
            await n.client.request("room-1", Enroll("p-1"), reply=Roll)
            assert await n.spots.close(spot) is False
            # Admission and authority kept; the member neither moved nor closed.
            record = await store.location.find("room-1")
            assert record.state.name == "READY"
            assert await n.client.request("room-1", Say("open"), reply=Heard) == Heard(
                "room-1", "open")
            member = await n.actors.find("p-1")
            assert member is not None
            assert member.container == "room-1"
            assert await n.client.request_actor("p-1", Say("here"), reply=Heard) == Heard(
                "p-1", "here")
            await n.actors.leave(member)
            assert await n.spots.close(spot) is True
            assert await store.location.find("room-1") is None


async def test_an_actor_closes_by_ref_or_from_its_own_handler(store_url, store):
    with trio.fail_after(LIMIT):
        async with node(store_url) as n:
            spot = await room(n)
            a = await n.actors.create("player", "p-1").in_spot(spot)
            assert await n.actors.close(a) is True
            assert await n.actors.close(a) is False  # gone: idempotent
            with pytest.raises(zl.NotFound):
                await n.client.request_actor("p-1", Say("x"), reply=Heard)
            await n.actors.create("player", "p-2").in_spot(spot)
            await n.client.request_actor("p-2", Quit())

            async def gone() -> bool:  # released in the store, and gone from the node
                # (a store read on another connection may see the release committed
                # before the node's own call returned and it left the catalog)
                return (await store.location.find("p-2") is None
                        and n.inspection.hosted_spot("p-2") is None)

            await wait_until(gone)
            assert await n.client.request("room-1", List(), reply=Roll) == Roll(())
            assert await n.spots.close(spot) is True


async def test_a_node_that_stops_closes_its_actors_then_its_spots(store_url, store):
    with trio.fail_after(LIMIT):
        async with node(store_url) as n:
            await room(n)
            await n.client.request("room-1", Enroll("p-1"), reply=Roll)
            await n.actors.create("player", "p-2")
        assert await store.location.find("p-1") is None
        assert await store.location.find("p-2") is None
        assert await store.location.find("room-1") is None


async def test_a_member_of_a_user_spot_does_not_relocate_alone(store_url, store):
    """A member leaves its User Spot only when asked: relocating it alone is refused (it
    moves with its Spot, or joins another)."""
    with trio.fail_after(LIMIT):
        async with node(store_url) as a, node(store_url, "node-b", placement_weight=0):
            await room(a)
            await a.client.request("room-1", Enroll("p-1"), reply=Roll)
            result = await a.relocate("p-1", to="node-b")
            assert result.outcome is zl.RelocationOutcome.REFUSED
            assert "leaves only when asked" in result.reason
            assert (await store.location.find("p-1")).owner.node_rid == a.node_rid


# -- two listening nodes on one store (real clock, real links) -----------------------------


async def until_sealed(view: Any, spot_id: str) -> None:
    """Wait until the store has ``spot_id`` Sealed for a move (bounded by the test)."""

    async def sealed() -> bool:
        record = await view.location.find(spot_id)
        return record is not None and record.state is AuthorityState.SEALED

    await wait_until(sealed)


@asynccontextmanager
async def two_nodes(url: str, **options: Any) -> AsyncIterator[tuple[zl.Node, zl.Node, Any]]:
    """``node-a`` hosts (weight 1), ``node-b`` serves the same types but takes no new
    Spots (weight 0); both listen on loopback and share the ``url`` store."""
    async with shared_store(url) as shared, AsyncExitStack() as stack:
        a = await stack.enter_async_context(zl.open_node(
            "node-a", store=shared.store, spots=SPOTS, placement_weight=1.0, on_stop="close",
            **options))
        b = await stack.enter_async_context(zl.open_node(
            "node-b", store=shared.store, spots=SPOTS, placement_weight=0.0, on_stop="close",
            **options))
        yield a, b, shared.view


async def test_a_toactor_call_reaches_an_actor_on_another_node(url):
    with trio.fail_after(LIMIT):
        async with two_nodes(url) as (a, b, _):
            await a.actors.create("player", "p-1")
            assert await b.client.request_actor("p-1", Say("hi"), reply=Heard) == Heard(
                "p-1", "hi")
            await b.client.send_actor("p-1", Say("again"))
            with pytest.raises(zl.TypeMismatch):
                await b.client.request("p-1", Say("x"), reply=Heard)
            with pytest.raises(zl.NotFound):
                await b.client.request_actor("p-404", Say("x"), reply=Heard)


async def test_user_spot_close_does_not_secretly_clean_up_active_membership_remote(url):
    """06 §10: "User Spot Close doesn't secretly clean up active membership", over
    command 48: the owner checks active membership with the other fences."""
    with trio.fail_after(LIMIT):
        async with two_nodes(url) as (a, b, view):
            spot = await room(b)  # placed on node-a (node-b takes no new Spots)
            assert spot.node_rid == a.node_rid
            await b.client.request("room-1", Enroll("p-1"), reply=Roll)
            assert await b.spots.close(spot) is False
            assert (await view.location.find("room-1")).state.name == "READY"
            assert await b.client.request("room-1", List(), reply=Roll) == Roll(("p-1",))
            assert await b.client.request_actor("p-1", Say("still"), reply=Heard) == Heard(
                "p-1", "still")
            member = await b.actors.find("p-1")
            assert await b.actors.close(member) is True  # an Actor closes from any node
            assert await b.spots.close(spot) is True
            assert await view.location.find("room-1") is None


async def test_entry_spot_join_and_placement_use_the_descriptor_mapping(url):
    """06 §10: "Entry Spot join and placement use the descriptor's lifecycle mapping and
    don't parse the Spot ID string": a new Actor, and one that leaves a room, is in the
    Entry Spot its node's published descriptor names; another node's Entry Spot, named
    by its ID, takes no member from here."""
    with trio.fail_after(LIMIT):
        async with two_nodes(url) as (a, b, view):
            # The store clock: Trio's for memory://, wall time for SQLite and Redis.
            now = trio.current_time() if url.startswith("memory") else time.time()
            claims = {c.descriptor.node_id: c.descriptor
                      for c in await view.location.descriptors(now=now)}
            fresh = await b.actors.create("player", "p-1")
            assert fresh.container == claims["node-b"].entry_spot_id
            assert (await view.location.find("p-1")).container == fresh.container
            spot = await room(b, "room-b")
            assert spot.node_rid == a.node_rid
            on_a = await a.actors.create("player", "p-2").in_spot(spot)
            left = await a.actors.leave(on_a)
            assert left.container == claims["node-a"].entry_spot_id
            with pytest.raises(zl.StaleFence):
                await a.actors.create("player", "p-3").in_spot(claims["node-b"].entry_spot_id)
            assert await view.location.find("p-3") is None


async def test_entry_spot_is_not_a_relocation_candidate_and_its_actors_are(url):
    """09 §8: "Entry Spot isn't in the relocation candidate list, and an Actor that was on
    an Entry Spot is included in the relocation candidates." A drain moves the Actor onto
    the Entry Spot the target's descriptor names; the Entry Spot stays, unlisted; a member
    of a User Spot moves with it (SpotWide), never out of it."""
    with trio.fail_after(LIMIT):
        async with shared_store(url) as shared, zl.open_node(
                "node-a", store=shared.store, spots=SPOTS, on_stop="close") as a:
            view = shared.view
            on_entry = await a.actors.create("player", "p-1")
            spot = await room(a)
            await a.client.request("room-1", Enroll("p-2"), reply=Roll)
            async with zl.open_node("node-b", store=shared.store, spots=SPOTS,
                                    on_stop="close") as b:
                await drained(a, b, view, on_entry, spot)


async def drained(a: zl.Node, b: zl.Node, view: Any, on_entry: zl.ActorRef,
                  spot: zl.SpotRef) -> None:
    """The drain of ``a`` with ``b`` up: what moved where."""
    result = await a.drain()
    moved = [r.ref.spot_id for r in result.moved]
    not_moved = [r.ref.spot_id for r in result.not_moved]
    assert sorted(moved) == ["p-1", "p-2", "room-1"]
    assert not_moved == []
    assert a.entry_spot_id not in moved
    record = await view.location.find("p-1")
    assert (record.owner.node_rid, record.container) == (b.node_rid, b.entry_spot_id)
    assert record.object_generation == on_entry.generation
    assert await a.actors.members(a.entry_spot_id) == []
    assert [m.actor_id for m in await b.actors.members(b.entry_spot_id)] == ["p-1"]
    # Found by ActorId wherever it is now, from either node.
    for caller in (a, b):
        assert await caller.client.request_actor("p-1", Say("x"), reply=Heard) == (
            Heard("p-1", "x"))
    record = await view.location.find("p-2")
    assert (record.owner.node_rid, record.container) == (b.node_rid, spot.spot_id)


async def test_an_actor_joins_a_user_spot_on_another_node(url):
    with trio.fail_after(LIMIT):
        async with two_nodes(url) as (a, b, view):
            spot = await room(a, "room-a")  # node-a hosts the room (node-b takes none)
            player = await b.actors.create("player", "p-1")
            assert player.node_rid == b.node_rid
            joined = await b.actors.join(player, spot)
            assert (joined.node_rid, joined.container, joined.generation) == (
                a.node_rid, "room-a", player.generation)
            assert await a.client.request("room-a", List(), reply=Roll) == Roll(("p-1",))
            assert await b.client.request_actor("p-1", Say("moved"), reply=Heard) == Heard(
                "p-1", "moved")
            assert await b.spots.close(spot) is False  # a member keeps it open
            left = await a.actors.leave(joined)
            assert (left.node_rid, left.container) == (a.node_rid, a.entry_spot_id)
            assert (await view.location.find("p-1")).container == a.entry_spot_id
            assert await b.spots.close(spot) is True


async def test_a_spotwide_spot_moves_with_its_members_in_one_commit(url):
    """SpotWide (06 §6.1): the Spot and its members move in one aggregate commit -- each
    member keeps its ActorId, ObjectGeneration and container, its owner generation grows
    by one -- and calls sent by ActorId during the move all run, at one of the two nodes;
    an Actor on the Entry Spot is not a member and stays."""
    with trio.fail_after(LIMIT):
        async with two_nodes(url) as (a, b, view):
            spot = await room(a)
            for actor_id in ("p-1", "p-2"):
                await a.client.request("room-1", Enroll(actor_id), reply=Roll)
            loner = await a.actors.create("player", "p-3")
            before = {i: await view.location.find(i) for i in ("p-1", "p-2")}
            replies: list[Heard] = []

            async def chatter(actor_id: str) -> None:
                for i in range(20):
                    replies.append(await b.client.request_actor(actor_id, Say(str(i)),
                                                                reply=Heard))
                    await trio.lowlevel.checkpoint()

            async with trio.open_nursery() as nursery:
                for actor_id in ("p-1", "p-2"):
                    nursery.start_soon(chatter, actor_id)
                result = await a.relocate("room-1", to="node-b")
            assert result.outcome is zl.RelocationOutcome.COMMITTED
            assert sorted(replies, key=lambda h: (h.by, int(h.text))) == [
                Heard(p, str(i)) for p in ("p-1", "p-2") for i in range(20)]
            for actor_id, old in before.items():
                record = await view.location.find(actor_id)
                assert (record.owner.node_rid, record.container, record.object_generation,
                        record.owner_generation, record.state) == (
                    b.node_rid, "room-1", old.object_generation, old.owner_generation + 1,
                    AuthorityState.READY)
                for caller in (a, b):
                    assert await caller.client.request_actor(actor_id, Say("x"),
                                                             reply=Heard) == Heard(actor_id, "x")
            assert await b.client.request("room-1", List(), reply=Roll) == Roll(("p-1", "p-2"))
            assert {(m.actor_id, m.node_rid) for m in await a.actors.members(spot)} == {
                ("p-1", b.node_rid), ("p-2", b.node_rid)}
            assert (await view.location.find("p-3")).owner.node_rid == a.node_rid
            assert await a.actors.members(a.entry_spot_id) == [loner]
            assert await b.spots.close(spot) is False  # its members moved with it


async def test_a_spotwide_move_waits_for_a_members_running_turn(url):
    """The move seals the Spot, then each member, waiting for each one's running turn:
    that turn ends at the source, and the member's next call runs at the target."""
    with trio.fail_after(LIMIT):
        async with two_nodes(url) as (a, b, view):
            await room(a)
            await a.client.request("room-1", Enroll("p-1"), reply=Roll)
            HELD.update(began=trio.Event(), release=trio.Event())
            replies: list[Heard] = []
            results: list[zl.RelocationResult] = []

            async def hold() -> None:
                replies.append(await b.client.request_actor("p-1", Hold(), reply=Heard))

            async def move() -> None:
                results.append(await a.relocate("room-1", to="node-b"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(hold)
                await HELD["began"].wait()
                nursery.start_soon(move)
                await until_sealed(view, "p-1")  # sealed with its room, its turn runs
                HELD["release"].set()
            assert replies == [Heard("p-1", "held")]
            assert [r.outcome for r in results] == [zl.RelocationOutcome.COMMITTED]
            assert (await view.location.find("p-1")).owner.node_rid == b.node_rid


async def test_a_rooms_turn_that_calls_its_members_at_the_seal_finishes_before_they_hold(
        url):
    """The move waits for the Spot's running turn before it seals the members: a turn
    that fans out to its members after the seal still reaches them, and the move
    commits (sealed together, the turn would wait on a held member until the move's
    deadline and the move would abort)."""
    with trio.fail_after(LIMIT):
        async with two_nodes(url) as (a, b, view):
            await room(a)
            for actor_id in ("p-1", "p-2"):
                await a.client.request("room-1", Enroll(actor_id), reply=Roll)
            HELD.update(began=trio.Event(), release=trio.Event())
            rolls: list[Roll] = []
            results: list[zl.RelocationResult] = []

            async def fanout() -> None:
                rolls.append(await b.client.request("room-1", Fanout("hi"), reply=Roll))

            async def move() -> None:
                results.append(await a.relocate("room-1", to="node-b", timeout=3))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(fanout)
                await HELD["began"].wait()
                nursery.start_soon(move)
                await until_sealed(view, "room-1")
                HELD["release"].set()
            assert rolls == [Roll(("p-1", "p-2"))]
            assert [r.outcome for r in results] == [zl.RelocationOutcome.COMMITTED]


def test_per_actor_needs_recreate_on_relocation():
    with pytest.raises(zl.InvalidConfiguration, match="RecreateOnRelocation"):
        zl.user_spot("bad", relocation=zl.DisableRelocation(),
                     unit=zl.RelocationUnit.PER_ACTOR)
    with pytest.raises(zl.InvalidConfiguration, match="RelocationUnit"):
        zl.user_spot("bad", relocation=zl.RecreateOnRelocation(), unit="per_actor")  # type: ignore[arg-type]


async def test_a_per_actor_spot_moves_and_its_members_follow_it(url):
    """PerActor (06 §6.1): the Spot commits first, then each member moves after it in a
    move of its own; calls reach them by ActorId throughout, and a drain takes the rest."""
    with trio.fail_after(LIMIT):
        async with shared_store(url) as shared, zl.open_node(
                "node-a", store=shared.store, spots=SPOTS, on_stop="close") as a:
            view = shared.view
            await a.spots.get_or_create("lounge-1", "lounge")
            for actor_id in ("p-1", "p-2"):
                await a.client.request("lounge-1", Enroll(actor_id), reply=Roll)
            await a.actors.create("player", "p-3")  # on node-a's Entry Spot
            async with zl.open_node("node-b", store=shared.store, spots=SPOTS,
                                    on_stop="close") as b:
                result = await a.relocate("lounge-1", to="node-b")
                assert result.outcome is zl.RelocationOutcome.COMMITTED
                for actor_id in ("p-1", "p-2"):
                    record = await view.location.find(actor_id)
                    assert (record.owner.node_rid, record.container) == (b.node_rid,
                                                                         "lounge-1")
                    assert await a.client.request_actor(actor_id, Say("x"), reply=Heard) == (
                        Heard(actor_id, "x"))
                assert await b.client.request("lounge-1", List(), reply=Roll) == Roll(
                    ("p-1", "p-2"))
                drained = await a.drain()
                assert [r.ref.spot_id for r in drained.moved] == ["p-3"]
                assert drained.not_moved == []
async def test_no_member_of_a_per_actor_spot_starts_its_move_past_the_moves_deadline(
        url, monkeypatch):
    """The members follow their PerActor Spot one by one (one at a time here), each by
    the move's deadline: the first waits at its seal for its running turn until the
    deadline passes and stays; the others are not begun at all -- no store write, no
    time past the deadline -- and stay too, members still, reachable by ActorId."""
    monkeypatch.setattr(relocation_module, "DRAIN_PARALLEL", 1)
    with trio.fail_after(LIMIT):
        async with shared_store(url) as shared, zl.open_node(
                "node-a", store=shared.store, spots=SPOTS, on_stop="close") as a:
            view = shared.view
            await a.spots.get_or_create("lounge-1", "lounge")
            for actor_id in ("p-1", "p-2", "p-3"):
                await a.client.request("lounge-1", Enroll(actor_id), reply=Roll)
            before = {i: (await view.location.find(i)).store_version for i in ("p-2", "p-3")}
            async with zl.open_node("node-b", store=shared.store, spots=SPOTS,
                                    on_stop="close"):
                HELD.update(began=trio.Event(), release=trio.Event())
                replies: list[Heard] = []

                async def hold() -> None:
                    replies.append(await a.client.request_actor("p-1", Hold(), reply=Heard)
                                   .timeout(10))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(hold)
                    await HELD["began"].wait()
                    result = await a.relocate("lounge-1", to="node-b", timeout=2.0)
                    HELD["release"].set()
                assert result.outcome is zl.RelocationOutcome.COMMITTED
                assert replies == [Heard("p-1", "held")]
                for actor_id in ("p-1", "p-2", "p-3"):
                    record = await view.location.find(actor_id)
                    assert (record.owner.node_rid, record.container) == (a.node_rid,
                                                                         "lounge-1")
                    assert await a.client.request_actor(actor_id, Say("x"), reply=Heard) == (
                        Heard(actor_id, "x"))
                assert {i: (await view.location.find(i)).store_version
                        for i in ("p-2", "p-3")} == before


async def test_a_join_elsewhere_whose_deadline_passes_at_the_seal_aborts_and_the_actor_stays(
        url):
    """A join of a room on another node waits at the seal for the Actor's running turn
    and its deadline passes there: the move aborts before relay-ready -- it is not
    cancelled between two store steps, which would leave the record Sealed, the Actor
    unavailable and the room unclosable -- and the Actor stays a Ready member of its
    Entry Spot (found by the actor model, tests/runtime/test_actor_model.py)."""
    with trio.fail_after(LIMIT):
        async with two_nodes(url, default_timeout=0.5) as (a, b, view):
            spot = await room(a, "room-a")
            player = await b.actors.create("player", "p-1")
            HELD.update(began=trio.Event(), release=trio.Event())
            replies: list[Heard] = []

            async def hold() -> None:
                replies.append(await b.client.request_actor("p-1", Hold(), reply=Heard)
                               .timeout(5))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(hold)
                await HELD["began"].wait()
                with pytest.raises(zl.Unavailable, match="deadline"):
                    await b.actors.join(player, spot)
                HELD["release"].set()
            assert replies == [Heard("p-1", "held")]  # the turn the move waited for
            record = await view.location.find("p-1")
            assert (record.state, record.container, record.next_container) == (
                AuthorityState.READY, b.entry_spot_id, None)
            assert await b.actors.members(b.entry_spot_id) == [player]
            assert await a.actors.members(spot) == []
            joined = await b.actors.join(player, spot)  # not stranded: it moves now
            assert (joined.node_rid, joined.container) == (a.node_rid, "room-a")
            await a.actors.leave(joined)
            assert await b.spots.close(spot) is True

"""Location Store conformance: a Spot's durable state, written only by its current owner.

``save_state`` / ``clear_state`` check the writer's fence against the authority record
in the same transaction as the write (``store.state_steps``): a zombie -- an owner that a
successor replaced, or whose lease ran out -- writes nothing, whether or not the
successor saved yet. The state outlives the incarnation that wrote it. Every test runs
once per backend under an absolute ``trio.fail_after``.
"""

from __future__ import annotations

import pytest
import trio
from store_helpers import LEASE, claim, ready

from zlink_trio.core.errors import InvalidOperation, StaleFence, Unavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState
from zlink_trio.store.dead_lifecycle import release_dead_node
from zlink_trio.store.values import MAX_STATE_BYTES

TIMEOUT = 5


async def _move(store, record, target):
    """A whole planned move of ``record`` to ``target``: the record at the target."""
    location = store.location
    moving = await location.begin_relocation(record.fence(), target=target, now=0.0)
    sealed = await location.seal_relocation(moving.fence(), now=0.0)
    relay = await location.accept_relay_ready(sealed.fence(), target=target, now=0.0)
    return await location.commit_relocation(relay.fence(), now=0.0)


async def test_a_saved_state_loads_back_with_its_version(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        room = await ready(store, a_node, "room-1")
        location = store.location
        assert await location.load_state("room-1") is None
        first = await location.save_state(room.fence(), b"one", now=0.0)
        assert (first.data, first.version, first.object_generation) == (
            b"one", 1, room.object_generation)
        second = await location.save_state(room.fence(), bytearray(b"two"), now=1.0)
        assert second.version == 2
        assert await location.load_state("room-1") == second
        assert await location.find("room-1") == room  # the record is not touched
        assert await location.clear_state(room.fence(), now=1.0) is True
        assert await location.load_state("room-1") is None
        assert await location.clear_state(room.fence(), now=1.0) is False
        assert (await location.save_state(room.fence(), b"", now=1.0)).version == 1


async def test_a_zombie_owner_never_overwrites_its_successors_state(store):
    """The old owner keeps its fence after the Spot moved: its writes are refused,
    before and after the new owner's first save, and change nothing."""
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b")
        room = await ready(store, a_node, "room-1")
        location = store.location
        await location.save_state(room.fence(), b"from a", now=0.0)
        moved = await _move(store, room, b_node.owner())
        with pytest.raises(StaleFence, match="nothing was written"):
            await location.save_state(room.fence(), b"zombie", now=0.0)
        assert (await location.load_state("room-1")).data == b"from a"
        saved = await location.save_state(moved.fence(), b"from b", now=0.0)
        for write in (lambda: location.save_state(room.fence(), b"zombie", now=0.0),
                      lambda: location.clear_state(room.fence(), now=0.0)):
            with pytest.raises(StaleFence):
                await write()
        assert await location.load_state("room-1") == saved


async def test_an_owner_whose_lease_expired_writes_nothing(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        room = await ready(store, a_node, "room-1")
        location = store.location
        saved = await location.save_state(room.fence(), b"kept", now=0.0)
        with pytest.raises(Unavailable, match="expired"):
            await location.save_state(room.fence(), b"late", now=LEASE + 1)
        with pytest.raises(Unavailable, match="expired"):
            await location.clear_state(room.fence(), now=LEASE + 1)
        assert await location.load_state("room-1") == saved


async def test_the_state_is_written_only_while_the_spot_serves(store):
    """A move's source saves until relay-ready -- Relocating, and Sealed (the turn that
    ran when the move sealed the Spot ends there) --, not after; a Closing Spot saves
    too (the turn that ran when the close began ends there)."""
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b")
        room = await ready(store, a_node, "room-1")
        location = store.location
        moving = await location.begin_relocation(room.fence(), target=b_node.owner(),
                                                 now=0.0)
        await location.save_state(moving.fence(), b"while moving", now=0.0)
        sealed = await location.seal_relocation(moving.fence(), now=0.0)
        await location.save_state(sealed.fence(), b"its last turn", now=0.0)
        relay = await location.accept_relay_ready(sealed.fence(), target=b_node.owner(),
                                                  now=0.0)
        with pytest.raises(Unavailable, match="relay_ready"):
            await location.save_state(relay.fence(), b"past relay-ready", now=0.0)
        moved = await location.commit_relocation(relay.fence(), now=0.0)
        assert (await location.load_state("room-1")).data == b"its last turn"
        closing = await location.begin_close("room-1", object_generation=moved.object_generation,
                                             owner=b_node.owner(), now=0.0)
        assert closing.state is AuthorityState.CLOSING
        await location.save_state(closing.fence(), b"its last turn, closing", now=0.0)
        assert (await location.load_state("room-1")).data == b"its last turn, closing"
        assert await location.clear_state(closing.fence(), now=0.0) is True


async def test_the_state_outlives_its_incarnation(store):
    """A crash: restart recovery releases the dead node's record, the state stays, and
    the next incarnation -- another generation, on another node -- loads and saves it."""
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        room = await ready(store, a_node, "counter-1", stable_type="counter",
                           kind=SpotKind.INSTANCE)
        location = store.location
        await location.save_state(room.fence(), b"149", now=0.0)
        done = await release_dead_node(store, "node-a", now=lambda: LEASE + 1)
        assert [r.spot_id for r in done.released] == ["counter-1"]
        assert await location.find("counter-1") is None
        b_node = await claim(store, "node-b", now=LEASE + 1)
        again = await ready(store, b_node, "counter-1", stable_type="counter",
                            kind=room.kind)
        loaded = await location.load_state("counter-1")
        assert (loaded.data, loaded.object_generation) == (b"149", room.object_generation)
        with pytest.raises(StaleFence):  # the dead incarnation's fence writes nothing
            await location.save_state(room.fence(), b"1", now=LEASE + 1)
        saved = await location.save_state(again.fence(), b"150", now=LEASE + 1)
        assert (saved.version, saved.object_generation) == (2, again.object_generation)


async def test_a_state_write_checks_its_arguments(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        room = await ready(store, a_node, "room-1")
        location = store.location
        with pytest.raises(InvalidOperation, match="bytes"):
            await location.save_state(room.fence(), "text", now=0.0)
        with pytest.raises(InvalidOperation, match="more than"):
            await location.save_state(room.fence(), b"x" * (MAX_STATE_BYTES + 1), now=0.0)
        with pytest.raises(InvalidOperation, match="AuthorityFence"):
            await location.save_state(room, b"x", now=0.0)
        with pytest.raises(InvalidOperation):
            await location.load_state("")
        await location.save_state(room.fence(), b"x" * MAX_STATE_BYTES, now=0.0)
        assert len((await location.load_state("room-1")).data) == MAX_STATE_BYTES
        gone = room.fence()
        await location.release(
            (await location.begin_close("room-1", object_generation=room.object_generation,
                                        owner=a_node.owner(), now=0.0)).fence())
        with pytest.raises(StaleFence, match="missing"):
            await location.save_state(gone, b"y", now=0.0)


async def test_the_close_of_a_user_spot_ends_its_state_an_instance_spots_stays(store):
    """Release after BeginClose -- a User Spot's or an Actor's close -- deletes the state in
    the same transaction; an Instance Spot's deactivation (the same two steps) keeps it."""
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        location = store.location
        for spot_id, stable_type, kind, kept in (
                ("room-1", "room", SpotKind.USER, False),
                ("counter-1", "counter", SpotKind.INSTANCE, True),
                ("p-1", "player", SpotKind.ACTOR, False)):
            extra = {"container": "room-2"} if kind is SpotKind.ACTOR else {}
            if extra:
                await ready(store, a_node, "room-2")
            record = await ready(store, a_node, spot_id, stable_type=stable_type, kind=kind,
                                 **extra)
            saved = await location.save_state(record.fence(), b"s", now=0.0)
            closing = await location.begin_close(
                spot_id, object_generation=record.object_generation, owner=a_node.owner(),
                now=0.0)
            assert await location.release(closing.fence()) is True
            assert await location.load_state(spot_id) == (saved if kept else None)

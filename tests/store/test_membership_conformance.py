"""Location Store conformance: Actor membership (docs/actors.md).

An Actor's record (kind ACTOR) names its container; Reserve checks the container,
BeginClose of a User Spot refuses while an Actor names it (``MembersRemain``), and
MoveMembership changes the container on one owner. Runs once per backend under an
absolute ``trio.fail_after``; refused transactions are checked to have written nothing.
"""

from __future__ import annotations

import pytest
import trio
from store_helpers import LEASE, MESH, claim, ready, reserve

from zlink_trio.core.errors import InvalidOperation, StaleFence, Unavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState
from zlink_trio.store import AuthorityExists, MembersRemain
from zlink_trio.store.dead_lifecycle import release_dead_node

TIMEOUT = 5


async def actor(store, owner, actor_id, container, **kwargs):
    """A Ready Actor ``actor_id`` in ``container``."""
    fence = await reserve(store, owner, actor_id, kind=SpotKind.ACTOR, stable_type="player",
                          container=container, **kwargs)
    return await store.location.commit_ready(fence, now=0.0)


async def close(store, record, now=0.0):
    return await store.location.begin_close(
        record.spot_id, object_generation=record.object_generation, owner=record.owner,
        now=now)


async def move(store, record, container, *, now=0.0, **changes):
    args = {"object_generation": record.object_generation, "owner": record.owner,
            "container": container, "now": now, **changes}
    return await store.location.move_membership(record.spot_id, **args)


async def member_ids(store, container):
    return [r.spot_id for r in await store.location.members(container)]


async def test_an_actor_created_on_the_entry_spot_names_it(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        entry = c.descriptor.entry_spot_id
        a = await actor(store, c, "p-1", entry)
        assert (a.kind, a.state, a.container) == (SpotKind.ACTOR, AuthorityState.READY, entry)
        assert await store.location.find("p-1") == a
        assert await member_ids(store, entry) == ["p-1"]


async def test_an_actor_created_in_a_user_spot_names_it(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        await ready(store, c, "room-1")
        await actor(store, c, "p-2", "room-1")
        await actor(store, c, "p-1", "room-1")
        assert await member_ids(store, "room-1") == ["p-1", "p-2"]  # in ActorId order
        assert await member_ids(store, c.descriptor.entry_spot_id) == []


@pytest.mark.parametrize("container", ["counter-1", "p-0"])
async def test_an_instance_spot_or_an_actor_has_no_members(store, container):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        await ready(store, c, "counter-1", kind=SpotKind.INSTANCE, stable_type="counter")
        await actor(store, c, "p-0", c.descriptor.entry_spot_id)
        with pytest.raises(InvalidOperation, match="Entry or User Spot"):
            await actor(store, c, "p-1", container)
        assert await store.location.find("p-1") is None
        assert await member_ids(store, container) == []


async def test_an_actor_needs_an_existing_container(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        with pytest.raises(InvalidOperation, match="no authority"):
            await actor(store, c, "p-1", "room-404")
        assert await store.location.find("p-1") is None


async def test_an_actor_joins_only_a_container_its_owner_owns(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b")
        await ready(store, b_node, "room-b")
        with pytest.raises(StaleFence):
            await actor(store, a_node, "p-1", "room-b")
        with pytest.raises(StaleFence):
            await actor(store, a_node, "p-1", b_node.descriptor.entry_spot_id)
        assert await store.location.find("p-1") is None
        assert await member_ids(store, "room-b") == []


async def test_an_actor_does_not_join_a_closing_user_spot(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        room = await ready(store, c, "room-1")
        await close(store, room)
        with pytest.raises(Unavailable, match="Ready"):
            await actor(store, c, "p-1", "room-1")
        assert await store.location.find("p-1") is None


async def test_reserve_checks_kind_and_container_together(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        await ready(store, c, "room-1")
        with pytest.raises(InvalidOperation, match="container"):  # an Actor needs one
            await reserve(store, c, "p-1", kind=SpotKind.ACTOR, stable_type="player")
        with pytest.raises(InvalidOperation, match="container"):  # a Spot has none
            await reserve(store, c, "room-2", container="room-1")
        with pytest.raises(InvalidOperation, match="does not serve"):
            await reserve(store, c, "p-1", kind=SpotKind.ACTOR, stable_type="room",
                          container="room-1")
        assert await member_ids(store, "room-1") == []


async def test_user_spot_with_a_member_does_not_close(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        room = await ready(store, c, "room-1")
        fence = await reserve(store, c, "p-1", kind=SpotKind.ACTOR, stable_type="player",
                              container="room-1")
        with pytest.raises(MembersRemain) as refused:  # a Creating member counts
            await close(store, room)
        assert (refused.value.members, refused.value.record) == (1, room)
        assert await store.location.find("room-1") == room  # nothing written
        member = await store.location.commit_ready(fence, now=0.0)
        with pytest.raises(MembersRemain):
            await close(store, room)
        closing = await close(store, member)
        assert await store.location.release(closing.fence()) is True
        assert await member_ids(store, "room-1") == []
        assert (await close(store, room)).state is AuthorityState.CLOSING


async def test_an_aborted_actor_leaves_no_membership(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        room = await ready(store, c, "room-1")
        fence = await reserve(store, c, "p-1", kind=SpotKind.ACTOR, stable_type="player",
                              container="room-1")
        assert await store.location.abort_creating(fence) is True
        assert await member_ids(store, "room-1") == []
        assert (await close(store, room)).state is AuthorityState.CLOSING


async def test_an_expired_actor_released_by_the_operator_leaves_no_membership(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        await ready(store, c, "room-1")
        a = await actor(store, c, "p-1", "room-1")
        await store.location.release_expired("p-1", object_generation=a.object_generation,
                                             owner_generation=1, now=LEASE + 1)
        assert await member_ids(store, "room-1") == []


async def test_join_and_leave_move_the_membership_on_one_owner(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        entry = c.descriptor.entry_spot_id
        await ready(store, c, "room-1")
        a = await actor(store, c, "p-1", entry)
        joined = await move(store, a, "room-1")
        assert (joined.container, joined.store_version) == ("room-1", a.store_version + 1)
        assert (joined.object_generation, joined.owner_generation) == (a.object_generation, 1)
        assert await move(store, joined, "room-1") == joined  # already there
        assert await member_ids(store, "room-1") == ["p-1"]
        assert await member_ids(store, entry) == []
        left = await move(store, joined, entry)
        assert left.container == entry
        assert await member_ids(store, "room-1") == []
        assert await member_ids(store, entry) == ["p-1"]
        assert (await store.location.find("p-1")) == left


async def test_move_membership_refusals_write_nothing(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store, "node-a")
        other = await claim(store, "node-b")
        entry = c.descriptor.entry_spot_id
        await ready(store, c, "room-1")
        await ready(store, c, "counter-1", kind=SpotKind.INSTANCE, stable_type="counter")
        await ready(store, other, "room-b")
        a = await actor(store, c, "p-1", entry)
        with pytest.raises(InvalidOperation, match="current ActorRef"):
            await move(store, a, "room-1", object_generation=a.object_generation + 1000)
        with pytest.raises(InvalidOperation, match="not an Actor"):
            await store.location.move_membership(
                "room-1", object_generation=(await store.location.find("room-1"))
                .object_generation, owner=c.owner(), container=entry, now=0.0)
        with pytest.raises(StaleFence):
            await move(store, a, "room-1", owner=other.owner())
        with pytest.raises(StaleFence):
            await move(store, a, "room-b")
        with pytest.raises(InvalidOperation, match="Entry or User Spot"):
            await move(store, a, "counter-1")
        with pytest.raises(InvalidOperation, match="own container"):
            await move(store, a, "p-1")
        with pytest.raises(Unavailable):
            await move(store, a, "room-1", now=LEASE + 1)
        assert await store.location.find("p-1") == a
        assert await member_ids(store, entry) == ["p-1"]
        assert await member_ids(store, "room-1") == []


async def test_a_closing_actor_does_not_change_container(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        await ready(store, c, "room-1")
        a = await actor(store, c, "p-1", c.descriptor.entry_spot_id)
        closing = await close(store, a)
        with pytest.raises(InvalidOperation, match="Ready"):
            await move(store, closing, "room-1")
        assert await member_ids(store, "room-1") == []


async def test_actor_ids_and_spot_ids_share_one_namespace(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        await ready(store, c, "room-1")
        await actor(store, c, "p-1", "room-1")
        with pytest.raises(AuthorityExists):
            await ready(store, c, "p-1")
        with pytest.raises(AuthorityExists):
            await actor(store, c, "room-1", c.descriptor.entry_spot_id)
        assert (await store.location.find("p-1")).mesh == MESH


async def test_a_move_never_splits_an_actor_from_its_container(store):
    """Until moves carry members (docs/actors.md), a Spot with a member does not begin a
    relocation, and an Actor moves only into a container at its target; a Spot whose
    members left moves as before."""
    with trio.fail_after(TIMEOUT):
        c = await claim(store, "node-a")
        other = await claim(store, "node-b")
        room = await ready(store, c, "room-1")
        a = await actor(store, c, "p-1", "room-1")
        with pytest.raises(InvalidOperation, match="members"):
            await store.location.begin_relocation(room.fence(), target=other.owner(), now=0.0)
        with pytest.raises(InvalidOperation, match="container"):
            await store.location.begin_relocation(a.fence(), target=other.owner(), now=0.0)
        with pytest.raises(InvalidOperation, match="container"):
            await store.location.begin_relocation(room.fence(), target=other.owner(),
                                                  now=0.0, container="room-1")
        with pytest.raises(StaleFence):  # a container the target does not own
            await store.location.begin_relocation(a.fence(), target=other.owner(), now=0.0,
                                                  container="room-1")
        assert await store.location.find("room-1") == room
        assert await store.location.find("p-1") == a
        closing = await close(store, a)
        await store.location.release(closing.fence())
        moving = await store.location.begin_relocation(room.fence(), target=other.owner(),
                                                       now=0.0)
        assert moving.state is AuthorityState.RELOCATING


async def _move(store, record, target, container):
    """BeginRelocation, Seal, AcceptRelayReady of ``record`` toward ``target``."""
    moving = await store.location.begin_relocation(record.fence(), target=target, now=0.0,
                                                   container=container)
    sealed = await store.location.seal_relocation(moving.fence(), now=0.0)
    return await store.location.accept_relay_ready(sealed.fence(), target=target, now=0.0)


async def test_an_actor_moves_into_a_container_its_target_owns(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b")
        a_entry, b_entry = a_node.descriptor.entry_spot_id, b_node.descriptor.entry_spot_id
        p = await actor(store, a_node, "p-1", a_entry)
        moving = await store.location.begin_relocation(p.fence(), target=b_node.owner(),
                                                       now=0.0, container=b_entry)
        assert (moving.container, moving.next_container) == (a_entry, b_entry)
        # A member of both while it moves: neither container can lose it.
        assert await member_ids(store, a_entry) == ["p-1"]
        assert await member_ids(store, b_entry) == ["p-1"]
        sealed = await store.location.seal_relocation(moving.fence(), now=0.0)
        relay = await store.location.accept_relay_ready(sealed.fence(), target=b_node.owner(),
                                                        now=0.0)
        moved = await store.location.commit_relocation(relay.fence(), now=0.0)
        assert (moved.owner, moved.container, moved.next_container) == (
            b_node.owner(), b_entry, None)
        assert await member_ids(store, a_entry) == []
        assert await member_ids(store, b_entry) == ["p-1"]


async def test_an_actor_joins_a_user_spot_on_another_node_by_a_move(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b")
        room = await ready(store, b_node, "room-b")
        p = await actor(store, a_node, "p-1", a_node.descriptor.entry_spot_id)
        relay = await _move(store, p, b_node.owner(), "room-b")
        with pytest.raises(MembersRemain):  # the arriving member keeps the room open
            await close(store, room)
        moved = await store.location.commit_relocation(relay.fence(), now=0.0)
        assert moved.container == "room-b"
        assert await member_ids(store, "room-b") == ["p-1"]


async def test_an_aborted_actor_move_keeps_its_container(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b")
        a_entry, b_entry = a_node.descriptor.entry_spot_id, b_node.descriptor.entry_spot_id
        p = await actor(store, a_node, "p-1", a_entry)
        moving = await store.location.begin_relocation(p.fence(), target=b_node.owner(),
                                                       now=0.0, container=b_entry)
        kept = await store.location.abort_relocation(moving.fence())
        assert (kept.container, kept.next_container, kept.owner) == (a_entry, None,
                                                                     a_node.owner())
        assert await member_ids(store, b_entry) == []
        assert await member_ids(store, a_entry) == ["p-1"]


async def test_an_actor_move_released_past_relay_ready_leaves_no_membership(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b", lease=LEASE / 2)
        a_entry, b_entry = a_node.descriptor.entry_spot_id, b_node.descriptor.entry_spot_id
        p = await actor(store, a_node, "p-1", a_entry)
        relay = await _move(store, p, b_node.owner(), b_entry)
        await store.location.release_relay_ready(relay.fence(), target=b_node.owner(),
                                                 now=LEASE / 2 + 1)
        assert await store.location.find("p-1") is None
        assert await member_ids(store, a_entry) == []
        assert await member_ids(store, b_entry) == []


async def test_a_dead_lifecycle_releases_its_actors_and_their_containers(store):
    """Restart recovery (and ``zlink-trio release --node``) ends a dead lifecycle's Actors
    like its Spots: released, never moved elsewhere; no membership is left behind."""
    with trio.fail_after(TIMEOUT):
        c = await claim(store, "node-a")
        entry = c.descriptor.entry_spot_id
        await ready(store, c, "room-1")
        await actor(store, c, "p-1", "room-1")
        await actor(store, c, "p-2", entry)
        await reserve(store, c, "p-3", kind=SpotKind.ACTOR, stable_type="player",
                      container="room-1")  # died while Creating
        done = await release_dead_node(store, "node-a", now=lambda: LEASE + 1)
        assert sorted(r.spot_id for r in done.released) == ["p-1", "p-2", "p-3", "room-1"]
        assert not done.left
        for spot_id in ("room-1", "p-1", "p-2", "p-3"):
            assert await store.location.find(spot_id) is None
        assert await member_ids(store, "room-1") == []
        assert await member_ids(store, entry) == []


async def test_a_member_follows_its_per_actor_spot_into_the_same_container(store):
    """A PerActor Spot moves without its members (``members_stay``); each member then
    follows it in a move of its own whose next container is the one it has: commit and
    abort keep its membership."""
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b")
        room = await ready(store, a_node, "room-1")
        p = await actor(store, a_node, "p-1", "room-1")
        with pytest.raises(InvalidOperation, match="members"):
            await store.location.begin_relocation(room.fence(), target=b_node.owner(),
                                                  now=0.0)
        moving = await store.location.begin_relocation(room.fence(), target=b_node.owner(),
                                                       now=0.0, members_stay=True)
        sealed = await store.location.seal_relocation(moving.fence(), now=0.0)
        relay = await store.location.accept_relay_ready(sealed.fence(),
                                                        target=b_node.owner(), now=0.0)
        await store.location.commit_relocation(relay.fence(), now=0.0)
        assert await member_ids(store, "room-1") == ["p-1"]  # still its member, on node-a
        following = await store.location.begin_relocation(
            p.fence(), target=b_node.owner(), now=0.0, container="room-1")
        kept = await store.location.abort_relocation(following.fence())
        assert kept.container == "room-1"
        assert await member_ids(store, "room-1") == ["p-1"]
        relay = await _move(store, kept, b_node.owner(), "room-1")
        moved = await store.location.commit_relocation(relay.fence(), now=0.0)
        assert (moved.owner, moved.container) == (b_node.owner(), "room-1")
        assert await member_ids(store, "room-1") == ["p-1"]

"""Location Store conformance: a SpotWide move carries its members (docs/actors.md).

BeginRelocation with ``carry_members`` steps the Spot's record and each member Actor's
record in one transaction, and so does every later step of that move: one aggregate
commit at the target (each member's owner generation + 1), one abort back at the
source, one release past relay-ready. A carried member takes no step of its own, and
nothing joins, leaves, closes or is created in the Spot while it moves. Redis Cluster
keeps members in other buckets than the Spot: they follow its steps in their own
(``store.redis_cluster.carry``), and the last tests lose those follows on purpose to
show whoever reads a member left behind brings it to its move's outcome. Every test
runs once per backend under an absolute ``trio.fail_after``.
"""

from __future__ import annotations

import pytest
import trio
from store_helpers import LEASE, claim, ready, reserve
from test_membership_conformance import actor, close, member_ids, move

from zlink_trio.core.errors import (
    CapacityExceeded,
    InvalidOperation,
    StoreUnavailable,
    Unavailable,
)
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState
from zlink_trio.store.dead_lifecycle import release_dead_node

TIMEOUT = 5


@pytest.fixture
async def group(store):
    """node-a owns room-1 with members p-1 and p-2 and p-3 on its Entry Spot; node-b is
    the target."""
    a_node = await claim(store, "node-a")
    b_node = await claim(store, "node-b")
    room = await ready(store, a_node, "room-1")
    members = [await actor(store, a_node, i, "room-1") for i in ("p-1", "p-2")]
    loner = await actor(store, a_node, "p-3", a_node.descriptor.entry_spot_id)
    return a_node, b_node, room, members, loner


async def _begin(store, room, target):
    return await store.location.begin_relocation(room.fence(), target=target, now=0.0,
                                                 carry_members=True)


async def _states(store, *ids):
    return [(await store.location.find(i)).state for i in ids]


async def test_a_spotwide_move_carries_its_members_in_one_commit(store, group):
    with trio.fail_after(TIMEOUT):
        _a_node, b_node, room, (p1, p2), loner = group
        target = b_node.owner()
        moving = await _begin(store, room, target)
        for p in ("p-1", "p-2"):
            carried = await store.location.find(p)
            assert (carried.state, carried.relocation_target, carried.next_container,
                    carried.container) == (AuthorityState.RELOCATING, target, None, "room-1")
        assert await store.location.find("p-3") == loner  # not a member: untouched
        sealed = await store.location.seal_relocation(moving.fence(), now=0.0)
        assert await _states(store, "p-1", "p-2") == [AuthorityState.SEALED] * 2
        relay = await store.location.accept_relay_ready(sealed.fence(), target=target,
                                                        now=0.0)
        assert await _states(store, "p-1", "p-2") == [AuthorityState.RELAY_READY] * 2
        moved = await store.location.commit_relocation(relay.fence(), now=0.0)
        assert (moved.owner, moved.state) == (target, AuthorityState.READY)
        for before in (p1, p2):
            after = await store.location.find(before.spot_id)
            assert (after.state, after.owner, after.owner_generation, after.container,
                    after.relocation_target, after.object_generation) == (
                AuthorityState.READY, target, before.owner_generation + 1, "room-1", None,
                before.object_generation)
        assert await member_ids(store, "room-1") == ["p-1", "p-2"]
        stats = await store.location.statistics()
        assert stats.relocating == stats.sealed == stats.relay_ready == 0


async def test_a_carried_member_takes_no_step_of_its_own(store, group):
    with trio.fail_after(TIMEOUT):
        a_node, b_node, room, (p1, _p2), _loner = group
        moving = await _begin(store, room, b_node.owner())
        carried = await store.location.find("p-1")
        location = store.location
        for own_step in (
                lambda: location.seal_relocation(carried.fence(), now=0.0),
                lambda: location.abort_relocation(carried.fence()),
                lambda: location.begin_relocation(carried.fence(), target=b_node.owner(),
                                                  now=0.0)):
            with pytest.raises(InvalidOperation, match="moves with its Spot"):
                await own_step()
        with pytest.raises(InvalidOperation):  # leave: only a Ready Actor
            await move(store, carried, a_node.descriptor.entry_spot_id)
        with pytest.raises(Unavailable, match="for a move"):  # close: not while it moves
            await close(store, carried)
        with pytest.raises(Unavailable):  # nobody is created into a moving Spot
            await actor(store, a_node, "p-9", "room-1")
        assert await store.location.find("p-1") == carried
        sealed = await location.seal_relocation(moving.fence(), now=0.0)
        relay = await location.accept_relay_ready(sealed.fence(), target=b_node.owner(),
                                                  now=0.0)
        carried = await store.location.find("p-1")
        with pytest.raises(InvalidOperation, match="moves with its Spot"):
            await location.commit_relocation(carried.fence(), now=0.0)
        with pytest.raises(InvalidOperation, match="moves with its Spot"):
            await location.abort_relocation(carried.fence())
        assert (await location.find("p-1")).state is AuthorityState.RELAY_READY
        await location.commit_relocation(relay.fence(), now=0.0)
        assert (await location.find("p-1")).owner_generation == p1.owner_generation + 1


async def test_an_aborted_spotwide_move_keeps_its_members_at_the_source(store, group):
    with trio.fail_after(TIMEOUT):
        a_node, b_node, room, (p1, p2), _loner = group
        moving = await _begin(store, room, b_node.owner())
        sealed = await store.location.seal_relocation(moving.fence(), now=0.0)
        kept = await store.location.abort_relocation(sealed.fence())
        assert (kept.state, kept.owner) == (AuthorityState.READY, a_node.owner())
        for before in (p1, p2):
            after = await store.location.find(before.spot_id)
            assert (after.state, after.owner, after.owner_generation, after.container,
                    after.relocation_target) == (AuthorityState.READY, a_node.owner(),
                                                 before.owner_generation, "room-1", None)
        # Back to normal: a member leaves, and the room moves again with the other.
        await move(store, await store.location.find("p-1"),
                   a_node.descriptor.entry_spot_id)
        again = await _begin(store, kept, b_node.owner())
        assert await _states(store, "p-1", "p-2") == [AuthorityState.READY,
                                                      AuthorityState.RELOCATING]
        await store.location.abort_relocation(again.fence())


async def test_a_spotwide_move_released_past_relay_ready_ends_its_members(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b", lease=LEASE / 2)
        room = await ready(store, a_node, "room-1")
        await actor(store, a_node, "p-1", "room-1")
        moving = await _begin(store, room, b_node.owner())
        sealed = await store.location.seal_relocation(moving.fence(), now=0.0)
        relay = await store.location.accept_relay_ready(sealed.fence(), target=b_node.owner(),
                                                        now=0.0)
        await store.location.release_relay_ready(relay.fence(), target=b_node.owner(),
                                                 now=LEASE / 2 + 1)
        assert await store.location.find("room-1") is None
        assert await store.location.find("p-1") is None
        assert await member_ids(store, "room-1") == []
        stats = await store.location.statistics()
        assert stats.relay_ready == 0


async def test_a_spotwide_move_waits_for_a_member_in_its_own_move(store):
    """A member moving in (a join from another node) or out of the Spot is in no state
    to be carried: the Spot's move is refused and writes nothing."""
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b")
        room = await ready(store, b_node, "room-b")
        p = await actor(store, a_node, "p-1", a_node.descriptor.entry_spot_id)
        joining = await store.location.begin_relocation(p.fence(), target=b_node.owner(),
                                                        now=0.0, container="room-b")
        with pytest.raises(Unavailable, match="p-1"):  # it passes: retry
            await _begin(store, room, a_node.owner())
        assert await store.location.find("room-b") == room
        assert await store.location.find("p-1") == joining
        await store.location.abort_relocation(joining.fence())
        moving = await _begin(store, room, a_node.owner())  # no member now: a plain move
        assert moving.state is AuthorityState.RELOCATING


async def test_a_spotwide_move_needs_room_for_every_member(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a", capacity=8)
        b_node = await claim(store, "node-b", capacity=2)
        room = await ready(store, a_node, "room-1")
        for i in ("p-1", "p-2"):
            await actor(store, a_node, i, "room-1")
        with pytest.raises(CapacityExceeded):
            await _begin(store, room, b_node.owner())
        assert await _states(store, "room-1", "p-1", "p-2") == [AuthorityState.READY] * 3
        with pytest.raises(InvalidOperation, match="exclude"):
            await store.location.begin_relocation(room.fence(), target=b_node.owner(),
                                                  now=0.0, carry_members=True,
                                                  members_stay=True)


async def test_a_dead_lifecycle_releases_a_carried_group_with_its_spot(store):
    """The source died in the middle of a SpotWide move: restart recovery aborts the group
    with the Spot's fence and releases every record of it; none is left."""
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b", lease=LEASE * 10)
        room = await ready(store, a_node, "room-1")
        for i in ("p-1", "p-2"):
            await actor(store, a_node, i, "room-1")
        moving = await _begin(store, room, b_node.owner())
        await store.location.seal_relocation(moving.fence(), now=0.0)
        done = await release_dead_node(store, "node-a", now=lambda: LEASE + 1)
        assert not done.left
        assert sorted(r.spot_id for r in done.released) == ["p-1", "p-2", "room-1"]
        for spot_id in ("room-1", "p-1", "p-2"):
            assert await store.location.find(spot_id) is None


# -- Redis Cluster: the members follow their Spot's step in their own buckets -------------

cluster = pytest.mark.parametrize("store", ["redis-cluster"], indirect=True)


@pytest.fixture
def lost_follows(store, monkeypatch):
    """The steps (``carry.FOLLOWS`` values) whose members' follows fail with
    :class:`StoreUnavailable` after the Spot's script (a crash or an outage between the
    parts); the set is the test's to fill."""
    failing: set[str] = set()
    follow = store.location.carry._follow

    async def flaky(step, move, ids, *extra):
        if step in failing:
            raise StoreUnavailable(f"the {step} follow was lost (test)")
        return await follow(step, move, ids, *extra)

    monkeypatch.setattr(store.location.carry, "_follow", flaky)
    return failing


async def _relay_ready(store, room, target):
    moving = await _begin(store, room, target)
    sealed = await store.location.seal_relocation(moving.fence(), now=0.0)
    return await store.location.accept_relay_ready(sealed.fence(), target=target, now=0.0)


@cluster
async def test_redis_cluster_members_a_commit_left_behind_follow_on_their_next_read(
        store, group, lost_follows):
    """The commit is the Spot's record's: it stands when its members' follows are lost,
    and a member read later is resolved to the move's outcome (at the target, its owner
    generation + 1); the Spot moves again once its group is resolved."""
    with trio.fail_after(TIMEOUT):
        a_node, b_node, room, (p1, p2), _loner = group
        relay = await _relay_ready(store, room, b_node.owner())
        lost_follows.add("commit")
        moved = await store.location.commit_relocation(relay.fence(), now=0.0)
        assert (moved.state, moved.owner) == (AuthorityState.READY, b_node.owner())
        lost_follows.clear()
        after = await store.location.find("p-1")
        assert (after.state, after.owner, after.owner_generation) == (
            AuthorityState.READY, b_node.owner(), p1.owner_generation + 1)
        back = await _begin(store, moved, a_node.owner())  # p-2 resolved on the way
        assert await _states(store, "p-1", "p-2") == [AuthorityState.RELOCATING] * 2
        assert (await store.location.find("p-2")).owner_generation == (
            p2.owner_generation + 1)
        await store.location.abort_relocation(back.fence())
        assert await _states(store, "room-1", "p-1", "p-2") == [AuthorityState.READY] * 3


@cluster
async def test_redis_cluster_members_an_abort_left_behind_return_to_the_source(
        store, group, lost_follows):
    with trio.fail_after(TIMEOUT):
        a_node, b_node, room, (p1, _p2), _loner = group
        moving = await _begin(store, room, b_node.owner())
        lost_follows.add("abort")
        kept = await store.location.abort_relocation(moving.fence())
        lost_follows.clear()
        after = await store.location.find("p-1")
        assert (after.state, after.owner, after.owner_generation, after.container,
                after.relocation_target) == (AuthorityState.READY, a_node.owner(),
                                             p1.owner_generation, "room-1", None)
        again = await _begin(store, kept, b_node.owner())  # p-2 resolved on the way
        assert await _states(store, "p-1", "p-2") == [AuthorityState.RELOCATING] * 2
        await store.location.abort_relocation(again.fence())
        for p in ("p-1", "p-2"):
            assert (await store.location.find(p)).owner == a_node.owner()


@cluster
async def test_redis_cluster_members_a_release_left_behind_end_with_their_spot(
        store, lost_follows):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b", lease=LEASE / 2)
        room = await ready(store, a_node, "room-1")
        await actor(store, a_node, "p-1", "room-1")
        relay = await _relay_ready(store, room, b_node.owner())
        lost_follows.add("releasing")
        await store.location.release_relay_ready(relay.fence(), target=b_node.owner(),
                                                 now=LEASE / 2 + 1)
        lost_follows.clear()
        assert await store.location.find("room-1") is None
        assert await store.location.find("p-1") is None
        assert await member_ids(store, "room-1") == []


@cluster
async def test_redis_cluster_a_dead_target_ends_members_its_commit_left_behind(
        store, lost_follows):
    """The target committed, its members' follows were lost, and it died: restart
    recovery of its NodeId resolves them (they were its) and releases every record."""
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a", lease=LEASE * 10)
        b_node = await claim(store, "node-b")
        room = await ready(store, a_node, "room-1")
        for i in ("p-1", "p-2"):
            await actor(store, a_node, i, "room-1")
        relay = await _relay_ready(store, room, b_node.owner())
        lost_follows.add("commit")
        await store.location.commit_relocation(relay.fence(), now=0.0)
        lost_follows.clear()
        done = await release_dead_node(store, "node-b", now=lambda: LEASE + 1)
        assert not done.left
        for spot_id in ("room-1", "p-1", "p-2"):
            assert await store.location.find(spot_id) is None


@cluster
async def test_redis_cluster_a_member_that_changes_as_the_move_begins_ends_the_move(
        store, group, monkeypatch):
    """A member that leaves between the marks' check and its own follow refuses to be
    carried: the whole move is aborted (no member stays carried) and BeginRelocation
    raises Unavailable (retry)."""
    with trio.fail_after(TIMEOUT):
        a_node, b_node, room, _members, _loner = group
        location = store.location
        follow = location.carry._follow

        async def leave_first(step, move_, ids, *extra):
            if step == "begin":
                await move(store, await location.find("p-2"),
                           a_node.descriptor.entry_spot_id)
            return await follow(step, move_, ids, *extra)

        monkeypatch.setattr(location.carry, "_follow", leave_first)
        with pytest.raises(Unavailable, match="p-2"):
            await _begin(store, room, b_node.owner())
        assert await _states(store, "room-1", "p-1", "p-2") == [AuthorityState.READY] * 3
        assert await member_ids(store, "room-1") == ["p-1"]
        monkeypatch.setattr(location.carry, "_follow", follow)
        moving = await _begin(store, await location.find("room-1"), b_node.owner())
        assert await _states(store, "p-1", "p-2") == [AuthorityState.RELOCATING,
                                                      AuthorityState.READY]
        assert moving.state is AuthorityState.RELOCATING


async def test_a_spot_without_members_moves_alike_with_carry_members(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b")
        room = await ready(store, a_node, "room-1")
        await reserve(store, a_node, "p-1", kind=SpotKind.ACTOR, stable_type="player",
                      container=a_node.descriptor.entry_spot_id)
        moving = await _begin(store, room, b_node.owner())
        assert (moving.state, moving.relocation_target) == (AuthorityState.RELOCATING,
                                                            b_node.owner())

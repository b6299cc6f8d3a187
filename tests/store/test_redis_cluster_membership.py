"""Actor membership on Redis Cluster: the split protocol's crash windows and races.

An Actor's record and its container's record live in different buckets, so Reserve of
an Actor, MoveMembership and BeginClose are split in parts around member marks
(``store.redis_cluster.membership``). Each test stops a transaction between two of its
parts -- by running only the parts before (a crash), or by re-adding the mark a lost
part would have dropped -- and checks what the protocol promises: a stale mark is
dropped by the next BeginClose of its container, a join still in flight when the close
checked its mark can never write its record, and a close never succeeds while an
Actor's record names the container. Each runs under ``trio.fail_after``.
"""

from __future__ import annotations

import attrs
import pytest
import trio
from redis_helpers import cluster_test_store
from store_helpers import MESH, claim, ready, reserve

from zlink_trio.core.errors import InvalidOperation, StaleFence, Unavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState
from zlink_trio.store import MembersRemain
from zlink_trio.store.redis.codec import raise_status
from zlink_trio.store.redis.resp import encode_command
from zlink_trio.store.redis_cluster.keys import ClusterKeys, hash_slot

TIMEOUT = 30


@pytest.fixture
async def store():
    async with cluster_test_store() as opened:
        yield opened


async def actor(store, owner, actor_id, container):
    fence = await reserve(store, owner, actor_id, kind=SpotKind.ACTOR, stable_type="player",
                          container=container)
    return await store.location.commit_ready(fence, now=0.0)


async def close(store, record):
    return await store.location.begin_close(
        record.spot_id, object_generation=record.object_generation, owner=record.owner,
        now=0.0)


async def marks(store, container):
    """The member marks stored in ``container``'s bucket."""
    key = store.keys.members(container)
    found = await store.location._run.command("marks", ["SMEMBERS", key])
    return sorted(m.decode() for m in found or [])


async def add_mark(store, container, mark):
    """Put ``mark`` back in ``container``'s bucket: the state a lost drop leaves."""
    key = store.keys.members(container)
    await store.router.call(hash_slot(key), encode_command(["SADD", key, mark]), write=True)


async def actor_part(store, owner, actor_id, container, token):
    """Reserve's part in the Actor's bucket alone, with the mark token ``token``."""
    fence = owner.owner()
    reply = await store.location._run.script(
        "reserve", "reserve", [store.keys.spot(actor_id), store.keys.bans(actor_id)],
        [actor_id, "actor", "player", MESH, str(fence.node_rid), fence.lifecycle_generation,
         "0.0", container, token])  # the runner takes the owner's unit first, as for Reserve
    raise_status(reply, f"reserve of {actor_id!r}")


async def token_of(store, actor_id):
    key = store.keys.spot(actor_id)
    return (await store.location._run.command("mt", ["HGET", key, "mt"])).decode()


def test_the_ids_used_here_live_in_buckets_of_their_own():
    layout = ClusterKeys("zl", 1024)  # the default bucket count the fixture opens with
    ids = ["p-1", "p-2", "room-1", "room-a", "room-b"]
    assert len({layout.bucket(i) for i in ids}) == len(ids)


async def test_a_mark_of_an_interrupted_reserve_is_dropped_by_the_next_close(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        room = await ready(store, c, "room-1")
        mark = await store.location.membership.mark("reserve", "room-1", "p-1", c.owner())
        assert await marks(store, "room-1") == [mark.member]  # then the caller crashed
        assert await store.location.members("room-1") == []  # a read drops nothing
        assert await marks(store, "room-1") == [mark.member]
        assert (await close(store, room)).state is AuthorityState.CLOSING
        assert await marks(store, "room-1") == []


async def test_a_join_in_flight_when_the_close_checked_its_mark_never_writes(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        room = await ready(store, c, "room-1")
        mark = await store.location.membership.mark("reserve", "room-1", "p-1", c.owner())
        assert (await close(store, room)).state is AuthorityState.CLOSING
        with pytest.raises(Unavailable, match="raced the join"):  # its token was banned
            await actor_part(store, c, "p-1", "room-1", mark.token)
        assert await store.location.find("p-1") is None
        # The ban named that token only: the Actor joins elsewhere as usual.
        assert (await actor(store, c, "p-1", c.descriptor.entry_spot_id)).container == (
            c.descriptor.entry_spot_id)


async def test_a_close_never_succeeds_while_a_member_joined_during_its_checks(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        room = await ready(store, c, "room-1")
        await store.location.membership.mark("reserve", "room-1", "p-1", c.owner())  # stale
        membership = store.location.membership
        checked = membership.verify

        async def verify_while_p2_joins(what, container, member):
            if member.endswith(":p-1"):
                await actor(store, c, "p-2", "room-1")  # a whole join between the parts
            return await checked(what, container, member)

        membership.verify = verify_while_p2_joins
        with pytest.raises(MembersRemain) as refused:
            await close(store, room)
        assert refused.value.members == 1
        assert [r.spot_id for r in await store.location.members("room-1")] == ["p-2"]
        assert len(await marks(store, "room-1")) == 1  # the stale mark was dropped


async def test_a_move_interrupted_before_the_record_leaves_a_mark_the_close_drops(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        room_a = await ready(store, c, "room-a")
        room_b = await ready(store, c, "room-b")
        await actor(store, c, "p-1", "room-a")
        await store.location.membership.mark("move", "room-b", "p-1", c.owner())  # crash
        assert await store.location.members("room-b") == []
        assert (await close(store, room_b)).state is AuthorityState.CLOSING
        with pytest.raises(MembersRemain):
            await close(store, room_a)


async def test_a_move_whose_old_mark_was_not_dropped_still_closes_the_old_room(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        room_a = await ready(store, c, "room-a")
        room_b = await ready(store, c, "room-b")
        a = await actor(store, c, "p-1", "room-a")
        old = f"{await token_of(store, 'p-1')}:p-1"
        await store.location.move_membership(
            "p-1", object_generation=a.object_generation, owner=c.owner(),
            container="room-b", now=0.0)
        assert await marks(store, "room-a") == []
        await add_mark(store, "room-a", old)  # as if the last part were lost
        assert (await close(store, room_a)).state is AuthorityState.CLOSING
        with pytest.raises(MembersRemain):
            await close(store, room_b)


async def test_a_release_whose_mark_was_not_dropped_still_closes_the_room(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        room = await ready(store, c, "room-1")
        a = await actor(store, c, "p-1", "room-1")
        mark = f"{await token_of(store, 'p-1')}:p-1"
        closing = await close(store, a)
        assert await store.location.release(closing.fence()) is True
        assert await marks(store, "room-1") == []  # dropped after the deletion
        await add_mark(store, "room-1", mark)  # as if that drop were lost
        assert await store.location.members("room-1") == []
        assert (await close(store, room)).state is AuthorityState.CLOSING


async def test_a_refused_join_takes_its_mark_back(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        await ready(store, c, "room-1")
        await ready(store, c, "p-1")  # the ID is taken: the Actor's part refuses
        with pytest.raises(Exception, match="p-1"):
            await actor(store, c, "p-1", "room-1")
        assert await marks(store, "room-1") == []


async def test_concurrent_joins_and_closes_never_leave_a_member_in_a_closed_room(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store, capacity=64)
        for round_ in range(12):
            room = await ready(store, c, f"room-{round_}")
            outcomes = {}

            async def join(actor_id, room_id=room.spot_id, outcomes=outcomes):
                try:
                    await actor(store, c, actor_id, room_id)
                    outcomes[actor_id] = True
                except Unavailable:
                    outcomes[actor_id] = False

            async def shut(room=room, outcomes=outcomes):
                try:
                    outcomes["closed"] = (await close(store, room)).state
                except MembersRemain:
                    outcomes["closed"] = None

            async with trio.open_nursery() as nursery:
                nursery.start_soon(join, f"p-{round_}-a")
                nursery.start_soon(shut)
                nursery.start_soon(join, f"p-{round_}-b")
            named = [r.spot_id for r in await store.location.members(room.spot_id)]
            assert named == sorted(a for a, ok in outcomes.items() if ok is True)
            if outcomes["closed"] is AuthorityState.CLOSING:
                assert named == [], outcomes  # closed: no member joined
            else:
                assert named, outcomes  # refused: a member was there


# -- Actor moves between nodes: the next container's mark first, then the record ----------


async def two_nodes(store):
    """Node a with room-a and Actor p-1 in it; node b with room-b."""
    a_node = await claim(store, "node-a")
    b_node = await claim(store, "node-b")
    room_a = await ready(store, a_node, "room-a")
    room_b = await ready(store, b_node, "room-b")
    p = await actor(store, a_node, "p-1", "room-a")
    return a_node, b_node, room_a, room_b, p


async def begin_move(store, record, target, container="room-b"):
    return await store.location.begin_relocation(record.fence(), target=target, now=0.0,
                                                 container=container)


async def relay_ready(store, record, target, container="room-b"):
    moving = await begin_move(store, record, target, container)
    sealed = await store.location.seal_relocation(moving.fence(), now=0.0)
    return await store.location.accept_relay_ready(sealed.fence(), target=target, now=0.0)


async def move_part(store, record, target, container, token):
    """BeginRelocation's part in the Actor's bucket alone, with the mark token ``token``."""
    spot_id = record.spot_id
    f, t = record.fence(), target
    reply = await store.location._run.script(
        "begin_relocation", "begin_relocation",
        [store.keys.spot(spot_id), store.keys.bans(spot_id), store.keys.members(spot_id)],
        [f.object_generation, f.owner_generation, str(f.owner.node_rid),
         f.owner.lifecycle_generation, str(t.node_rid), t.lifecycle_generation, "0.0",
         container, "", token])  # members_stay: no (an Actor has none)
    return store.location._relocating(reply, "begin_relocation", f)


async def next_token_of(store, actor_id):
    key = store.keys.spot(actor_id)
    return (await store.location._run.command("nmt", ["HGET", key, "nmt"])).decode()


async def test_a_moving_actor_is_marked_in_both_rooms(store):
    with trio.fail_after(TIMEOUT):
        _, b_node, room_a, room_b, p = await two_nodes(store)
        mark_a = f"{await token_of(store, 'p-1')}:p-1"
        moving = await begin_move(store, p, b_node.owner())
        assert (moving.container, moving.next_container) == ("room-a", "room-b")
        assert await marks(store, "room-a") == [mark_a]
        assert await marks(store, "room-b") == [f"{await next_token_of(store, 'p-1')}:p-1"]
        for room in (room_a, room_b):  # the close checks find the record in either field
            with pytest.raises(MembersRemain):
                await close(store, room)
        assert len(await marks(store, "room-b")) == 1


async def test_a_move_interrupted_after_its_mark_leaves_a_mark_the_close_drops(store):
    with trio.fail_after(TIMEOUT):
        _, b_node, room_a, room_b, _ = await two_nodes(store)
        mark = await store.location.membership.mark("begin_relocation", "room-b", "p-1",
                                                    b_node.owner())  # then the caller crashed
        assert mark.token
        assert await store.location.members("room-b") == []
        assert (await close(store, room_b)).state is AuthorityState.CLOSING
        assert await marks(store, "room-b") == []
        with pytest.raises(MembersRemain):  # the Actor is still in its room
            await close(store, room_a)


async def test_a_move_in_flight_when_the_close_checked_its_mark_never_writes(store):
    with trio.fail_after(TIMEOUT):
        _, b_node, _, room_b, p = await two_nodes(store)
        mark = await store.location.membership.mark("begin_relocation", "room-b", "p-1",
                                                    b_node.owner())
        assert (await close(store, room_b)).state is AuthorityState.CLOSING
        with pytest.raises(Unavailable, match="raced the join"):  # its token was banned
            await move_part(store, p, b_node.owner(), "room-b", mark.token)
        assert await store.location.find("p-1") == p
        assert (await store.location.statistics()).relocating == 0


async def test_a_refused_move_leaves_no_mark_in_its_next_room(store):
    with trio.fail_after(TIMEOUT):
        _, b_node, _, _, p = await two_nodes(store)
        with pytest.raises(StaleFence):  # room-a is not the target's: no mark is added
            await begin_move(store, p, b_node.owner(), "room-a")
        assert len(await marks(store, "room-a")) == 1  # its own membership only
        with pytest.raises(StaleFence):  # the record's part refuses after the mark
            await store.location.begin_relocation(
                attrs.evolve(p, owner_generation=p.owner_generation + 1).fence(),
                target=b_node.owner(), now=0.0, container="room-b")
        assert await marks(store, "room-b") == []  # the refused move took its mark back
        assert await store.location.find("p-1") == p


async def test_a_commit_moves_the_mark_token_and_a_lost_drop_still_closes_the_old_room(store):
    with trio.fail_after(TIMEOUT):
        _, b_node, room_a, room_b, p = await two_nodes(store)
        old = f"{await token_of(store, 'p-1')}:p-1"
        relay = await relay_ready(store, p, b_node.owner())
        token = await next_token_of(store, "p-1")
        moved = await store.location.commit_relocation(relay.fence(), now=0.0)
        assert (moved.container, moved.next_container) == ("room-b", None)
        assert await token_of(store, "p-1") == token  # the next mark is its mark now
        assert await marks(store, "room-a") == []
        assert await marks(store, "room-b") == [f"{token}:p-1"]
        await add_mark(store, "room-a", old)  # as if the commit's drop were lost
        assert await store.location.members("room-a") == []
        assert (await close(store, room_a)).state is AuthorityState.CLOSING
        with pytest.raises(MembersRemain):
            await close(store, room_b)


async def test_an_abort_whose_mark_drop_was_lost_still_closes_the_next_room(store):
    with trio.fail_after(TIMEOUT):
        _, b_node, room_a, room_b, p = await two_nodes(store)
        moving = await begin_move(store, p, b_node.owner())
        mark = f"{await next_token_of(store, 'p-1')}:p-1"
        kept = await store.location.abort_relocation(moving.fence())
        assert (kept.container, kept.next_container) == ("room-a", None)
        assert await marks(store, "room-b") == []
        await add_mark(store, "room-b", mark)  # as if the abort's drop were lost
        assert (await close(store, room_b)).state is AuthorityState.CLOSING
        with pytest.raises(MembersRemain):
            await close(store, room_a)
        # The Actor moves again, into a room its new target owns (a fresh token).
        entry = b_node.descriptor.entry_spot_id
        again = await begin_move(store, kept, b_node.owner(), entry)
        assert again.next_container == entry


async def test_a_released_move_whose_drops_were_lost_closes_both_rooms(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b", lease=1.0)
        room_a = await ready(store, a_node, "room-a")
        room_b = await ready(store, b_node, "room-b")
        p = await actor(store, a_node, "p-1", "room-a")
        both = [f"{await token_of(store, 'p-1')}:p-1"]
        relay = await relay_ready(store, p, b_node.owner())
        both.append(f"{await next_token_of(store, 'p-1')}:p-1")
        await store.location.release_relay_ready(relay.fence(), target=b_node.owner(),
                                                 now=2.0)
        assert await marks(store, "room-a") == await marks(store, "room-b") == []
        await add_mark(store, "room-a", both[0])  # as if both drops were lost
        await add_mark(store, "room-b", both[1])
        assert (await close(store, room_a)).state is AuthorityState.CLOSING
        assert await store.location.begin_close(
            "room-b", object_generation=room_b.object_generation, owner=room_b.owner,
            now=0.5) is not None


async def test_a_spot_with_a_stale_mark_still_moves_and_revokes_the_join(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b")
        room = await ready(store, a_node, "room-1")
        mark = await store.location.membership.mark("reserve", "room-1", "p-1",
                                                    a_node.owner())  # then it crashed
        moving = await store.location.begin_relocation(room.fence(), target=b_node.owner(),
                                                       now=0.0)
        assert moving.state is AuthorityState.RELOCATING
        assert await marks(store, "room-1") == []
        with pytest.raises(Unavailable, match="raced the join"):
            await actor_part(store, a_node, "p-1", "room-1", mark.token)
        assert await store.location.find("p-1") is None


async def test_a_spot_never_moves_while_a_member_joined_during_its_checks(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b")
        room = await ready(store, a_node, "room-1")
        await store.location.membership.mark("reserve", "room-1", "p-1",
                                             a_node.owner())  # stale
        membership = store.location.membership
        checked = membership.verify

        async def verify_while_p2_joins(what, container, member):
            if member.endswith(":p-1"):
                await actor(store, a_node, "p-2", "room-1")  # a whole join in between
            return await checked(what, container, member)

        membership.verify = verify_while_p2_joins
        with pytest.raises(InvalidOperation, match="members"):
            await store.location.begin_relocation(room.fence(), target=b_node.owner(),
                                                  now=0.0)
        assert await store.location.find("room-1") == room
        assert [r.spot_id for r in await store.location.members("room-1")] == ["p-2"]
        assert len(await marks(store, "room-1")) == 1  # the stale mark was dropped


async def test_concurrent_moves_and_closes_never_leave_a_member_in_a_closed_room(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a", capacity=64)
        b_node = await claim(store, "node-b", capacity=64)
        entry = a_node.descriptor.entry_spot_id
        for round_ in range(12):
            room = await ready(store, b_node, f"room-{round_}")
            movers = [await actor(store, a_node, f"p-{round_}-{x}", entry) for x in "ab"]
            outcomes = {}

            async def move(p, room_id=room.spot_id, outcomes=outcomes):
                try:
                    await begin_move(store, p, b_node.owner(), room_id)
                    outcomes[p.spot_id] = True
                except Unavailable:
                    outcomes[p.spot_id] = False

            async def shut(room=room, outcomes=outcomes):
                try:
                    outcomes["closed"] = (await close(store, room)).state
                except MembersRemain:
                    outcomes["closed"] = None

            async with trio.open_nursery() as nursery:
                nursery.start_soon(move, movers[0])
                nursery.start_soon(shut)
                nursery.start_soon(move, movers[1])
            named = [r.spot_id for r in await store.location.members(room.spot_id)]
            assert named == sorted(a for a, ok in outcomes.items() if ok is True)
            if outcomes["closed"] is AuthorityState.CLOSING:
                assert named == [], outcomes  # closed: no Actor moves into it
            else:
                assert named, outcomes  # refused: a member was there


# -- PerActor: the Spot moves without its members, each follows it into the same room -----


async def per_actor_room(store):
    """Node a's room-1 with its member p-1 moved to node b without p-1 (members_stay)."""
    a_node = await claim(store, "node-a")
    b_node = await claim(store, "node-b")
    room = await ready(store, a_node, "room-1")
    p = await actor(store, a_node, "p-1", "room-1")
    moving = await store.location.begin_relocation(room.fence(), target=b_node.owner(),
                                                   now=0.0, members_stay=True)
    sealed = await store.location.seal_relocation(moving.fence(), now=0.0)
    relay = await store.location.accept_relay_ready(sealed.fence(), target=b_node.owner(),
                                                    now=0.0)
    room = await store.location.commit_relocation(relay.fence(), now=0.0)
    return b_node, room, p


async def test_a_per_actor_spot_moves_without_checking_its_marks(store):
    with trio.fail_after(TIMEOUT):
        a_node = await claim(store, "node-a")
        b_node = await claim(store, "node-b")
        room = await ready(store, a_node, "room-1")
        await actor(store, a_node, "p-1", "room-1")
        before = await marks(store, "room-1")
        moving = await store.location.begin_relocation(room.fence(), target=b_node.owner(),
                                                       now=0.0, members_stay=True)
        assert moving.state is AuthorityState.RELOCATING
        assert await marks(store, "room-1") == before  # its member's mark, unchecked
        refused = await store.location.membership.mark("reserve", "room-1", "p-x",
                                                       a_node.owner())
        assert refused.token == ""  # no join while it moves (the container check refuses)
        assert await marks(store, "room-1") == before
        assert [r.spot_id for r in await store.location.members("room-1")] == ["p-1"]


async def test_a_follow_into_the_same_room_holds_two_marks_and_ends_with_one(store):
    with trio.fail_after(TIMEOUT):
        b_node, room, p = await per_actor_room(store)
        first = await token_of(store, "p-1")
        moving = await begin_move(store, p, b_node.owner(), "room-1")
        assert (moving.container, moving.next_container) == ("room-1", "room-1")
        second = await next_token_of(store, "p-1")
        assert await marks(store, "room-1") == sorted([f"{first}:p-1", f"{second}:p-1"])
        assert [r.spot_id for r in await store.location.members("room-1")] == ["p-1"]
        with pytest.raises(MembersRemain) as refused:
            await close(store, room)
        assert refused.value.members == 1
        kept = await store.location.abort_relocation(moving.fence())
        assert await token_of(store, "p-1") == first  # the abort hands back the next mark
        assert await marks(store, "room-1") == [f"{first}:p-1"]
        relay = await relay_ready(store, kept, b_node.owner(), "room-1")
        third = await next_token_of(store, "p-1")
        moved = await store.location.commit_relocation(relay.fence(), now=0.0)
        assert (moved.container, moved.next_container) == ("room-1", None)
        assert await token_of(store, "p-1") == third  # the commit hands back the old one
        assert await marks(store, "room-1") == [f"{third}:p-1"]
        with pytest.raises(MembersRemain):
            await close(store, room)


async def test_a_follow_whose_drops_were_lost_closes_the_room_once_the_member_left(store):
    with trio.fail_after(TIMEOUT):
        b_node, room, p = await per_actor_room(store)
        lost = [f"{await token_of(store, 'p-1')}:p-1"]
        # A follow interrupted after its mark (the caller crashed before the record):
        crashed = await store.location.membership.mark("begin_relocation", "room-1", "p-1",
                                                       b_node.owner())
        lost.append(crashed.member)
        moving = await begin_move(store, p, b_node.owner(), "room-1")
        lost.append(f"{await next_token_of(store, 'p-1')}:p-1")
        kept = await store.location.abort_relocation(moving.fence())
        await add_mark(store, "room-1", lost[-1])  # as if the abort's drop were lost
        relay = await relay_ready(store, kept, b_node.owner(), "room-1")
        moved = await store.location.commit_relocation(relay.fence(), now=0.0)
        await add_mark(store, "room-1", lost[0])  # as if the commit's drop were lost
        # Stale marks of a member are kept: its record names the room.
        with pytest.raises(MembersRemain) as refused:
            await close(store, room)
        assert refused.value.members == 1
        assert len(await marks(store, "room-1")) == 4
        assert [r.spot_id for r in await store.location.members("room-1")] == ["p-1"]
        entry = b_node.descriptor.entry_spot_id
        await store.location.move_membership(
            "p-1", object_generation=moved.object_generation, owner=moved.owner,
            container=entry, now=0.0)  # the member leaves: each stale mark is dropped
        assert (await close(store, room)).state is AuthorityState.CLOSING
        assert await marks(store, "room-1") == []

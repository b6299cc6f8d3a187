"""Location Store conformance, relocation steps: begin, seal, accept relay-ready, commit, abort.

A planned move (spec 06 §6.1, §8; ``zlink_trio.store.relocation_steps``) takes a
Ready record through Relocating, Sealed and RelayReady to Ready at the target;
before relay-ready it may abort back to the source, after it never. Runs once per
backend under an absolute ``trio.fail_after``; every refusal is checked to have
written nothing (the record, the statistics and both nodes' capacity units).
"""

from __future__ import annotations

import attrs
import pytest
import trio
from store_helpers import LEASE, MESH, claim, ready, reserve, rid, units

from zlink_trio.core.errors import (
    CapacityExceeded,
    InvalidOperation,
    StaleFence,
    Unavailable,
)
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState, OwnerFence

TIMEOUT = 5
LATE = LEASE + 1.0  # every lease of claims made at 0 has expired


async def _snapshot(store, *nodes):
    """What a refusal must leave unchanged: the record, the counts, every node's units."""
    return (await store.location.find("r-1"), await store.location.statistics(),
            [await units(store, n) for n in nodes])


async def _moving(store, stage, *, capacity=4):
    """Nodes a and b, and r-1 Ready at a, moved toward b up to ``stage``."""
    a = await claim(store, "node-a", capacity=capacity)
    b = await claim(store, "node-b", capacity=capacity)
    r = await ready(store, a)
    loc = store.location
    steps = ("ready", "relocating", "sealed", "relay_ready")
    if steps.index(stage) >= 1:
        await loc.begin_relocation(r.fence(), target=b.owner(), now=0.0)
    if steps.index(stage) >= 2:
        await loc.seal_relocation(r.fence(), now=0.0)
    if steps.index(stage) >= 3:
        await loc.accept_relay_ready(r.fence(), target=b.owner(), now=0.0)
    return a, b, r


# -- the whole move -------------------------------------------------------------------------------


async def test_move_through_relay_ready_to_the_target(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "ready")
        loc = store.location
        assert (await units(store, a), await units(store, b)) == ((0, 1), (0, 0))
        fence = r.fence()
        moving = await loc.begin_relocation(fence, target=b.owner(), now=0.0)
        sealed = await loc.seal_relocation(fence, now=0.0)
        relay = await loc.accept_relay_ready(fence, target=b.owner(), now=0.0)
        for step, (record, state) in enumerate(((moving, AuthorityState.RELOCATING),
                                                (sealed, AuthorityState.SEALED),
                                                (relay, AuthorityState.RELAY_READY)), 1):
            assert record.state is state
            assert (record.owner, record.relocation_target) == (a.owner(), b.owner())
            assert (record.object_generation, record.owner_generation) == (
                r.object_generation, 1)
            assert record.store_version == r.store_version + step
            assert record.fence() == fence  # the record stays the source's until the commit
        # Source active, target pending, the whole way until the commit.
        assert (await units(store, a), await units(store, b)) == ((0, 1), (1, 0))
        assert await loc.find("r-1") == relay
        assert (await loc.query(page_size=10)).records[-1] == relay
        stats = await loc.statistics()
        assert (stats.ready, stats.relocating, stats.sealed, stats.relay_ready) == (2, 0, 0, 1)
        moved = await loc.commit_relocation(fence, now=0.0)
        assert (moved.state, moved.owner, moved.relocation_target) == (
            AuthorityState.READY, b.owner(), None)
        assert (moved.object_generation, moved.owner_generation) == (r.object_generation, 2)
        assert moved.store_version == r.store_version + 4
        assert (await units(store, a), await units(store, b)) == ((0, 0), (0, 1))
        assert await loc.find("r-1") == moved
        assert (await loc.statistics()).relay_ready == 0


async def test_statistics_count_each_moving_state(store):
    with trio.fail_after(TIMEOUT):
        a, b, _ = await _moving(store, "ready")
        loc = store.location
        for spot_id, stop in (("m-1", 1), ("m-2", 2), ("m-3", 3)):
            r = await ready(store, a, spot_id)
            await loc.begin_relocation(r.fence(), target=b.owner(), now=0.0)
            if stop >= 2:
                await loc.seal_relocation(r.fence(), now=0.0)
            if stop >= 3:
                await loc.accept_relay_ready(r.fence(), target=b.owner(), now=0.0)
        stats = await loc.statistics()
        assert (stats.relocating, stats.sealed, stats.relay_ready) == (1, 1, 1)
        assert await units(store, b) == (3, 0)


async def test_commit_moves_owner_and_capacity(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a", capacity=1)
        b = await claim(store, "node-b", capacity=1)
        r = await ready(store, a)
        await store.location.begin_relocation(r.fence(), target=b.owner(), now=0.0)
        with pytest.raises(CapacityExceeded):  # b's unit is pending for the move
            await reserve(store, b, "other")
        await store.location.seal_relocation(r.fence(), now=0.0)
        await store.location.accept_relay_ready(r.fence(), target=b.owner(), now=0.0)
        with pytest.raises(CapacityExceeded):  # still pending past relay-ready
            await reserve(store, b, "other")
        await store.location.commit_relocation(r.fence(), now=0.0)
        await reserve(store, a, "other")  # a's unit was released
        with pytest.raises(StaleFence):  # the old owner's fence is stale now
            await store.location.begin_relocation(r.fence(), target=a.owner(), now=0.0)
        with pytest.raises(StaleFence):  # a retried commit meets owner generation 2
            await store.location.commit_relocation(r.fence(), now=0.0)


# -- begin and seal: the live claims and the target's capacity ---------------------------------


async def test_begin_relocation_needs_both_live_claims(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "ready")
        loc = store.location
        before = await _snapshot(store, a, b)
        # A target lifecycle that has no claim (b's next one, or a node never claimed).
        for target in (OwnerFence(b.descriptor.node_rid, b.lifecycle_generation + 1),
                       OwnerFence(rid(), 1)):
            with pytest.raises(StaleFence):
                await loc.begin_relocation(r.fence(), target=target, now=0.0)
        assert await _snapshot(store, a, b) == before
        # Only the target's lease expired.
        await loc.renew(MESH, a.descriptor.node_rid, a.lifecycle_generation, now=0.0,
                        lease=10 * LATE)
        with pytest.raises(Unavailable) as caught:
            await loc.begin_relocation(r.fence(), target=b.owner(), now=LATE)
        assert not isinstance(caught.value, StaleFence)
        # Only the source's lease expired.
        await loc.renew(MESH, b.descriptor.node_rid, b.lifecycle_generation, now=0.0,
                        lease=100 * LATE)
        with pytest.raises(Unavailable) as caught:
            await loc.begin_relocation(r.fence(), target=b.owner(), now=20 * LATE)
        assert not isinstance(caught.value, StaleFence)
        assert await _snapshot(store, a, b) == before
        # Both live: the same step begins the move.
        moving = await loc.begin_relocation(r.fence(), target=b.owner(), now=LATE)
        assert moving.state is AuthorityState.RELOCATING


async def test_begin_relocation_refuses_a_full_target(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a")
        b = await claim(store, "node-b", capacity=1)
        c = await claim(store, "node-c", capacity=1)
        r = await ready(store, a)
        full = await ready(store, b, "b-1")  # b's one unit is active
        loc = store.location
        before = await _snapshot(store, a, b, c)
        with pytest.raises(CapacityExceeded):
            await loc.begin_relocation(r.fence(), target=b.owner(), now=0.0)
        assert await _snapshot(store, a, b, c) == before
        # A move toward c holds c's one unit pending: a second move does not fit.
        r2 = await ready(store, a, "r-2")
        await loc.begin_relocation(r2.fence(), target=c.owner(), now=0.0)
        before = await _snapshot(store, a, b, c)
        with pytest.raises(CapacityExceeded):
            await loc.begin_relocation(r.fence(), target=c.owner(), now=0.0)
        assert await _snapshot(store, a, b, c) == before
        # b's unit given back, the move fits.
        await loc.release((await loc.begin_close(
            "b-1", object_generation=full.object_generation, owner=b.owner(), now=0.0)).fence())
        moving = await loc.begin_relocation(r.fence(), target=b.owner(), now=0.0)
        assert moving.relocation_target == b.owner()


async def test_seal_needs_the_source_lease(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "relocating")
        await store.location.renew(MESH, b.descriptor.node_rid, b.lifecycle_generation,
                                   now=0.0, lease=10 * LATE)  # only the source expires
        before = await _snapshot(store, a, b)
        with pytest.raises(Unavailable) as caught:
            await store.location.seal_relocation(r.fence(), now=LATE)
        assert not isinstance(caught.value, StaleFence)
        assert await _snapshot(store, a, b) == before
        sealed = await store.location.seal_relocation(r.fence(), now=0.0)
        assert sealed.state is AuthorityState.SEALED


@pytest.mark.parametrize("field", ["object_generation", "owner_generation", "owner"])
async def test_a_retried_step_still_checks_the_fence(store, field):
    # BeginRelocation and AcceptRelayReady answer a retry of a step that happened with
    # the record as it is; a fence that does not match is stale all the same.
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "relocating")
        fence = r.fence()
        wrong = attrs.evolve(fence, **{field: {
            "object_generation": fence.object_generation + 1,
            "owner_generation": fence.owner_generation + 1, "owner": b.owner()}[field]})
        loc = store.location
        before = await _snapshot(store, a, b)
        with pytest.raises(StaleFence):
            await loc.begin_relocation(wrong, target=b.owner(), now=0.0)
        assert await _snapshot(store, a, b) == before
        await loc.seal_relocation(fence, now=0.0)
        await loc.accept_relay_ready(fence, target=b.owner(), now=0.0)
        before = await _snapshot(store, a, b)
        with pytest.raises(StaleFence):
            await loc.accept_relay_ready(wrong, target=b.owner(), now=0.0)
        assert await _snapshot(store, a, b) == before


# -- accept_relay_ready ---------------------------------------------------------------------------


async def test_accept_relay_ready_is_idempotent(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "relay_ready")
        before = await _snapshot(store, a, b)
        again = await store.location.accept_relay_ready(r.fence(), target=b.owner(), now=0.0)
        assert again == before[0]
        # The retry of a lost reply, once the target's lease ran out: still its own result.
        late = await store.location.accept_relay_ready(r.fence(), target=b.owner(), now=LATE)
        assert late == before[0]
        assert await _snapshot(store, a, b) == before


@pytest.mark.parametrize("stage", ["ready", "relocating"])
async def test_accept_relay_ready_needs_a_sealed_record(store, stage):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, stage)
        before = await _snapshot(store, a, b)
        with pytest.raises(StaleFence):
            await store.location.accept_relay_ready(r.fence(), target=b.owner(), now=0.0)
        assert await _snapshot(store, a, b) == before


async def test_accept_relay_ready_of_a_gone_or_moved_record_is_stale(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "relay_ready")
        moved = await store.location.commit_relocation(r.fence(), now=0.0)
        with pytest.raises(StaleFence):  # Ready at the target: the move is over
            await store.location.accept_relay_ready(r.fence(), target=b.owner(), now=0.0)
        with pytest.raises(StaleFence):
            await store.location.accept_relay_ready(moved.fence(), target=a.owner(), now=0.0)
        closing = await store.location.begin_close(
            "r-1", object_generation=r.object_generation, owner=b.owner(), now=0.0)
        await store.location.release(closing.fence())
        with pytest.raises(StaleFence):  # gone
            await store.location.accept_relay_ready(moved.fence(), target=b.owner(), now=0.0)
        assert await store.location.find("r-1") is None


@pytest.mark.parametrize("field", ["object_generation", "owner_generation", "owner"])
async def test_accept_relay_ready_refuses_a_wrong_fence(store, field):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "sealed")
        fence = r.fence()
        wrong = {"object_generation": fence.object_generation + 1,
                 "owner_generation": fence.owner_generation + 1, "owner": b.owner()}[field]
        before = await _snapshot(store, a, b)
        with pytest.raises(StaleFence):
            await store.location.accept_relay_ready(
                attrs.evolve(fence, **{field: wrong}), target=b.owner(), now=0.0)
        assert await _snapshot(store, a, b) == before


async def test_accept_relay_ready_refuses_another_target(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "sealed")
        c = await claim(store, "node-c")
        before = await _snapshot(store, a, b, c)
        for target in (c.owner(), a.owner(),
                       OwnerFence(b.descriptor.node_rid, b.lifecycle_generation + 1)):
            with pytest.raises(StaleFence):
                await store.location.accept_relay_ready(r.fence(), target=target, now=0.0)
        assert await _snapshot(store, a, b, c) == before


async def test_accept_relay_ready_refuses_another_target_lifecycle(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "sealed")
        # The target process ended and its node came back under the same NodeRid.
        assert await store.location.remove(MESH, b.descriptor.node_rid, b.lifecycle_generation)
        b2 = await claim(store, "node-b", node_rid=b.descriptor.node_rid)
        assert b2.lifecycle_generation > b.lifecycle_generation
        before = await _snapshot(store, a, b, b2)
        for target in (b.owner(), b2.owner()):  # the named lifecycle has no claim; b2 is not named
            with pytest.raises(StaleFence):
                await store.location.accept_relay_ready(r.fence(), target=target, now=0.0)
        assert await _snapshot(store, a, b, b2) == before


async def test_accept_relay_ready_refuses_an_expired_target_lease(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "sealed")
        await store.location.renew(MESH, a.descriptor.node_rid, a.lifecycle_generation,
                                   now=0.0, lease=10 * LATE)  # only the target expires
        before = await _snapshot(store, a, b)
        with pytest.raises(Unavailable) as caught:
            await store.location.accept_relay_ready(r.fence(), target=b.owner(), now=LATE)
        assert not isinstance(caught.value, StaleFence)
        assert await _snapshot(store, a, b) == before


async def test_accept_relay_ready_refuses_bad_arguments(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "sealed")
        before = await _snapshot(store, a, b)
        for target, now in ((b.owner(), float("nan")), (b.owner(), float("inf")),
                            (b.descriptor.node_rid, 0.0), (None, 0.0)):
            with pytest.raises(InvalidOperation):
                await store.location.accept_relay_ready(r.fence(), target=target, now=now)
        assert await _snapshot(store, a, b) == before


# -- commit and abort around relay-ready ----------------------------------------------------------


@pytest.mark.parametrize("stage", ["relocating", "sealed"])
async def test_commit_before_relay_ready_is_refused(store, stage):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, stage)
        before = await _snapshot(store, a, b)
        with pytest.raises(StaleFence):
            await store.location.commit_relocation(r.fence(), now=0.0)
        assert await _snapshot(store, a, b) == before


async def test_commit_needs_the_target_lease(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "relay_ready")
        before = await _snapshot(store, a, b)
        with pytest.raises(Unavailable):
            await store.location.commit_relocation(r.fence(), now=LATE)
        assert await _snapshot(store, a, b) == before
        await store.location.renew(MESH, b.descriptor.node_rid, b.lifecycle_generation,
                                   now=0.5, lease=10 * LATE)
        assert (await store.location.commit_relocation(r.fence(), now=LATE)).owner == b.owner()


@pytest.mark.parametrize("stage", ["relocating", "sealed"])
async def test_abort_before_relay_ready_keeps_the_source(store, stage):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, stage)
        kept = await store.location.abort_relocation(r.fence())
        assert (kept.state, kept.owner, kept.relocation_target, kept.owner_generation) == (
            AuthorityState.READY, a.owner(), None, 1)
        assert kept.store_version == r.store_version + {"relocating": 2, "sealed": 3}[stage]
        assert await store.location.find("r-1") == kept
        assert (await units(store, a), await units(store, b)) == ((0, 1), (0, 0))
        with pytest.raises(StaleFence):  # Ready again: nothing to abort
            await store.location.abort_relocation(r.fence())


async def test_abort_after_relay_ready_is_refused(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "relay_ready")
        before = await _snapshot(store, a, b)
        with pytest.raises(InvalidOperation, match="relay-ready") as caught:
            await store.location.abort_relocation(r.fence())
        assert not isinstance(caught.value, Unavailable)
        assert "commit_relocation" in caught.value.message
        with pytest.raises(StaleFence):  # a stale fence is stale first
            await store.location.abort_relocation(
                attrs.evolve(r.fence(), owner_generation=2))
        assert await _snapshot(store, a, b) == before
        moved = await store.location.commit_relocation(r.fence(), now=0.0)  # the way on
        assert moved.owner == b.owner()


# -- other steps on a moving record ---------------------------------------------------------------


async def test_close_and_other_steps_on_a_relay_ready_record(store):
    with trio.fail_after(TIMEOUT):
        a, b, r = await _moving(store, "relay_ready")
        c = await claim(store, "node-c")
        before = await _snapshot(store, a, b, c)
        loc = store.location
        for owner in (a.owner(), b.owner()):
            with pytest.raises(Unavailable):
                await loc.begin_close("r-1", object_generation=r.object_generation,
                                      owner=owner, now=0.0)
        with pytest.raises(StaleFence):  # not Ready: no second move
            await loc.begin_relocation(r.fence(), target=c.owner(), now=0.0)
        with pytest.raises(StaleFence):  # past Sealed
            await loc.seal_relocation(r.fence(), now=0.0)
        assert await _snapshot(store, a, b, c) == before


@pytest.mark.parametrize("stage", ["relocating", "sealed"])
async def test_close_while_moving_is_unavailable(store, stage):
    with trio.fail_after(TIMEOUT):
        a, _, r = await _moving(store, stage)
        with pytest.raises(Unavailable):
            await store.location.begin_close("r-1", object_generation=r.object_generation,
                                             owner=a.owner(), now=0.0)


async def test_relocation_refusals_write_nothing(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a")
        b = await claim(store, "node-b", served={"counter": SpotKind.INSTANCE})
        r = await ready(store, a)
        with pytest.raises(InvalidOperation):  # b does not serve "room"
            await store.location.begin_relocation(r.fence(), target=b.owner(), now=0.0)
        with pytest.raises(InvalidOperation):  # already there
            await store.location.begin_relocation(r.fence(), target=a.owner(), now=0.0)
        with pytest.raises(StaleFence):
            await store.location.seal_relocation(r.fence(), now=0.0)
        with pytest.raises(StaleFence):
            await store.location.commit_relocation(r.fence(), now=0.0)
        entry = await store.location.find(a.descriptor.entry_spot_id)
        with pytest.raises(InvalidOperation):
            await store.location.begin_relocation(entry.fence(), target=b.owner(), now=0.0)
        assert await store.location.find("r-1") == r
        assert r.mesh == MESH

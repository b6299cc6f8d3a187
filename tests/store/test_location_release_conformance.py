"""Location Store conformance, part 3: the operator's ``release_expired``.

Runs once per backend under an absolute ``trio.fail_after``. Leases follow
the ``now`` argument, so a test may call with a later ``now`` (owner expired)
and an earlier one (owner still live) against the same claims. Every refusal
is checked to have written nothing: same record, same statistics, same
capacity.
"""

from __future__ import annotations

import pytest
import trio
from store_helpers import LEASE, MESH, claim, descriptor, issued, ready, reserve

from zlink_trio.core.errors import (
    CapacityExceeded,
    InvalidOperation,
    NotFound,
    StaleFence,
    Unavailable,
)
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState
from zlink_trio.store import OwnerAlive

TIMEOUT = 5
EXPIRED = LEASE  # claims made at 0.0 expire at LEASE: ``lease_expires_at <= now``


async def release(store, record, *, now=EXPIRED, generation=None, owner_generation=None):
    return await store.location.release_expired(
        record.spot_id,
        object_generation=record.object_generation if generation is None else generation,
        owner_generation=record.owner_generation if owner_generation is None
        else owner_generation,
        now=now)


async def snapshot(store, spot_id="r-1"):
    return await store.location.find(spot_id), await store.location.statistics()


async def test_releases_expired_owners_ready_spot_so_it_can_be_created_again(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a", capacity=1)
        r = await ready(store, a)
        before, counters = await store.location.statistics(), await issued(store)
        with pytest.raises(CapacityExceeded):  # r-1 holds a's only unit
            await reserve(store, a, "r-2")
        released = await release(store, r)  # lease_expires_at == now: expired
        assert released == r  # the record as it was before the deletion
        assert await store.location.find("r-1") is None
        after = await store.location.statistics()
        assert (after.ready, after.last_object_generation) == (
            before.ready - 1, before.last_object_generation)
        assert await issued(store) == counters  # neither used nor gave back a generation
        page = await store.location.query(page_size=10)
        assert "r-1" not in [x.spot_id for x in page.records]
        # a's active unit was released: a reserve while a was live now fits.
        await reserve(store, a, "r-2", now=1.0)
        # And the ID can be reserved again, with a larger ObjectGeneration.
        b = await claim(store, "node-b", now=EXPIRED)
        fence = await reserve(store, b, "r-1", now=EXPIRED)
        assert fence.object_generation > r.object_generation
        again = await store.location.commit_ready(fence, now=EXPIRED)
        assert (again.state, again.owner) == (AuthorityState.READY, b.owner())


async def test_refuses_a_live_lease_and_writes_nothing(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a", capacity=1)
        r = await ready(store, a)
        before = await snapshot(store)
        for now in (0.0, LEASE - 0.001):
            with pytest.raises(OwnerAlive) as caught:
                await release(store, r, now=now)
            assert isinstance(caught.value, InvalidOperation)
            assert caught.value.record == r
            assert caught.value.lease_expires_at == a.lease_expires_at
            assert "close the Spot itself" in caught.value.message
        assert await snapshot(store) == before
        with pytest.raises(CapacityExceeded):  # the unit is still active
            await reserve(store, a, "r-2")


async def test_renewed_lease_is_live(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a")
        r = await ready(store, a)
        await store.location.renew(MESH, a.descriptor.node_rid, a.lifecycle_generation,
                                   now=LEASE - 1, lease=LEASE)
        with pytest.raises(OwnerAlive):
            await release(store, r, now=EXPIRED)
        assert await store.location.find("r-1") == r


async def test_removed_or_replaced_owner_counts_as_expired(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a")
        r1 = await ready(store, a, "r-1")
        r2 = await ready(store, a, "r-2")
        # Same NodeRid, next lifecycle: the old lifecycle's lease is over.
        fresh = descriptor("node-a", node_rid=a.descriptor.node_rid)
        new = await store.location.new_claim(fresh, now=EXPIRED, lease=LEASE)
        assert new.lifecycle_generation == a.lifecycle_generation + 1
        assert await release(store, r1, now=EXPIRED) == r1
        # No claim at all (the node left with Remove): also over, at any ``now``.
        assert await store.location.remove(MESH, new.descriptor.node_rid,
                                           new.lifecycle_generation)
        assert await release(store, r2, now=0.0) == r2
        assert (await store.location.statistics()).ready == 0


async def test_refuses_stale_generations_and_writes_nothing(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a")
        r = await ready(store, a)
        before = await snapshot(store)
        with pytest.raises(StaleFence):
            await release(store, r, generation=r.object_generation + 1)
        with pytest.raises(StaleFence):
            await release(store, r, owner_generation=r.owner_generation + 1)
        assert await snapshot(store) == before
        # A later incarnation of the same ID is never released with the old fence.
        await release(store, r)
        b = await claim(store, "node-b", now=EXPIRED)
        new = await store.location.commit_ready(await reserve(store, b, now=EXPIRED),
                                                now=EXPIRED)
        with pytest.raises(StaleFence):
            await release(store, r, now=2 * EXPIRED)
        assert await store.location.find("r-1") == new


async def test_refuses_stale_owner_generation_after_a_move(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a")
        b = await claim(store, "node-b")
        r = await ready(store, a)
        await store.location.begin_relocation(r.fence(), target=b.owner(), now=0.0)
        await store.location.seal_relocation(r.fence(), now=0.0)
        await store.location.accept_relay_ready(r.fence(), target=b.owner(), now=0.0)
        moved = await store.location.commit_relocation(r.fence(), now=0.0)
        with pytest.raises(StaleFence):  # read before the move: owner generation 1
            await release(store, r)
        assert await store.location.find("r-1") == moved
        assert await release(store, moved) == moved


async def test_missing_is_not_found(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a")
        r = await ready(store, a)
        await release(store, r)
        with pytest.raises(NotFound):  # a retry after success: nothing to release
            await release(store, r)
        with pytest.raises(NotFound):
            await store.location.release_expired("never", object_generation=1,
                                                 owner_generation=1, now=EXPIRED)


async def test_refuses_creating_closing_and_entry(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a")
        fence = await reserve(store, a, "creating")
        creating = await store.location.find("creating")
        r = await ready(store, a, "closing")
        closing = await store.location.begin_close(
            "closing", object_generation=r.object_generation, owner=a.owner(), now=0.0)
        entry = await store.location.find(a.descriptor.entry_spot_id)
        before = await store.location.statistics()
        for record, hint in ((creating, "abort_creating"), (closing, "release"),
                             (entry, "Entry")):
            with pytest.raises(InvalidOperation) as caught:
                await release(store, record)  # the owner's lease expired: still refused
            assert not isinstance(caught.value, OwnerAlive)
            assert hint in caught.value.message
            assert await store.location.find(record.spot_id) == record
        assert await store.location.statistics() == before
        # The documented ways out still work.
        assert await store.location.abort_creating(fence) is True
        assert await store.location.release(closing.fence()) is True


async def test_refuses_relocating_and_sealed(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a")
        b = await claim(store, "node-b", capacity=1)
        r = await ready(store, a)
        moving = await store.location.begin_relocation(r.fence(), target=b.owner(), now=0.0)
        with pytest.raises(InvalidOperation, match="abort_relocation"):
            await release(store, moving)
        sealed = await store.location.seal_relocation(r.fence(), now=0.0)
        with pytest.raises(InvalidOperation, match="abort_relocation"):
            await release(store, sealed)
        assert await store.location.find("r-1") == sealed
        with pytest.raises(CapacityExceeded):  # b's pending unit is still reserved
            await reserve(store, b, "other")
        kept = await store.location.abort_relocation(r.fence())
        assert await release(store, kept) == kept


async def test_refuses_relay_ready_naming_only_the_commit(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a")
        b = await claim(store, "node-b")
        r = await ready(store, a)
        await store.location.begin_relocation(r.fence(), target=b.owner(), now=0.0)
        await store.location.seal_relocation(r.fence(), now=0.0)
        relay = await store.location.accept_relay_ready(r.fence(), target=b.owner(), now=0.0)
        with pytest.raises(InvalidOperation) as caught:  # both leases expired: still refused
            await release(store, relay)
        assert not isinstance(caught.value, OwnerAlive)
        message = caught.value.message
        assert "commit_relocation" in message
        assert str(b.owner()) in message
        assert "abort_relocation" not in message  # no abort is possible past relay-ready
        assert await store.location.find("r-1") == relay


async def test_refuses_bad_arguments(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a")
        r = await ready(store, a)
        for kwargs in ({"generation": 0}, {"owner_generation": 0},
                       {"now": float("nan")}, {"generation": True}):
            with pytest.raises(InvalidOperation):
                await release(store, r, **kwargs)
        with pytest.raises(InvalidOperation):
            await store.location.release_expired("", object_generation=1, owner_generation=1,
                                                 now=EXPIRED)
        assert await store.location.find("r-1") == r


async def test_instance_spots_are_released_too(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a")
        r = await ready(store, a, "c-1", stable_type="counter", kind=SpotKind.INSTANCE)
        assert await release(store, r) == r
        assert await store.location.find("c-1") is None


def test_owner_alive_is_not_unavailable():
    # "The owner is alive" is a rule, not a transient fault: callers must not retry it.
    assert issubclass(OwnerAlive, InvalidOperation)
    assert not issubclass(OwnerAlive, Unavailable)

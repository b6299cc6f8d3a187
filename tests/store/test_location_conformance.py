"""Location Store conformance: every backend must pass these (spec 06 §2.1, §3, §4.1, §7).

Each test runs once per backend (``store`` fixture in ``conftest.py``) under an
absolute ``trio.fail_after``. Time is the ``now`` argument, never a real clock.
Whenever a transaction is refused, the test also checks nothing was written.
"""

from __future__ import annotations

import attrs
import pytest
import trio
from store_helpers import LEASE, MESH, claim, descriptor, ready, reserve

from zlink_trio.core.errors import (
    AlreadyExists,
    CapacityExceeded,
    InvalidOperation,
    StaleFence,
    Unavailable,
)
from zlink_trio.core.identity import SpotKind, new_entry_spot_id
from zlink_trio.core.records import (
    ENTRY_STABLE_TYPE,
    AuthorityState,
    CreationIntent,
    OwnerFence,
    RecoveryPointer,
)
from zlink_trio.store import AuthorityExists

TIMEOUT = 5
SHA = "ab" * 32


async def snapshot(store):
    """Everything observable through the protocol, for nothing-written checks."""
    records = []
    cursor = None
    while True:
        page = await store.location.query(page_size=1000, cursor=cursor)
        records.extend(page.records)
        cursor = page.next_cursor
        if cursor is None:
            break
    return records, await store.location.descriptors(now=0.0), await store.location.statistics()


# -- NewClaim / Renew / Remove ---------------------------------------------------------------


async def test_new_claim_publishes_descriptor_and_entry_claim(store):
    with trio.fail_after(TIMEOUT):
        d = descriptor("node-a")
        c = await store.location.new_claim(d, now=100.0, lease=LEASE)
        assert c.descriptor == d
        assert c.lifecycle_generation == 1
        assert c.lease_expires_at == 110.0
        assert await store.location.descriptors(now=100.0) == [c]
        entry = await store.location.find(d.entry_spot_id)
        assert entry is not None
        assert (entry.kind, entry.state, entry.stable_type) == (
            SpotKind.ENTRY, AuthorityState.READY, ENTRY_STABLE_TYPE)
        assert entry.owner == OwnerFence(d.node_rid, 1)
        assert entry.mesh == MESH
        assert entry.object_generation >= 1
        assert entry.store_version == 1


async def test_new_claim_descriptor_conflict_changes_nothing(store):
    with trio.fail_after(TIMEOUT):
        first = await claim(store, "node-a")
        before = await snapshot(store)
        again = descriptor("node-a", node_rid=first.descriptor.node_rid)  # same key, new Entry
        with pytest.raises(AlreadyExists):
            await store.location.new_claim(again, now=1.0, lease=LEASE)
        assert await snapshot(store) == before
        assert await store.location.find(again.entry_spot_id) is None
        # No lifecycle generation was consumed by the refused claim.
        nxt = await claim(store, "node-a", now=LEASE)  # once the first lease is over
        assert nxt.lifecycle_generation == 2


async def test_new_claim_entry_conflict_changes_nothing(store):
    with trio.fail_after(TIMEOUT):
        first = await claim(store, "node-a")
        before = await snapshot(store)
        clash = descriptor("node-b", entry=first.descriptor.entry_spot_id)  # new key, same Entry
        with pytest.raises(AlreadyExists):
            await store.location.new_claim(clash, now=1.0, lease=LEASE)
        assert await snapshot(store) == before
        assert [c.descriptor.node_id for c in await store.location.descriptors(now=1.0)] == [
            "node-a"]


async def test_new_claim_replaces_expired_claim_at_same_key(store):
    with trio.fail_after(TIMEOUT):
        old = await claim(store, "node-a", now=0.0)
        fresh = descriptor("node-a", node_rid=old.descriptor.node_rid)
        new = await store.location.new_claim(fresh, now=LEASE, lease=LEASE)  # old expired
        assert new.lifecycle_generation == 2
        assert await store.location.find(old.descriptor.entry_spot_id) is None
        assert (await store.location.find(fresh.entry_spot_id)).owner == new.owner()


async def test_new_claim_refuses_bad_lease(store):
    with trio.fail_after(TIMEOUT):
        for lease in (0.0, -1.0, float("inf"), float("nan")):
            with pytest.raises(InvalidOperation):
                await store.location.new_claim(descriptor(), now=0.0, lease=lease)
        assert await store.location.descriptors(now=0.0) == []


async def test_lifecycle_generation_increases_per_node_id(store):
    with trio.fail_after(TIMEOUT):
        a1 = await claim(store, "node-a")
        b1 = await claim(store, "node-b")
        assert await store.location.remove(MESH, a1.descriptor.node_rid, 1)
        a2 = await claim(store, "node-a", lease=1.0)
        a3 = await claim(store, "node-a", mesh="other", now=1.0)  # a2's lease is over
        assert (a1.lifecycle_generation, a2.lifecycle_generation, a3.lifecycle_generation) == (
            1, 2, 3)
        assert b1.lifecycle_generation == 1


async def test_renew_extends_lease(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store, now=0.0)
        r = await store.location.renew(MESH, c.descriptor.node_rid, 1, now=5.0, lease=LEASE)
        assert r.lease_expires_at == 15.0
        assert r.store_version == c.store_version + 1
        assert r.descriptor == c.descriptor
        assert await store.location.descriptors(now=12.0) == [r]
        # Renew never shortens a lease.
        r2 = await store.location.renew(MESH, c.descriptor.node_rid, 1, now=6.0, lease=1.0)
        assert r2.lease_expires_at == 15.0


async def test_renew_refuses_stale_lifecycle_and_missing_claim(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        with pytest.raises(StaleFence):
            await store.location.renew(MESH, c.descriptor.node_rid, 2, now=1.0, lease=LEASE)
        with pytest.raises(StaleFence):
            await store.location.renew("other", c.descriptor.node_rid, 1, now=1.0, lease=LEASE)
        assert (await store.location.descriptors(now=0.0))[0] == c


async def test_renew_refuses_expired_lease(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store, now=0.0)
        with pytest.raises(Unavailable) as info:
            await store.location.renew(MESH, c.descriptor.node_rid, 1, now=LEASE, lease=LEASE)
        assert not isinstance(info.value, StaleFence)
        assert await store.location.descriptors(now=LEASE) == []


async def test_remove_deletes_descriptor_and_entry_claim_idempotently(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        assert await store.location.remove(MESH, c.descriptor.node_rid, 1) is True
        assert await store.location.descriptors(now=0.0) == []
        assert await store.location.find(c.descriptor.entry_spot_id) is None
        assert await store.location.remove(MESH, c.descriptor.node_rid, 1) is False


async def test_stale_remove_cannot_delete_replacement(store):
    with trio.fail_after(TIMEOUT):
        old = await claim(store, now=0.0)
        fresh = descriptor("node-a", node_rid=old.descriptor.node_rid)
        new = await store.location.new_claim(fresh, now=LEASE, lease=LEASE)
        before = await snapshot(store)
        assert await store.location.remove(MESH, old.descriptor.node_rid, 1) is False
        assert await snapshot(store) == before
        assert await store.location.descriptors(now=LEASE) == [new]
        assert await store.location.find(fresh.entry_spot_id) is not None


async def test_descriptors_lists_live_claims_of_a_mesh(store):
    with trio.fail_after(TIMEOUT):
        a = await claim(store, "node-a", now=0.0, lease=5.0)
        b = await claim(store, "node-b", now=0.0, lease=20.0)
        c = await claim(store, "node-c", now=0.0, lease=20.0, mesh="other")
        live = await store.location.descriptors(now=10.0)
        assert {x.descriptor.node_id for x in live} == {"node-b", "node-c"}
        assert await store.location.descriptors(MESH, now=10.0) == [b]
        assert await store.location.descriptors("other", now=1.0) == [c]
        assert a in await store.location.descriptors(now=4.9)


# -- Reserve / CommitReady / AbortCreating ----------------------------------------------------


async def test_reserve_creates_creating_record_and_fence(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        intent = CreationIntent(content_ref="sha256:" + SHA, sha256=SHA, size=12)
        fence = await reserve(store, c, creation_intent=intent)
        record = await store.location.find("r-1")
        assert record.state is AuthorityState.CREATING
        assert (record.kind, record.stable_type, record.mesh) == (SpotKind.USER, "room", MESH)
        assert record.creation_intent == intent
        assert (fence.store_version, fence.owner_generation, fence.pending_capacity) == (1, 1, 1)
        assert fence.object_generation == record.object_generation
        assert fence.owner == c.owner() == record.owner
        assert fence.owner_lease_expires_at == c.lease_expires_at


async def test_commit_ready_publishes_ready_and_drops_intent(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        intent = CreationIntent(content_ref="sha256:" + SHA, sha256=SHA, size=12)
        pointer = RecoveryPointer(root_ref="sha256:" + SHA, sha256=SHA, size=40)
        fence = await reserve(store, c, kind=SpotKind.INSTANCE, stable_type="counter",
                              creation_intent=intent, recovery_pointer=pointer)
        record = await store.location.commit_ready(fence, now=1.0)
        assert record.state is AuthorityState.READY
        assert record.creation_intent is None
        assert record.recovery_pointer == pointer
        assert record.store_version == 2
        assert await store.location.find("r-1") == record
        assert record.ref().generation == fence.object_generation
        # A retry of the same commit (lost reply) returns the same record.
        assert await store.location.commit_ready(fence, now=1.0) == record


async def test_commit_ready_refuses_stale_fence_and_writes_nothing(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        other = await claim(store, "node-b")
        fence = await reserve(store, c)
        before = await snapshot(store)
        for bad in (
            attrs.evolve(fence, store_version=2),
            attrs.evolve(fence, object_generation=fence.object_generation + 100),
            attrs.evolve(fence, owner_generation=2),
            attrs.evolve(fence, owner=other.owner()),
            attrs.evolve(fence, spot_id="r-2"),
        ):
            with pytest.raises(StaleFence):
                await store.location.commit_ready(bad, now=1.0)
        assert await snapshot(store) == before


async def test_commit_ready_retry_after_a_later_change_is_stale(store):
    # A retry returns the record only while it is this very commit's result.
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        pointer = RecoveryPointer(root_ref="sha256:" + SHA, sha256=SHA, size=40)
        fence = await reserve(store, c, kind=SpotKind.INSTANCE, stable_type="counter",
                              recovery_pointer=pointer)
        record = await store.location.commit_ready(fence, now=1.0)
        assert await store.location.remove_recovery_pointer(
            "r-1", object_generation=record.object_generation,
            expected_version=record.store_version)
        changed = await store.location.find("r-1")
        with pytest.raises(StaleFence):
            await store.location.commit_ready(fence, now=1.0)
        assert await store.location.find("r-1") == changed


async def test_commit_ready_refuses_expired_or_replaced_owner(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store, now=0.0)
        fence = await reserve(store, c)
        with pytest.raises(Unavailable):
            await store.location.commit_ready(fence, now=LEASE)
        assert (await store.location.find("r-1")).state is AuthorityState.CREATING
        await store.location.remove(MESH, c.descriptor.node_rid, 1)
        with pytest.raises(StaleFence):
            await store.location.commit_ready(fence, now=1.0)


async def test_abort_creating_with_fence(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        fence = await reserve(store, c)
        with pytest.raises(StaleFence):
            await store.location.abort_creating(attrs.evolve(fence, owner_generation=3))
        assert await store.location.abort_creating(fence) is True
        assert await store.location.find("r-1") is None
        assert await store.location.abort_creating(fence) is False
        # After commit, the reservation fence can no longer abort.
        fence2 = await reserve(store, c)
        await store.location.commit_ready(fence2, now=0.0)
        with pytest.raises(StaleFence):
            await store.location.abort_creating(fence2)
        assert (await store.location.find("r-1")).state is AuthorityState.READY
        # An old generation's fence is simply gone.
        assert await store.location.abort_creating(fence) is False


async def test_abort_creating_needs_no_live_lease(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store, now=0.0)
        fence = await reserve(store, c)
        await store.location.remove(MESH, c.descriptor.node_rid, 1)
        assert await store.location.abort_creating(fence) is True


async def test_capacity_counts_pending_and_active(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store, capacity=2)
        a = await reserve(store, c, "a")
        b = await reserve(store, c, "b")
        with pytest.raises(CapacityExceeded) as info:
            await reserve(store, c, "x")
        assert info.value.lane is None
        assert await store.location.find("x") is None
        await store.location.commit_ready(a, now=0.0)  # pending -> active: still full
        with pytest.raises(CapacityExceeded):
            await reserve(store, c, "x")
        await store.location.abort_creating(b)  # pending released
        x = await reserve(store, c, "x")
        with pytest.raises(CapacityExceeded):
            await reserve(store, c, "y")
        await store.location.commit_ready(x, now=0.0)
        record = await store.location.find("a")
        closing = await store.location.begin_close(
            "a", object_generation=record.object_generation, owner=record.owner, now=0.0)
        with pytest.raises(CapacityExceeded):  # Closing still holds its unit
            await reserve(store, c, "y")
        await store.location.release(closing.fence())  # active released
        await reserve(store, c, "y")


async def test_entry_claims_do_not_use_capacity(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store, capacity=1)
        await reserve(store, c, "a")


async def test_reserve_refuses_entry_ids_and_kinds(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        before = await snapshot(store)
        with pytest.raises(InvalidOperation):
            await reserve(store, c, c.descriptor.entry_spot_id)
        with pytest.raises(InvalidOperation):
            await reserve(store, c, new_entry_spot_id("x"))
        with pytest.raises(InvalidOperation):
            await reserve(store, c, "r-1", kind=SpotKind.ENTRY)
        with pytest.raises(InvalidOperation):
            await reserve(store, c, "")
        with pytest.raises(InvalidOperation):
            await reserve(store, c, "r-1", stable_type="not-served")
        with pytest.raises(InvalidOperation):  # served, but as the other kind
            await reserve(store, c, "r-1", stable_type="counter", kind=SpotKind.USER)
        assert await snapshot(store) == before


async def test_reserve_refuses_expired_or_stale_owner(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store, now=0.0)
        before = await snapshot(store)
        with pytest.raises(Unavailable) as info:
            await reserve(store, c, now=LEASE)
        assert not isinstance(info.value, StaleFence)
        with pytest.raises(StaleFence):
            await reserve(store, OwnerFence(c.descriptor.node_rid, 2))
        assert await snapshot(store) == before


async def test_reserve_existing_authority_raises_with_current_record(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        fence = await reserve(store, c)
        with pytest.raises(AuthorityExists) as info:
            await reserve(store, c, kind=SpotKind.INSTANCE, stable_type="counter")
        assert isinstance(info.value, AlreadyExists)
        assert info.value.current.state is AuthorityState.CREATING
        assert not info.value.current.matches(SpotKind.INSTANCE, "counter")
        ready_record = await store.location.commit_ready(fence, now=0.0)
        with pytest.raises(AuthorityExists) as info:
            await reserve(store, c)
        assert info.value.current == ready_record
        assert info.value.current.matches(SpotKind.USER, "room")


async def test_object_generation_strictly_increases_across_recreation(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        seen = []
        for _ in range(3):
            record = await ready(store, c)
            seen.append(record.object_generation)
            closing = await store.location.begin_close(
                "r-1", object_generation=record.object_generation, owner=record.owner, now=0.0)
            await store.location.release(closing.fence())
            fence = await reserve(store, c)
            seen.append(fence.object_generation)
            await store.location.abort_creating(fence)
        assert seen == sorted(set(seen))


async def test_store_version_grows_by_one_per_mutation(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        pointer = RecoveryPointer(root_ref="sha256:" + SHA, sha256=SHA, size=1)
        fence = await reserve(store, c, recovery_pointer=pointer)
        assert (await store.location.find("r-1")).store_version == 1
        r = await store.location.commit_ready(fence, now=0.0)
        assert r.store_version == 2
        assert await store.location.remove_recovery_pointer(
            "r-1", object_generation=r.object_generation, expected_version=2)
        assert (await store.location.find("r-1")).store_version == 3
        closing = await store.location.begin_close(
            "r-1", object_generation=r.object_generation, owner=r.owner, now=0.0)
        assert closing.store_version == 4


async def test_find_missing_is_none(store):
    with trio.fail_after(TIMEOUT):
        assert await store.location.find("nobody") is None

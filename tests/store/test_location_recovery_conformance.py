"""Location Store conformance, startup recovery: ``orphans`` and ``adopt_orphan`` (06 §4.1.1).

Runs once per backend under an absolute ``trio.fail_after``; refused adoptions are
checked to have written nothing. The dead lifecycle claims with a 1 s lease at
``now=0``; the restarted lifecycle of the same NodeId claims at ``now=5``.
"""

from __future__ import annotations

import pytest
import trio
from store_helpers import MESH, claim, reserve

from zlink_trio.core.errors import CapacityExceeded, InvalidOperation, StaleFence, Unavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState, RecoveryPointer, ReservationFence

TIMEOUT = 5
NOW = 5.0


def pointer(n: int = 1) -> RecoveryPointer:
    return RecoveryPointer(root_ref=f"sha256:{n:064x}", sha256=f"{n:064x}", size=10)


async def reserve_instance(store, owner, spot_id, *, with_pointer=True):
    return await reserve(store, owner, spot_id, stable_type="counter", kind=SpotKind.INSTANCE,
                         recovery_pointer=pointer() if with_pointer else None)


async def dead_and_restarted(store, node_id="node-a", **kwargs):
    dead = await claim(store, node_id, now=0.0, lease=1.0, **kwargs)
    return dead, dead.owner()


async def restart(store, node_id="node-a", **kwargs):
    return await claim(store, node_id, now=NOW, lease=10.0, **kwargs)


def fence_of(record) -> ReservationFence:
    return ReservationFence(spot_id=record.spot_id, store_version=record.store_version,
                            object_generation=record.object_generation,
                            owner_generation=record.owner_generation, owner=record.owner,
                            owner_lease_expires_at=0.0)


async def adopt(store, record, new_owner, *, now=NOW, **kwargs):
    args = {"object_generation": record.object_generation,
            "owner_generation": record.owner_generation, "old_owner": record.owner}
    args.update(kwargs)
    return await store.location.adopt_orphan(record.spot_id, new_owner=new_owner, now=now,
                                             **args)


async def test_orphans_lists_incomplete_activations_of_dead_lifecycles(store):
    with trio.fail_after(TIMEOUT):
        _, old = await dead_and_restarted(store)
        creating = await reserve_instance(store, old, "c-1")
        plain = await reserve(store, old, "u-1")  # user create, no pointer
        with_pointer = await store.location.commit_ready(
            await reserve_instance(store, old, "c-2"), now=0.0)
        steady_fence = await reserve_instance(store, old, "c-3")
        steady = await store.location.commit_ready(steady_fence, now=0.0)
        await store.location.remove_recovery_pointer(
            "c-3", object_generation=steady.object_generation,
            expected_version=steady.store_version)
        other = await claim(store, "node-b", now=0.0, lease=1.0)
        await reserve_instance(store, other.owner(), "c-4")
        assert await store.location.orphans("node-a", now=0.5) == []  # still live
        new = await restart(store)
        found = await store.location.orphans("node-a", now=NOW)
        assert [r.spot_id for r in found] == ["c-1", "c-2", "u-1"]
        assert found[1] == with_pointer
        assert found[0].object_generation == creating.object_generation
        assert found[2].object_generation == plain.object_generation
        # The live lifecycle's own records are never orphans.
        await reserve_instance(store, new.owner(), "c-5")
        assert [r.spot_id for r in await store.location.orphans("node-a", now=NOW)] == [
            "c-1", "c-2", "u-1"]
        assert [r.spot_id for r in await store.location.orphans("node-b", now=NOW)] == ["c-4"]
        assert await store.location.orphans("node-c", now=NOW) == []


async def test_orphans_pages_with_after_and_limit(store):
    with trio.fail_after(TIMEOUT):
        _, old = await dead_and_restarted(store, capacity=10)
        for i in range(5):
            await reserve_instance(store, old, f"c-{i}")
        page = await store.location.orphans("node-a", now=NOW, limit=2)
        assert [r.spot_id for r in page] == ["c-0", "c-1"]
        page = await store.location.orphans("node-a", now=NOW, after="c-1", limit=2)
        assert [r.spot_id for r in page] == ["c-2", "c-3"]
        page = await store.location.orphans("node-a", now=NOW, after="c-3")
        assert [r.spot_id for r in page] == ["c-4"]
        for bad in (0, 1001):
            with pytest.raises(InvalidOperation):
                await store.location.orphans("node-a", now=NOW, limit=bad)


async def test_adopt_creating_keeps_reservation_and_generation(store):
    with trio.fail_after(TIMEOUT):
        _, old = await dead_and_restarted(store)
        fence = await reserve_instance(store, old, "c-1")
        new = (await restart(store, capacity=1)).owner()
        (orphan,) = await store.location.orphans("node-a", now=NOW)
        adopted = await adopt(store, orphan, new)
        assert adopted.state is AuthorityState.CREATING
        assert adopted.owner == new
        assert adopted.object_generation == fence.object_generation
        assert adopted.owner_generation == orphan.owner_generation + 1
        assert adopted.store_version == orphan.store_version + 1
        assert adopted.recovery_pointer == orphan.recovery_pointer
        assert await store.location.find("c-1") == adopted
        assert await adopt(store, orphan, new) == adopted  # idempotent retry
        assert await store.location.orphans("node-a", now=NOW) == []
        # The pending unit moved to the new lifecycle (capacity 1 is now full).
        with pytest.raises(CapacityExceeded):
            await reserve_instance(store, new, "c-9")
        ready = await store.location.commit_ready(fence_of(adopted), now=NOW)
        assert ready.state is AuthorityState.READY
        assert ready.owner == new
        assert ready.recovery_pointer == orphan.recovery_pointer


async def test_adopt_creating_then_abort_releases_the_unit(store):
    with trio.fail_after(TIMEOUT):
        _, old = await dead_and_restarted(store)
        await reserve_instance(store, old, "c-1")
        new = (await restart(store, capacity=1)).owner()
        (orphan,) = await store.location.orphans("node-a", now=NOW)
        adopted = await adopt(store, orphan, new)
        assert await store.location.abort_creating(fence_of(adopted)) is True
        await reserve_instance(store, new, "c-9")  # capacity is free again


async def test_user_orphan_aborts_with_the_old_fence(store):
    with trio.fail_after(TIMEOUT):
        _, old = await dead_and_restarted(store)
        await reserve(store, old, "u-1")
        await restart(store)
        (orphan,) = await store.location.orphans("node-a", now=NOW)
        assert await store.location.abort_creating(fence_of(orphan)) is True
        assert await store.location.find("u-1") is None


async def test_adopt_ready_with_pointer_then_remove_pointer(store):
    with trio.fail_after(TIMEOUT):
        _, old = await dead_and_restarted(store)
        await store.location.commit_ready(await reserve_instance(store, old, "c-1"), now=0.0)
        new = (await restart(store, capacity=1)).owner()
        (orphan,) = await store.location.orphans("node-a", now=NOW)
        adopted = await adopt(store, orphan, new)
        assert adopted.state is AuthorityState.READY
        assert adopted.owner == new
        assert adopted.owner_generation == orphan.owner_generation + 1
        with pytest.raises(CapacityExceeded):  # the active unit moved
            await reserve_instance(store, new, "c-9")
        assert await store.location.remove_recovery_pointer(
            "c-1", object_generation=adopted.object_generation,
            expected_version=adopted.store_version) is True
        assert await store.location.orphans("node-a", now=NOW) == []
        # The adopted incarnation closes under its new owner.
        closing = await store.location.begin_close(
            "c-1", object_generation=adopted.object_generation, owner=new, now=NOW)
        assert closing is not None
        assert await store.location.release(closing.fence()) is True


async def test_adopt_refusals_write_nothing(store):
    with trio.fail_after(TIMEOUT):
        _, old = await dead_and_restarted(store)
        await reserve_instance(store, old, "c-1")
        steady = await store.location.commit_ready(
            await reserve_instance(store, old, "c-2", with_pointer=False), now=0.0)
        other = (await claim(store, "node-b", now=NOW, lease=10.0)).owner()
        (orphan,) = await store.location.orphans("node-a", now=0.5 + NOW)
        before = await store.location.find("c-1")
        # The old lease is still live: not an orphan yet.
        with pytest.raises(Unavailable):
            await adopt(store, orphan, other, now=0.5)
        new = (await restart(store)).owner()
        with pytest.raises(Unavailable) as live:
            await adopt(store, orphan, new, now=0.5)
        assert not isinstance(live.value, StaleFence)
        with pytest.raises(StaleFence):  # wrong owner generation
            await adopt(store, orphan, new, owner_generation=orphan.owner_generation + 1)
        with pytest.raises(StaleFence):  # wrong old owner
            await adopt(store, orphan, new, old_owner=other)
        with pytest.raises(StaleFence):  # another incarnation
            await adopt(store, orphan, new, object_generation=orphan.object_generation + 100)
        with pytest.raises(InvalidOperation):  # another NodeId may not take it over
            await adopt(store, orphan, other)
        with pytest.raises(InvalidOperation):  # a steady Ready owner is never adopted
            await adopt(store, steady, new)
        with pytest.raises(Unavailable):  # the new owner's own lease expired
            await adopt(store, orphan, new, now=NOW + 100)
        assert await store.location.find("c-1") == before
        assert await store.location.find("c-2") == steady


async def test_adopt_after_the_record_is_gone_is_stale(store):
    with trio.fail_after(TIMEOUT):
        _, old = await dead_and_restarted(store)
        await reserve_instance(store, old, "c-1")
        new = (await restart(store)).owner()
        (orphan,) = await store.location.orphans("node-a", now=NOW)
        assert await store.location.abort_creating(fence_of(orphan)) is True
        with pytest.raises(StaleFence):
            await adopt(store, orphan, new)
        assert await store.location.find("c-1") is None
        assert orphan.mesh == MESH

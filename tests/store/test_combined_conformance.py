"""Combined cold-activation transactions: same guarantees as the steps they merge.

Every backend offers ``store.combined`` (both stores live in one process, file or
server). Each test runs on every backend under an absolute ``trio.fail_after``.
"""

from __future__ import annotations

import attrs
import pytest
import trio
from store_helpers import MESH, claim

from zlink_trio.core.errors import CapacityExceeded, InvalidOperation, StaleFence, Unavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import MAX_ROOT_BYTES, AuthorityState, RecoveryPointer
from zlink_trio.store import AuthorityExists, InboxRecord, RootIntegrityError
from zlink_trio.store._combined import FirstRecordCleanup, combined_of

TIMEOUT = 5
ENVELOPE = b'{"spotId":"c-1","body":"first"}'


async def _reserve(store, owner, spot_id="c-1", *, root=ENVELOPE, now=0.0):
    return await store.combined.reserve_with_root(
        spot_id, root, kind=SpotKind.INSTANCE, stable_type="counter", mesh=MESH,
        owner=owner, now=now)


async def _nothing_written(store, roots=0, inboxes=0):
    rel = await store.relocation.statistics()
    assert (rel.roots, rel.inboxes) == (roots, inboxes)


async def test_every_backend_offers_the_combined_transactions(store):
    with trio.fail_after(TIMEOUT):
        await trio.lowlevel.checkpoint()
        assert combined_of(store) is store.combined
        assert combined_of(object()) is None


async def test_reserve_with_root_stores_root_and_pointer_together(store):
    with trio.fail_after(TIMEOUT):
        node = await claim(store)
        fence, receipt = await _reserve(store, node.owner())
        assert await store.relocation.get_root(receipt) == ENVELOPE
        record = await store.location.find("c-1")
        assert record.state is AuthorityState.CREATING
        assert record.recovery_pointer == RecoveryPointer.from_receipt(receipt)
        assert fence.object_generation == record.object_generation
        assert fence.store_version == 1
        assert fence.owner_lease_expires_at == node.lease_expires_at


async def test_refused_reserve_with_root_writes_nothing(store):
    with trio.fail_after(TIMEOUT):
        node = await claim(store, capacity=1)
        fence, _ = await _reserve(store, node.owner())
        before = await store.location.statistics()
        # The ID exists: AuthorityExists carries the record; the second root is not stored.
        with pytest.raises(AuthorityExists) as info:
            await _reserve(store, node.owner(), root=b"other envelope")
        assert info.value.current.object_generation == fence.object_generation
        # Capacity, expired lease, unserved type: refused, no root, no generation used.
        with pytest.raises(CapacityExceeded):
            await _reserve(store, node.owner(), "c-2", root=b"second")
        other = await claim(store, "node-b")
        with pytest.raises(Unavailable):
            await _reserve(store, other.owner(), "c-3", root=b"third", now=100.0)
        with pytest.raises(InvalidOperation):
            await store.combined.reserve_with_root(
                "c-4", b"fourth", kind=SpotKind.INSTANCE, stable_type="room", mesh=MESH,
                owner=other.owner(), now=0.0)
        with pytest.raises(CapacityExceeded):
            await _reserve(store, other.owner(), "c-5", root=bytes(MAX_ROOT_BYTES + 1))
        assert (await store.location.statistics()).last_object_generation == \
            before.last_object_generation + 1  # node-b's Entry claim only
        await _nothing_written(store, roots=1)
        for spot_id in ("c-2", "c-3", "c-4", "c-5"):
            assert await store.location.find(spot_id) is None


async def test_commit_ready_with_first_record_appends_and_commits(store):
    with trio.fail_after(TIMEOUT):
        node = await claim(store)
        fence, _ = await _reserve(store, node.owner())
        ready, seq = await store.combined.commit_ready_with_first_record(
            fence, ENVELOPE, now=1.0)
        assert seq == 1
        assert ready.state is AuthorityState.READY
        assert ready.store_version == 2
        assert ready == await store.location.find("c-1")
        assert await store.relocation.inbox_read("c-1", fence.object_generation, limit=5) == [
            InboxRecord(1, ENVELOPE)]
        # Idempotent retry: same record, nothing appended, the inbox's last sequence.
        again, seq2 = await store.combined.commit_ready_with_first_record(
            fence, ENVELOPE, now=1.0)
        assert (again, seq2) == (ready, 1)
        assert len(await store.relocation.inbox_read("c-1", fence.object_generation,
                                                     limit=5)) == 1


async def test_refused_commit_ready_with_first_record_appends_nothing(store):
    with trio.fail_after(TIMEOUT):
        node = await claim(store)
        fence, _ = await _reserve(store, node.owner())
        with pytest.raises(StaleFence):
            await store.combined.commit_ready_with_first_record(
                attrs.evolve(fence, store_version=2), ENVELOPE, now=1.0)
        with pytest.raises(Unavailable):  # the owner's lease expired
            await store.combined.commit_ready_with_first_record(fence, ENVELOPE, now=100.0)
        with pytest.raises(CapacityExceeded):
            await store.combined.commit_ready_with_first_record(
                fence, bytes(MAX_ROOT_BYTES + 1), now=1.0)
        assert (await store.location.find("c-1")).state is AuthorityState.CREATING
        await _nothing_written(store, roots=1, inboxes=0)
        assert await store.location.abort_creating(fence) is True
        with pytest.raises(StaleFence):  # aborted: gone
            await store.combined.commit_ready_with_first_record(fence, ENVELOPE, now=1.0)
        await _nothing_written(store, roots=1, inboxes=0)


async def _ready(store):
    node = await claim(store)
    fence, receipt = await _reserve(store, node.owner())
    ready, seq = await store.combined.commit_ready_with_first_record(fence, ENVELOPE, now=1.0)
    return node, ready, seq, receipt


async def test_finish_first_record_moves_cursor_removes_pointer_deletes_root(store):
    with trio.fail_after(TIMEOUT):
        _, ready, seq, receipt = await _ready(store)
        gen = ready.object_generation
        done = await store.combined.finish_first_record(
            "c-1", gen, seq=seq, expected_version=ready.store_version, root=receipt)
        assert done == FirstRecordCleanup(True, True, True)
        record = await store.location.find("c-1")
        assert record.recovery_pointer is None
        assert record.store_version == ready.store_version + 1
        assert await store.relocation.inbox_cursor("c-1", gen) == 1
        assert await store.relocation.inbox_read("c-1", gen, limit=5) == []
        await _nothing_written(store, roots=0, inboxes=1)
        # Idempotent: everything already done.
        again = await store.combined.finish_first_record(
            "c-1", gen, seq=seq, expected_version=ready.store_version, root=receipt)
        assert again == FirstRecordCleanup(False, False, False)


async def test_refused_finish_first_record_writes_nothing(store):
    with trio.fail_after(TIMEOUT):
        node, ready, seq, receipt = await _ready(store)
        gen = ready.object_generation

        async def finish(**changes):
            args = {"seq": seq, "expected_version": ready.store_version, "root": receipt}
            args.update(changes)
            return await store.combined.finish_first_record("c-1", gen, **args)

        with pytest.raises(StaleFence):  # the record changed since Ready
            await finish(expected_version=ready.store_version + 1)
        with pytest.raises(InvalidOperation):  # past the last sequence
            await finish(seq=2)
        with pytest.raises(RootIntegrityError):
            await finish(root=attrs.evolve(receipt, size=receipt.size + 1))
        with pytest.raises(InvalidOperation):
            await finish(seq=-1)
        assert await store.relocation.inbox_cursor("c-1", gen) == 0
        assert (await store.location.find("c-1")).recovery_pointer is not None
        await _nothing_written(store, roots=1, inboxes=1)
        # A close began: the pointer CAS is stale, the caller re-reads and retries.
        closing = await store.location.begin_close("c-1", object_generation=gen,
                                                   owner=node.owner(), now=1.0)
        with pytest.raises(StaleFence):
            await finish()
        assert await finish(expected_version=closing.store_version) == FirstRecordCleanup(
            True, True, True)
        # Creating: the pointer is still needed.
        fence, second = await _reserve(store, node.owner(), "c-2", root=b"second")
        await store.relocation.inbox_append("c-2", fence.object_generation, b"second")
        with pytest.raises(InvalidOperation):
            await store.combined.finish_first_record(
                "c-2", fence.object_generation, seq=1, expected_version=1, root=second)
        assert await store.relocation.inbox_cursor("c-2", fence.object_generation) == 0
        assert await store.relocation.get_root(second) == b"second"


async def test_finish_first_record_after_release_still_cleans_up(store):
    with trio.fail_after(TIMEOUT):
        node, ready, seq, receipt = await _ready(store)
        gen = ready.object_generation
        closing = await store.location.begin_close("c-1", object_generation=gen,
                                                   owner=node.owner(), now=1.0)
        assert await store.location.release(closing.fence())
        done = await store.combined.finish_first_record(
            "c-1", gen, seq=seq, expected_version=ready.store_version, root=receipt)
        assert done == FirstRecordCleanup(True, False, True)
        await _nothing_written(store, roots=0, inboxes=1)

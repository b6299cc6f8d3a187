"""Combined cold-activation transactions: same guarantees as the steps they merge.

Every backend offers ``store.combined`` (both stores live in one process, file or
server); a store without its own gets ``SeparateSteps`` (``with_combined``). Each
test runs on every backend under an absolute ``trio.fail_after``; the tests that take
the ``combined`` fixture run twice per backend, against the backend's own combined
transactions and against ``SeparateSteps`` over its two halves. Where the separate
calls cannot be atomic (a refusal after an earlier step wrote), a ``*_separate_steps``
test states what they do instead.
"""

from __future__ import annotations

from types import SimpleNamespace

import attrs
import pytest
import trio
from store_helpers import MESH, claim, issued

from zlink_trio.core.errors import CapacityExceeded, InvalidOperation, StaleFence, Unavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import MAX_ROOT_BYTES, AuthorityState, RecoveryPointer
from zlink_trio.store import (
    AuthorityExists,
    FirstRecordCleanup,
    InboxRecord,
    RootIntegrityError,
    SeparateSteps,
    with_combined,
)

TIMEOUT = 5
ENVELOPE = b'{"spotId":"c-1","body":"first"}'


@pytest.fixture(params=["built-in", "separate-steps"])
def combined(request, store):
    """The backend's own combined transactions, or the separate steps over its halves."""
    if request.param == "built-in":
        return store.combined
    return SeparateSteps(store.location, store.relocation)


async def _reserve(combined, owner, spot_id="c-1", *, root=ENVELOPE, now=0.0):
    return await combined.reserve_with_root(
        spot_id, root, kind=SpotKind.INSTANCE, stable_type="counter", mesh=MESH,
        owner=owner, now=now)


async def _nothing_written(store, roots=0, inboxes=0):
    rel = await store.relocation.statistics()
    assert (rel.roots, rel.inboxes) == (roots, inboxes)


async def test_every_backend_offers_the_combined_transactions(store):
    with trio.fail_after(TIMEOUT):
        await trio.lowlevel.checkpoint()
        assert with_combined(store) is store  # its own, kept as is
        bare = SimpleNamespace(location=store.location, relocation=store.relocation)
        completed = with_combined(bare)
        assert isinstance(completed.combined, SeparateSteps)
        assert completed.combined.location is store.location
        assert completed.combined.relocation is store.relocation
        assert (completed.location, completed.relocation) == (store.location, store.relocation)
        assert with_combined(completed) is completed


async def test_reserve_with_root_stores_root_and_pointer_together(store, combined):
    with trio.fail_after(TIMEOUT):
        node = await claim(store)
        fence, receipt = await _reserve(combined, node.owner())
        assert await store.relocation.get_root(receipt) == ENVELOPE
        record = await store.location.find("c-1")
        assert record.state is AuthorityState.CREATING
        assert record.recovery_pointer == RecoveryPointer.from_receipt(receipt)
        assert fence.object_generation == record.object_generation
        assert fence.store_version == 1
        assert fence.owner_lease_expires_at == node.lease_expires_at


async def test_refused_reserve_with_root_writes_nothing(store, combined):
    # The separate steps store the root first and delete it again when Reserve refuses.
    with trio.fail_after(TIMEOUT):
        node = await claim(store, capacity=1)
        fence, _ = await _reserve(combined, node.owner())
        other = await claim(store, "node-b")
        before = await issued(store)
        # The ID exists: AuthorityExists carries the record; the second root is not stored.
        with pytest.raises(AuthorityExists) as info:
            await _reserve(combined, node.owner(), root=b"other envelope")
        assert info.value.current.object_generation == fence.object_generation
        # Capacity, expired lease, unserved type: refused, no root, no generation used.
        with pytest.raises(CapacityExceeded):
            await _reserve(combined, node.owner(), "c-2", root=b"second")
        with pytest.raises(Unavailable):
            await _reserve(combined, other.owner(), "c-3", root=b"third", now=100.0)
        with pytest.raises(InvalidOperation):
            await combined.reserve_with_root(
                "c-4", b"fourth", kind=SpotKind.INSTANCE, stable_type="room", mesh=MESH,
                owner=other.owner(), now=0.0)
        with pytest.raises(CapacityExceeded):
            await _reserve(combined, other.owner(), "c-5", root=bytes(MAX_ROOT_BYTES + 1))
        assert await issued(store) == before  # no refusal used a generation
        await _nothing_written(store, roots=1)
        for spot_id in ("c-2", "c-3", "c-4", "c-5"):
            assert await store.location.find(spot_id) is None


async def test_a_refused_reserve_with_root_keeps_an_identical_root_already_there(
        store, combined):
    # Roots are content addressed: a refusal takes back only a root it stored itself.
    with trio.fail_after(TIMEOUT):
        node = await claim(store, capacity=5)
        _, receipt = await _reserve(combined, node.owner())
        with pytest.raises(AuthorityExists):
            await _reserve(combined, node.owner())
        assert await store.relocation.get_root(receipt) == ENVELOPE
        await _nothing_written(store, roots=1)


async def test_commit_ready_with_first_record_appends_and_commits(store, combined):
    with trio.fail_after(TIMEOUT):
        node = await claim(store)
        fence, _ = await _reserve(combined, node.owner())
        ready, seq = await combined.commit_ready_with_first_record(fence, ENVELOPE, now=1.0)
        assert seq == 1
        assert ready.state is AuthorityState.READY
        assert ready.store_version == 2
        assert ready == await store.location.find("c-1")
        assert await store.relocation.inbox_read("c-1", fence.object_generation, limit=5) == [
            InboxRecord(1, ENVELOPE)]


async def test_commit_ready_with_first_record_retry_appends_nothing(store):
    with trio.fail_after(TIMEOUT):
        node = await claim(store)
        fence, _ = await _reserve(store.combined, node.owner())
        ready, _ = await store.combined.commit_ready_with_first_record(fence, ENVELOPE, now=1.0)
        # Idempotent retry: same record, nothing appended, the inbox's last sequence.
        again, seq2 = await store.combined.commit_ready_with_first_record(
            fence, ENVELOPE, now=1.0)
        assert (again, seq2) == (ready, 1)
        assert len(await store.relocation.inbox_read("c-1", fence.object_generation,
                                                     limit=5)) == 1


async def test_commit_ready_with_first_record_retry_separate_steps(store):
    # The separate steps append before CommitReady, whose retry is idempotent: a retry
    # appends a second record (the runtime never retries; recovery reads the inbox).
    with trio.fail_after(TIMEOUT):
        steps = SeparateSteps(store.location, store.relocation)
        node = await claim(store)
        fence, _ = await _reserve(steps, node.owner())
        ready, _ = await steps.commit_ready_with_first_record(fence, ENVELOPE, now=1.0)
        assert await steps.commit_ready_with_first_record(fence, b"again", now=1.0) == (
            ready, 2)
        assert await store.relocation.inbox_read("c-1", fence.object_generation, limit=5) == [
            InboxRecord(1, ENVELOPE), InboxRecord(2, b"again")]


async def test_refused_commit_ready_with_first_record_appends_nothing(store):
    with trio.fail_after(TIMEOUT):
        node = await claim(store)
        fence, _ = await _reserve(store.combined, node.owner())
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


async def test_refused_commit_ready_with_first_record_separate_steps(store):
    # The record is appended before CommitReady refuses: the authority stays Creating
    # and the caller aborts the creation and drops the inbox (the runtime's _abort).
    with trio.fail_after(TIMEOUT):
        steps = SeparateSteps(store.location, store.relocation)
        node = await claim(store)
        fence, _ = await _reserve(steps, node.owner())
        gen = fence.object_generation
        with pytest.raises(StaleFence):
            await steps.commit_ready_with_first_record(
                attrs.evolve(fence, store_version=2), ENVELOPE, now=1.0)
        with pytest.raises(Unavailable):  # the owner's lease expired
            await steps.commit_ready_with_first_record(fence, b"second", now=100.0)
        with pytest.raises(CapacityExceeded):  # refused by InboxAppend: nothing appended
            await steps.commit_ready_with_first_record(
                fence, bytes(MAX_ROOT_BYTES + 1), now=1.0)
        assert (await store.location.find("c-1")).state is AuthorityState.CREATING
        assert await store.relocation.inbox_read("c-1", gen, limit=5) == [
            InboxRecord(1, ENVELOPE), InboxRecord(2, b"second")]
        assert await store.location.abort_creating(fence) is True
        assert await store.relocation.inbox_drop("c-1", gen) is True
        with pytest.raises(StaleFence):  # aborted: gone
            await steps.commit_ready_with_first_record(fence, ENVELOPE, now=1.0)
        await _nothing_written(store, roots=1, inboxes=1)


async def _ready(store, combined):
    node = await claim(store)
    fence, receipt = await _reserve(combined, node.owner())
    ready, seq = await combined.commit_ready_with_first_record(fence, ENVELOPE, now=1.0)
    return node, ready, seq, receipt


async def test_finish_first_record_moves_cursor_removes_pointer_deletes_root(store, combined):
    with trio.fail_after(TIMEOUT):
        _, ready, seq, receipt = await _ready(store, combined)
        gen = ready.object_generation
        done = await combined.finish_first_record(
            "c-1", gen, seq=seq, expected_version=ready.store_version, root=receipt)
        assert done == FirstRecordCleanup(True, True, True)
        record = await store.location.find("c-1")
        assert record.recovery_pointer is None
        assert record.store_version == ready.store_version + 1
        assert await store.relocation.inbox_cursor("c-1", gen) == 1
        assert await store.relocation.inbox_read("c-1", gen, limit=5) == []
        await _nothing_written(store, roots=0, inboxes=1)
        # Idempotent: everything already done.
        again = await combined.finish_first_record(
            "c-1", gen, seq=seq, expected_version=ready.store_version, root=receipt)
        assert again == FirstRecordCleanup(False, False, False)


async def test_refused_finish_first_record_writes_nothing(store):
    with trio.fail_after(TIMEOUT):
        node, ready, seq, receipt = await _ready(store, store.combined)
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
        fence, second = await _reserve(store.combined, node.owner(), "c-2", root=b"second")
        await store.relocation.inbox_append("c-2", fence.object_generation, b"second")
        with pytest.raises(InvalidOperation):
            await store.combined.finish_first_record(
                "c-2", fence.object_generation, seq=1, expected_version=1, root=second)
        assert await store.relocation.inbox_cursor("c-2", fence.object_generation) == 0
        assert await store.relocation.get_root(second) == b"second"


async def test_finish_first_record_checks_the_root_before_the_record(store):
    # The oracle's order: a receipt that does not name the root's bytes is refused
    # before the record is looked at -- also where the backend remembers the root it
    # wrote in reserve_with_root (a forged size or hash is not the receipt it wrote).
    with trio.fail_after(TIMEOUT):
        node = await claim(store)
        fence, receipt = await _reserve(store.combined, node.owner())  # still Creating
        for forged in (attrs.evolve(receipt, size=receipt.size + 1),
                       attrs.evolve(receipt, sha256="00" * 32)):
            with pytest.raises(RootIntegrityError):
                await store.combined.finish_first_record(
                    "c-1", fence.object_generation, seq=0, expected_version=1, root=forged)
        await _nothing_written(store, roots=1)
        assert (await store.location.find("c-1")).recovery_pointer is not None


async def test_refused_finish_first_record_separate_steps(store):
    # One step after the other: a refusal stops there and the steps before it stay done;
    # a stale pointer CAS is re-read once and retried with the current StoreVersion.
    with trio.fail_after(TIMEOUT):
        steps = SeparateSteps(store.location, store.relocation)
        node, ready, seq, receipt = await _ready(store, steps)
        gen = ready.object_generation

        async def finish(**changes):
            args = {"seq": seq, "expected_version": ready.store_version, "root": receipt}
            args.update(changes)
            return await steps.finish_first_record("c-1", gen, **args)

        with pytest.raises(InvalidOperation):  # past the last sequence: the first step
            await finish(seq=2)
        with pytest.raises(InvalidOperation):
            await finish(seq=-1)
        assert await store.relocation.inbox_cursor("c-1", gen) == 0
        await _nothing_written(store, roots=1, inboxes=1)
        # A close began: the CAS is stale, so the pointer is re-read and removed anyway.
        closing = await store.location.begin_close("c-1", object_generation=gen,
                                                   owner=node.owner(), now=1.0)
        with pytest.raises(RootIntegrityError):  # the last step: cursor and pointer done
            await finish(root=attrs.evolve(receipt, size=receipt.size + 1))
        assert await store.relocation.inbox_cursor("c-1", gen) == 1
        record = await store.location.find("c-1")
        assert record.recovery_pointer is None
        assert record.store_version == closing.store_version + 1
        assert await finish() == FirstRecordCleanup(False, False, True)
        await _nothing_written(store, roots=0, inboxes=1)
        # Creating: the cursor moves, then the pointer is refused (still needed).
        fence, second = await _reserve(steps, node.owner(), "c-2", root=b"second")
        await store.relocation.inbox_append("c-2", fence.object_generation, b"second")
        with pytest.raises(InvalidOperation):
            await steps.finish_first_record(
                "c-2", fence.object_generation, seq=1, expected_version=1, root=second)
        assert await store.relocation.inbox_cursor("c-2", fence.object_generation) == 1
        assert (await store.location.find("c-2")).recovery_pointer is not None
        assert await store.relocation.get_root(second) == b"second"


async def test_finish_first_record_after_release_still_cleans_up(store, combined):
    with trio.fail_after(TIMEOUT):
        node, ready, seq, receipt = await _ready(store, combined)
        gen = ready.object_generation
        closing = await store.location.begin_close("c-1", object_generation=gen,
                                                   owner=node.owner(), now=1.0)
        assert await store.location.release(closing.fence())
        done = await combined.finish_first_record(
            "c-1", gen, seq=seq, expected_version=ready.store_version, root=receipt)
        assert done == FirstRecordCleanup(True, False, True)
        await _nothing_written(store, roots=0, inboxes=1)

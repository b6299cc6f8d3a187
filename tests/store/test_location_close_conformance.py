"""Location Store conformance, part 2: close, release, recovery pointer, query.

The relocation steps have their own part (``test_relocation_steps_conformance``).

Runs once per backend under an absolute ``trio.fail_after``; refused
transactions are checked to have written nothing.
"""

from __future__ import annotations

import json

import attrs
import pytest
import trio
from store_helpers import LEASE, claim, ready, reserve

from zlink_trio.core.errors import InvalidOperation, StaleFence, Unavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState, RecoveryPointer
from zlink_trio.store import MAX_PAGE_BYTES

TIMEOUT = 5
SHA = "cd" * 32


async def close(store, record, **kwargs):
    return await store.location.begin_close(
        record.spot_id, object_generation=record.object_generation, owner=record.owner,
        now=kwargs.pop("now", 0.0), **kwargs)


# -- BeginClose / Release -----------------------------------------------------------------------


async def test_begin_close_then_release(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        r = await ready(store, c)
        closing = await close(store, r, expected_owner_generation=1,
                              expected_store_version=r.store_version)
        assert closing.state is AuthorityState.CLOSING
        assert closing.store_version == r.store_version + 1
        assert await close(store, r) == closing  # idempotent retry
        assert await store.location.release(closing.fence()) is True
        assert await store.location.find("r-1") is None
        assert await store.location.release(closing.fence()) is False  # idempotent


async def test_begin_close_gone_is_none(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        r = await ready(store, c)
        await store.location.release((await close(store, r)).fence())
        assert await close(store, r) is None


async def test_begin_close_other_generation_is_invalid_operation(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        old = await ready(store, c)
        await store.location.release((await close(store, old)).fence())
        new = await ready(store, c)
        with pytest.raises(InvalidOperation):
            await close(store, old)
        assert await store.location.find("r-1") == new
        # Release with the old generation's fence does not touch the new one.
        assert await store.location.release(old.fence()) is False
        assert await store.location.find("r-1") == new


async def test_begin_close_refuses_stale_fences(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        b = await claim(store, "node-b")
        r = await ready(store, c)
        with pytest.raises(StaleFence):
            await store.location.begin_close("r-1", object_generation=r.object_generation,
                                             owner=b.owner(), now=0.0)
        with pytest.raises(StaleFence):
            await close(store, r, expected_owner_generation=2)
        with pytest.raises(StaleFence):
            await close(store, r, expected_store_version=r.store_version + 1)
        with pytest.raises(Unavailable):  # the owner's lease expired
            await close(store, r, now=LEASE)
        assert await store.location.find("r-1") == r


async def test_begin_close_refuses_creating_and_entry(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        fence = await reserve(store, c)
        with pytest.raises(InvalidOperation):
            await store.location.begin_close("r-1", object_generation=fence.object_generation,
                                             owner=c.owner(), now=0.0)
        entry = await store.location.find(c.descriptor.entry_spot_id)
        with pytest.raises(InvalidOperation):
            await close(store, entry)


async def test_release_refuses_a_fence_that_does_not_hold_closing(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        b = await claim(store, "node-b")
        r = await ready(store, c)
        with pytest.raises(StaleFence):  # Ready, not Closing
            await store.location.release(r.fence())
        closing = await close(store, r)
        with pytest.raises(StaleFence):
            await store.location.release(attrs.evolve(closing.fence(), owner=b.owner()))
        with pytest.raises(StaleFence):
            await store.location.release(attrs.evolve(closing.fence(), owner_generation=2))
        assert await store.location.find("r-1") == closing


# -- RemoveRecoveryPointer -----------------------------------------------------------------------


async def test_remove_recovery_pointer_is_an_expected_version_cas(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        pointer = RecoveryPointer(root_ref="sha256:" + SHA, sha256=SHA, size=3)
        fence = await reserve(store, c, kind=SpotKind.INSTANCE, stable_type="counter",
                              recovery_pointer=pointer)
        with pytest.raises(InvalidOperation):  # still Creating
            await store.location.remove_recovery_pointer(
                "r-1", object_generation=fence.object_generation, expected_version=1)
        r = await store.location.commit_ready(fence, now=0.0)
        with pytest.raises(StaleFence):
            await store.location.remove_recovery_pointer(
                "r-1", object_generation=r.object_generation, expected_version=1)
        assert await store.location.find("r-1") == r
        assert await store.location.remove_recovery_pointer(
            "r-1", object_generation=r.object_generation, expected_version=2) is True
        after = await store.location.find("r-1")
        assert after.recovery_pointer is None
        assert after.store_version == 3
        # Idempotent: already removed, gone, or another generation.
        assert await store.location.remove_recovery_pointer(
            "r-1", object_generation=r.object_generation, expected_version=2) is False
        assert await store.location.remove_recovery_pointer(
            "r-1", object_generation=r.object_generation + 1, expected_version=3) is False
        assert await store.location.remove_recovery_pointer(
            "gone", object_generation=1, expected_version=1) is False
        assert await store.location.find("r-1") == after


async def test_remove_recovery_pointer_of_another_generation_removes_nothing(store):
    with trio.fail_after(TIMEOUT):
        c = await claim(store)
        pointer = RecoveryPointer(root_ref="sha256:" + SHA, sha256=SHA, size=3)
        fence = await reserve(store, c, kind=SpotKind.INSTANCE, stable_type="counter",
                              recovery_pointer=pointer)
        r = await store.location.commit_ready(fence, now=0.0)
        # The StoreVersion matches, the ObjectGeneration does not: another incarnation's.
        assert await store.location.remove_recovery_pointer(
            "r-1", object_generation=r.object_generation + 1,
            expected_version=r.store_version) is False
        assert await store.location.find("r-1") == r
        assert r.recovery_pointer == pointer


# -- Query ---------------------------------------------------------------------------------------


async def test_query_refuses_page_size_out_of_bounds(store):
    with trio.fail_after(TIMEOUT):
        for size in (0, -1, 1001, True, 1.5):
            with pytest.raises(InvalidOperation):
                await store.location.query(page_size=size)
        for cursor in ("", "nonsense", 7):
            with pytest.raises(InvalidOperation):
                await store.location.query(page_size=10, cursor=cursor)
        assert (await store.location.query(page_size=1)).records == ()
        assert (await store.location.query(page_size=1000)).next_cursor is None


@pytest.mark.parametrize("page_size", [1, 7, 1000])
async def test_query_cursor_walks_every_record_once(store, page_size):
    with trio.fail_after(TIMEOUT):
        c = await claim(store, capacity=100)
        ids = {f"spot-{i:03}" for i in range(30)} | {"é", "\U0001f600", "Z"}
        for spot_id in ids:
            await reserve(store, c, spot_id)
        expected = ids | {c.descriptor.entry_spot_id}
        seen: list[str] = []
        cursor = None
        while True:
            page = await store.location.query(page_size=page_size, cursor=cursor)
            assert 1 <= len(page.records) <= page_size
            encoded = json.dumps([r.to_json() for r in page.records], ensure_ascii=False,
                                 separators=(",", ":")).encode()
            assert len(encoded) <= MAX_PAGE_BYTES
            seen.extend(r.spot_id for r in page.records)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert sorted(seen) == sorted(expected)
        assert len(seen) == len(expected)
        assert seen == sorted(seen, key=lambda s: s.encode())

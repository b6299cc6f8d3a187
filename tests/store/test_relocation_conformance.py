"""Relocation Store conformance: immutable roots and the durable activation inbox.

Runs once per backend under an absolute ``trio.fail_after``.
"""

from __future__ import annotations

import hashlib

import attrs
import pytest
import trio

from zlink_trio.core.errors import CapacityExceeded, InvalidOperation, NotFound
from zlink_trio.core.records import MAX_ROOT_BYTES, RootReceipt
from zlink_trio.store import InboxRecord, RootIntegrityError

TIMEOUT = 5


async def test_root_round_trip_by_ref_sha256_and_size(store):
    with trio.fail_after(TIMEOUT):
        receipt = await store.relocation.put_root(b"envelope-1")
        assert receipt.sha256 == hashlib.sha256(b"envelope-1").hexdigest()
        assert receipt.size == len(b"envelope-1")
        assert await store.relocation.get_root(receipt) == b"envelope-1"
        empty = await store.relocation.put_root(b"")
        assert await store.relocation.get_root(empty) == b""


async def test_put_identical_root_is_idempotent(store):
    with trio.fail_after(TIMEOUT):
        first = await store.relocation.put_root(b"same")
        second = await store.relocation.put_root(b"same")
        assert first == second
        assert (await store.relocation.statistics()).roots == 1


async def test_get_root_verifies_receipt(store):
    with trio.fail_after(TIMEOUT):
        a = await store.relocation.put_root(b"alpha")
        b = await store.relocation.put_root(b"bravo!")
        with pytest.raises(RootIntegrityError):
            await store.relocation.get_root(attrs.evolve(a, size=a.size + 1))
        with pytest.raises(RootIntegrityError):
            await store.relocation.get_root(attrs.evolve(a, sha256=b.sha256))
        with pytest.raises(NotFound):
            await store.relocation.get_root(RootReceipt(ref="nope", sha256=a.sha256, size=5))


async def test_delete_root_is_idempotent_and_verified(store):
    with trio.fail_after(TIMEOUT):
        a = await store.relocation.put_root(b"alpha")
        with pytest.raises(RootIntegrityError):
            await store.relocation.delete_root(attrs.evolve(a, size=99))
        assert await store.relocation.get_root(a) == b"alpha"  # nothing deleted
        assert await store.relocation.delete_root(a) is True
        assert await store.relocation.delete_root(a) is False
        with pytest.raises(NotFound):
            await store.relocation.get_root(a)


async def test_root_size_bound(store):
    with trio.fail_after(TIMEOUT):
        with pytest.raises(CapacityExceeded):
            await store.relocation.put_root(bytes(MAX_ROOT_BYTES + 1))
        assert (await store.relocation.statistics()).roots == 0


async def test_inbox_append_and_read(store):
    with trio.fail_after(TIMEOUT):
        inbox = store.relocation
        assert [await inbox.inbox_append("s", 7, bytes([i])) for i in range(4)] == [1, 2, 3, 4]
        assert await inbox.inbox_read("s", 7, limit=2) == [
            InboxRecord(1, b"\x00"), InboxRecord(2, b"\x01")]
        assert [r.seq for r in await inbox.inbox_read("s", 7, after=2, limit=10)] == [3, 4]
        assert await inbox.inbox_read("s", 8, limit=10) == []  # another incarnation
        assert await inbox.inbox_read("t", 7, limit=10) == []
        for limit in (0, 1001):
            with pytest.raises(InvalidOperation):
                await inbox.inbox_read("s", 7, limit=limit)
        with pytest.raises(InvalidOperation):
            await inbox.inbox_read("s", 7, after=-1, limit=1)


async def test_inbox_cursor_is_monotonic(store):
    with trio.fail_after(TIMEOUT):
        inbox = store.relocation
        assert await inbox.inbox_cursor("s", 1) == 0
        for i in range(3):
            await inbox.inbox_append("s", 1, b"m%d" % i)
        assert await inbox.inbox_set_cursor("s", 1, 2) is True
        assert await inbox.inbox_set_cursor("s", 1, 2) is False  # idempotent
        with pytest.raises(InvalidOperation):
            await inbox.inbox_set_cursor("s", 1, 1)  # backwards
        with pytest.raises(InvalidOperation):
            await inbox.inbox_set_cursor("s", 1, 4)  # past the last record
        assert await inbox.inbox_cursor("s", 1) == 2
        assert [r.seq for r in await inbox.inbox_read("s", 1, limit=10)] == [3]
        assert await inbox.inbox_append("s", 1, b"next") == 4  # sequences never reused


async def test_inbox_drop_is_idempotent(store):
    with trio.fail_after(TIMEOUT):
        inbox = store.relocation
        await inbox.inbox_append("s", 1, b"x")
        assert await inbox.inbox_drop("s", 1) is True
        assert await inbox.inbox_drop("s", 1) is False
        assert await inbox.inbox_read("s", 1, limit=5) == []
        assert await inbox.inbox_cursor("s", 1) == 0


async def test_relocation_store_is_a_separate_key_space(store):
    with trio.fail_after(TIMEOUT):
        await store.relocation.put_root(b"x")
        await store.relocation.inbox_append("r-1", 1, b"x")
        assert await store.location.find("r-1") is None
        assert (await store.location.query(page_size=10)).records == ()

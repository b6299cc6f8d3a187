"""SQLite WAL checkpoints run in a worker thread and keep the WAL bounded.

With ``dispatch=inline`` SQLite's automatic checkpoint would run inside a
``COMMIT`` on the Trio thread and stall the event loop for its copy and fsync;
the store turns it off and checkpoints from a worker thread instead
(``zlink_trio/store/sqlite/checkpoint.py``). What a user can observe: the WAL
file stays bounded under continuous concurrent writes, every write is still
there after reopening, and closing the store while a checkpoint runs waits for it.
"""

from __future__ import annotations

import os

import trio
from test_sqlite_backend import url_of

from zlink_trio.store import open_store
from zlink_trio.store.sqlite.checkpoint import CHECKPOINT_EVERY

TIMEOUT = 60
ROOT_BYTES = 8 * 1024


def _wal_bytes(path: object) -> int:
    return os.path.getsize(f"{path}-wal")


async def _write_roots(store: object, count: int, in_flight: int = 50) -> list[object]:
    receipts: list[object] = []

    async def writer(base: int) -> None:
        for i in range(base, count, in_flight):
            data = i.to_bytes(8, "big") * (ROOT_BYTES // 8)
            receipts.append(await store.relocation.put_root(data))  # type: ignore[attr-defined]

    async with trio.open_nursery() as nursery:
        for w in range(in_flight):
            nursery.start_soon(writer, w)
    return receipts


async def test_inline_sqlite_keeps_the_wal_bounded_under_continuous_writes(tmp_path):
    path = tmp_path / "wal.db"
    count = 3_000  # ~24 MiB of roots: an unbounded WAL would be at least that big
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(path)) as store:
            receipts = await _write_roots(store, count)
            checkpointer = store.location._db.checkpointer
            assert checkpointer is not None
            assert checkpointer.checkpoints >= 1
            wal_bytes = _wal_bytes(path)
            assert wal_bytes < count * ROOT_BYTES / 2, wal_bytes
        # Every write survives the checkpoints and the close.
        async with open_store(url_of(path)) as store:
            for receipt in receipts[:: max(1, count // 50)]:
                assert len(await store.relocation.get_root(receipt)) == ROOT_BYTES


async def test_inline_sqlite_closes_after_a_running_checkpoint(tmp_path):
    path = tmp_path / "close.db"
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(path)) as store:
            # Exactly enough writes to start a checkpoint, then close at once.
            receipts = await _write_roots(store, CHECKPOINT_EVERY, in_flight=1)
        async with open_store(url_of(path)) as store:
            assert len(await store.relocation.get_root(receipts[-1])) == ROOT_BYTES


async def test_thread_dispatch_keeps_sqlites_own_checkpoints(tmp_path):
    path = tmp_path / "thread.db"
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(path, dispatch="thread")) as store:
            assert store.location._db.checkpointer is None
            receipts = await _write_roots(store, 1_500, in_flight=10)
            assert _wal_bytes(path) < 1_500 * ROOT_BYTES / 2
            assert len(await store.relocation.get_root(receipts[0])) == ROOT_BYTES

"""Redis-specific behaviour: key layout, store faults, NOSCRIPT recovery (issue 4 items 2, 6).

The conformance suite already runs on Redis (``conftest.BACKENDS``); these
tests check what only Redis has. Every test uses its own key prefix and
deletes its keys (``redis_helpers``); when Redis is absent they fail under CI
and skip locally. Waits are event-driven: a blocked probe write on a second
connection returns exactly when a ``CLIENT PAUSE`` ends.
"""

from __future__ import annotations

import binascii
import logging
import socket

import pytest
import trio
from redis_helpers import (
    REDIS_URL,
    delete_prefix,
    fresh_prefix,
    own_server,
    raw_client,
    redis_test_store,
)
from store_helpers import MESH, claim, ready, reserve

from zlink_trio.core.errors import DeadlineExceeded, Unavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.store import RootIntegrityError, open_store
from zlink_trio.store.redis.admin import scan_keys

TIMEOUT = 10
PAUSE_MS = 500
OP_TIMEOUT = 0.1


def hash_slot(key: bytes) -> int:
    """Redis Cluster's slot of ``key``: CRC16/XMODEM of the hash tag (or the key), mod 16384."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return binascii.crc_hqx(key, 0) % 16384


async def keys_of(prefix: str) -> list[bytes]:
    async with raw_client() as client:
        return sorted(await scan_keys(client.call, f"{prefix}:*"))


async def test_a_spots_keys_share_its_hash_tag_and_the_stores_do_not_share_a_prefix():
    with trio.fail_after(TIMEOUT):
        async with redis_test_store() as store:
            prefix = store.config.prefix
            c = await claim(store)
            record = await ready(store, c, "odd}:{id")
            await store.relocation.inbox_append("odd}:{id", record.object_generation, b"m1")
            await store.relocation.inbox_append("r-2", 7, b"other")
            await store.relocation.put_root(b"root")
            keys = await keys_of(prefix)
            location = [k for k in keys if k.startswith(f"{prefix}:loc:".encode())]
            relocation = [k for k in keys if k.startswith(f"{prefix}:rel:".encode())]
            assert location
            assert relocation
            assert len(location) + len(relocation) == len(keys)  # two disjoint key spaces
            spot_keys = [k for k in keys if b"odd}:{id" in k or b"{odd}" in k]
            assert {k.split(b":")[2] for k in spot_keys} == {b"spot", b"inbox"}
            assert len({hash_slot(k) for k in spot_keys}) == 1  # one slot for the Spot
            assert store.keys.spot("r-1").endswith("spot:{r-1}")
            node_keys = [k for k in location if b":node:{" in k]
            assert node_keys
            assert all(f"{{{c.descriptor.node_rid}}}".encode() in k for k in node_keys)
            assert not any(b"{" + c.descriptor.node_rid.value.hex().encode() + b"}" in k
                           for k in spot_keys)


async def test_paused_redis_write_is_unavailable_within_its_timeout_and_writes_nothing():
    with trio.fail_after(TIMEOUT):
        async with (own_server() as server, redis_test_store(server, timeout=OP_TIMEOUT) as store,
                    raw_client(server) as admin):
            c = await claim(store)
            before = await store.location.statistics()
            await admin.command(["CLIENT", "PAUSE", PAUSE_MS, "WRITE"])
            started = trio.current_time()
            with pytest.raises(Unavailable, match="did not answer within"):
                await reserve(store, c, "r-1")
            assert trio.current_time() - started < PAUSE_MS / 1000 * 0.8
            # Reads still run during a write pause, and see nothing half-written.
            assert await store.location.find("r-1") is None
            # A write on another connection returns exactly when the pause ends.
            await admin.command(["SET", f"{store.config.prefix}:rel:probe", "after-pause"])
            assert await store.location.find("r-1") is None  # the abandoned write never ran
            assert await store.location.statistics() == before
            fence = await reserve(store, c, "r-1")
            assert (await store.location.find("r-1")).object_generation == fence.object_generation


async def test_callers_deadline_during_a_pause_is_deadline_exceeded():
    with trio.fail_after(TIMEOUT):
        async with (own_server() as server, redis_test_store(server) as store,
                    raw_client(server) as admin):  # store timeout 5 s
            c = await claim(store)
            await admin.command(["CLIENT", "PAUSE", PAUSE_MS, "WRITE"])
            with (trio.CancelScope(deadline=trio.current_time() + OP_TIMEOUT),
                  pytest.raises(DeadlineExceeded)):
                await reserve(store, c, "r-1")
            await admin.command(["SET", f"{store.config.prefix}:rel:probe", "after-pause"])
            assert await store.location.find("r-1") is None
            await reserve(store, c, "r-1")


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_connection_refused_is_unavailable_quickly():
    with trio.fail_after(TIMEOUT):
        started = trio.current_time()
        with pytest.raises(Unavailable, match="failed"):
            async with open_store(f"redis://127.0.0.1:{unused_port()}/0?prefix=nobody"):
                pass
        assert trio.current_time() - started < 1.0


async def test_the_blocks_own_error_leaves_the_store_as_raised():
    # The store's connections run in a nursery around the block (redis.pipeline's
    # open_pipelines); the block's error still comes out as itself, not in a group.
    async def fail_inside() -> None:
        async with redis_test_store() as store:
            await store.location.find("e-1")
            raise LookupError("the block's own")

    with trio.fail_after(TIMEOUT), pytest.raises(LookupError, match="the block's own"):
        await fail_inside()


async def test_noscript_after_script_flush_reloads_and_runs_once():
    with trio.fail_after(TIMEOUT):
        async with (own_server() as server, redis_test_store(server) as store,
                    raw_client(server) as admin):
            c = await claim(store)
            await admin.command(["SCRIPT", "FLUSH"])
            fence = await reserve(store, c, "r-1")  # NOSCRIPT -> SCRIPT LOAD -> EVALSHA
            assert (await store.location.statistics()).creating == 1
            await admin.command(["SCRIPT", "FLUSH"])
            assert (await store.location.commit_ready(fence, now=0.0)).store_version == 2
            assert (await store.relocation.statistics()).roots == 0


class Proxy:
    """A TCP relay to Redis that can be stopped (refuse, drop) and started again."""

    def __init__(self, nursery: trio.Nursery, port: int) -> None:
        self.nursery = nursery
        self.port = port
        self.scope: trio.CancelScope | None = None

    async def start(self) -> None:
        self.scope = await self.nursery.start(self._serve)

    def stop(self) -> None:
        assert self.scope is not None
        self.scope.cancel()  # closes the listener and every relayed connection

    async def _serve(self, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            listeners = await trio.open_tcp_listeners(self.port, host="127.0.0.1")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.serve_listeners, self._relay, listeners)
                task_status.started(scope)

    async def _relay(self, client: trio.SocketStream) -> None:
        redis_port = int(REDIS_URL.split("://")[1].split("/")[0].rpartition(":")[2] or 6379)
        async with client, await trio.open_tcp_stream("127.0.0.1", redis_port) as upstream:
            async def pump(a: trio.SocketStream, b: trio.SocketStream) -> None:
                async for chunk in a:
                    await b.send_all(chunk)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(pump, client, upstream)
                nursery.start_soon(pump, upstream, client)


async def test_redis_stopped_is_unavailable_and_the_store_serves_again_when_back():
    with trio.fail_after(TIMEOUT):
        async with redis_test_store():  # fails (CI) or skips here if Redis is absent
            pass
        prefix = fresh_prefix()
        port = unused_port()
        try:
            async with trio.open_nursery() as nursery:
                proxy = Proxy(nursery, port)
                await proxy.start()
                url = f"redis://127.0.0.1:{port}/0?prefix={prefix}&timeout=1"
                async with open_store(url) as store:
                    c = await claim(store)
                    await ready(store, c, "r-1")
                    proxy.stop()
                    with pytest.raises(Unavailable):
                        await store.location.find("r-1")
                    with pytest.raises(Unavailable):
                        await reserve(store, c, "r-2")
                    await proxy.start()
                    assert (await store.location.find("r-1")) is not None
                    assert (await store.location.find("r-2")) is None  # nothing half-written
                    await reserve(store, c, "r-2")
                proxy.stop()
        finally:
            await delete_prefix(prefix)


async def test_a_redis_outage_logs_one_warning_for_all_its_failed_calls_and_one_info_after(
        caplog):
    """Refused connections for 30 calls, reads and writes: one WARNING for them all, one
    INFO once a call is answered again, and nothing more (the store speaks RESP itself:
    no client library logs a traceback)."""
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(TIMEOUT):
        async with redis_test_store():  # fails (CI) or skips here if Redis is absent
            pass
        prefix = fresh_prefix()
        port = unused_port()
        try:
            async with trio.open_nursery() as nursery:
                proxy = Proxy(nursery, port)
                await proxy.start()
                url = f"redis://127.0.0.1:{port}/0"
                where = f"{url} (prefix {prefix!r})"
                async with open_store(f"{url}?prefix={prefix}&timeout=1") as store:
                    c = await claim(store)
                    proxy.stop()
                    caplog.clear()
                    for n in range(15):
                        with pytest.raises(Unavailable):
                            await store.location.find(f"r-{n}")
                        with pytest.raises(Unavailable):
                            await reserve(store, c, f"r-{n}")
                    [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING]
                    assert warning.name == "zlink_trio.store"
                    assert warning.getMessage().startswith(
                        f"the Redis store at {where} is unavailable: ")
                    await proxy.start()
                    caplog.clear()
                    assert (await store.location.find("r-0")) is None
                    await reserve(store, c, "r-0")
                    [back] = [r for r in caplog.records if r.name.startswith("zlink_trio")]
                    assert back.levelno == logging.INFO
                    assert back.getMessage().startswith(
                        f"the Redis store at {where} works again after ")
                    assert back.getMessage().endswith("(30 failed calls in all)")
                proxy.stop()
        finally:
            await delete_prefix(prefix)
    assert "Traceback" not in caplog.text


async def test_finish_first_record_refuses_a_root_overwritten_after_its_reserve():
    """The store remembers the SHA-1 of the root it reserved with, so cleanup skips the
    verified read; a root whose bytes changed meanwhile is still refused, not deleted."""
    with trio.fail_after(TIMEOUT):
        async with redis_test_store() as store:
            c = await claim(store)
            envelope = b'{"spotId":"c-1","body":"first"}'
            fence, receipt = await store.combined.reserve_with_root(
                "c-1", envelope, kind=SpotKind.INSTANCE, stable_type="counter",
                mesh=MESH, owner=c.owner(), now=0.0)
            ready_record, seq = await store.combined.commit_ready_with_first_record(
                fence, envelope, now=0.0)
            async with raw_client() as client:
                await client.command(["SET", store.keys.root(receipt.ref), b"other bytes"])
            with pytest.raises(RootIntegrityError):
                await store.combined.finish_first_record(
                    "c-1", fence.object_generation, seq=seq,
                    expected_version=ready_record.store_version, root=receipt)
            record = await store.location.find("c-1")
            assert record is not None
            assert record.recovery_pointer is not None  # nothing was cleaned up


async def test_a_claim_hash_without_the_closed_field_accepts_placements():
    # A claim hash of the previous layout has no ``closed`` field (NewClaim still writes
    # none); ClosePlacement adds it, Renew keeps it, Remove deletes the whole hash.
    with trio.fail_after(TIMEOUT):
        async with redis_test_store() as store, raw_client() as client:
            c = await claim(store, lease=100.0)
            rid = c.descriptor.node_rid
            key = store.keys.claim(MESH, rid)
            assert b"closed" not in await client.command(["HKEYS", key])
            assert (await store.location.descriptors(now=0.0))[0].accepts_placements is True
            assert await store.location.close_placement(MESH, rid, 1) is True
            assert await client.command(["HGET", key, "closed"]) == b"1"
            renewed = await store.location.renew(MESH, rid, 1, now=1.0, lease=100.0)
            assert renewed.accepts_placements is False
            assert await client.command(["HGET", key, "closed"]) == b"1"
            assert await store.location.remove(MESH, rid, 1) is True
            assert await client.command(["EXISTS", key]) == 0

"""What the PostgreSQL backend adds to the conformance suite (``zlink_trio/store/postgres/``):
the schema it creates and refuses, the prefixes that keep stores apart, what it does when
the server is gone or a lock is held, and the group commit of concurrent writes.

On the test server (``ZLINK_TEST_POSTGRES``, ``postgres_helpers``): fails under ``CI``
when it cannot be reached, skips locally. Every test under ``trio.fail_after``.
"""

from __future__ import annotations

import psycopg
import pytest
import trio
from postgres_helpers import POSTGRES_URL, drop_prefix, fresh_prefix, fresh_url, url_with
from store_helpers import MESH, descriptor

from zlink_trio.core.errors import InvalidConfiguration, StoreUnavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.store import AuthorityExists, open_store
from zlink_trio.store.postgres import PostgresStore
from zlink_trio.store.postgres.schema import SCHEMA_VERSION, parse_url

LIMIT = 30


def _sql(statement: str) -> None:
    with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(statement)  # type: ignore[arg-type]


async def test_the_schema_is_created_once_and_versioned():
    with trio.fail_after(LIMIT):
        async with fresh_url() as url:
            prefix = parse_url(url).prefix
            async with open_store(url), open_store(url) as second:  # the second finds it
                assert isinstance(second, PostgresStore)
            with psycopg.connect(POSTGRES_URL) as conn:
                (version,) = conn.execute(
                    f'SELECT value FROM "{prefix}".zlink_meta '
                    "WHERE key = 'schema_version'").fetchone() or (None,)
            assert version == SCHEMA_VERSION


async def test_a_newer_schema_is_refused_with_what_to_do():
    with trio.fail_after(LIMIT):
        async with fresh_url() as url:
            prefix = parse_url(url).prefix
            async with open_store(url):
                pass
            _sql(f'UPDATE "{prefix}".zlink_meta SET value = {SCHEMA_VERSION + 1}')
            with pytest.raises(InvalidConfiguration, match="newer than this zlink_trio"):
                async with open_store(url):
                    pass


async def test_a_schema_of_another_application_is_refused():
    prefix = fresh_prefix()
    try:
        with trio.fail_after(LIMIT):
            _sql(f'CREATE SCHEMA "{prefix}"')
            _sql(f'CREATE TABLE "{prefix}".orders (id INT)')
            with pytest.raises(InvalidConfiguration, match="another application"):
                async with open_store(url_with(prefix)):
                    pass
    finally:
        await drop_prefix(prefix)


async def test_two_prefixes_never_see_each_others_rows():
    with trio.fail_after(LIMIT):
        async with fresh_url() as first_url, fresh_url() as second_url, \
                open_store(first_url) as first, open_store(second_url) as second:
            await first.location.new_claim(descriptor("n1"), now=0.0, lease=60.0)
            assert await first.location.descriptors(MESH, now=1.0)
            assert await second.location.descriptors(MESH, now=1.0) == []


async def test_a_server_that_does_not_answer_is_store_unavailable():
    with trio.fail_after(LIMIT), pytest.raises(StoreUnavailable, match="PostgreSQL store"):
        async with open_store("postgresql://postgres@127.0.0.1:1/test?timeout=2"):
            pass


async def test_a_lock_held_past_the_timeout_fails_the_write_and_writes_nothing():
    with trio.fail_after(LIMIT):
        async with fresh_url(timeout=1) as url:
            options = parse_url(url)
            async with open_store(url) as store:
                claim = await store.location.new_claim(descriptor("n1"), now=0.0, lease=60.0)
                holder = psycopg.connect(POSTGRES_URL, autocommit=True)
                try:
                    holder.execute("BEGIN")
                    holder.execute("SELECT pg_advisory_xact_lock(%s)", (options.lock_key,))
                    with pytest.raises(StoreUnavailable, match="held the store's write lock"):
                        await store.location.reserve(
                            "held-1", kind=SpotKind.INSTANCE, stable_type="counter",
                            mesh=MESH, owner=claim.owner(), now=1.0)
                finally:
                    holder.close()  # the lock goes with its transaction
                assert await store.location.find("held-1") is None
                # The store works again once the lock is gone.
                await store.location.reserve("held-2", kind=SpotKind.INSTANCE,
                                             stable_type="counter", mesh=MESH,
                                             owner=claim.owner(), now=1.0)


async def test_a_terminated_connection_is_replaced_and_the_store_goes_on():
    with trio.fail_after(LIMIT):
        async with fresh_url() as url:
            prefix = parse_url(url).prefix
            async with open_store(url) as store:
                await store.location.new_claim(descriptor("n1"), now=0.0, lease=60.0)
                # Kill every connection of this store (its application_name names it).
                _sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                     f"application_name = 'zlink_trio:{prefix}'")
                outcomes = []
                for i in range(2):  # the first use may meet the dead socket
                    try:
                        outcomes.append(await store.location.new_claim(
                            descriptor(f"n{2 + i}"), now=1.0, lease=60.0))
                    except StoreUnavailable:
                        outcomes.append(None)
                assert outcomes[-1] is not None
                claims = await store.location.descriptors(MESH, now=2.0)
                assert len(claims) == 1 + sum(o is not None for o in outcomes)


async def test_concurrent_writes_share_group_transactions():
    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as store:
            assert isinstance(store, PostgresStore)
            claim = await store.location.new_claim(descriptor("n1", capacity=500), now=0.0,
                                                   lease=60.0)
            groups_before = store.connection.groups

            async def reserve(i: int) -> None:
                await store.location.reserve(f"g-{i}", kind=SpotKind.INSTANCE,
                                             stable_type="counter", mesh=MESH,
                                             owner=claim.owner(), now=1.0)

            async with trio.open_nursery() as nursery:
                for i in range(100):
                    nursery.start_soon(reserve, i)
            groups = store.connection.groups - groups_before
            assert groups < 100  # several writes per transaction
            assert (await store.location.statistics()).creating == 100


async def test_two_processes_reserving_the_same_ids_at_once_never_both_win():
    """Two stores on one prefix stand for two processes (a writer connection each): their
    Reserves of the same IDs, all at once, leave exactly one winner per ID -- the
    prefix's advisory lock serialises their transactions (without it, both would read no
    record and both insert one)."""
    ids = [f"race-{i}" for i in range(60)]
    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as first, open_store(url) as second:
            owners = []
            for store, name in ((first, "n1"), (second, "n2")):
                claim = await store.location.new_claim(descriptor(name, capacity=200),
                                                       now=0.0, lease=60.0)
                owners.append((store, claim.owner()))
            wins: dict[str, list[str]] = {spot_id: [] for spot_id in ids}

            async def reserve(store, owner, spot_id: str) -> None:
                try:
                    await store.location.reserve(spot_id, kind=SpotKind.INSTANCE,
                                                 stable_type="counter", mesh=MESH,
                                                 owner=owner, now=1.0)
                except AuthorityExists:
                    return
                wins[spot_id].append(str(owner.node_rid))

            async with trio.open_nursery() as nursery:
                for spot_id in ids:
                    for store, owner in owners:
                        nursery.start_soon(reserve, store, owner, spot_id)
            assert all(len(winners) == 1 for winners in wins.values()), wins
            for spot_id in ids:
                record = await first.location.find(spot_id)
                assert record is not None
                assert [str(record.owner.node_rid)] == wins[spot_id]

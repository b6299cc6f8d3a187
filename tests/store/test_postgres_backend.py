"""What the PostgreSQL backend adds to the conformance suite (``zlink_trio/store/postgres/``):
the schema it creates, migrates and refuses, the prefixes that keep stores apart, what it
does when the server is gone or a lock is held, the group commit of concurrent writes
(pipelined: a statement the server refuses fails its own body only), and the row cache
(``store/sqlite/rowcache.py``) -- never serving a row another store or a hand edit wrote,
and agreeing with a store whose cache is off.

On the test server (``ZLINK_TEST_POSTGRES``, ``postgres_helpers``): fails under ``CI``
when it cannot be reached, skips locally. Every test under ``trio.fail_after``.
"""

from __future__ import annotations

import threading

import psycopg
import pytest
import trio
import trio.testing
from postgres_helpers import POSTGRES_URL, drop_prefix, fresh_prefix, fresh_url, url_with
from store_helpers import MESH, claim, descriptor, reserve
from test_sqlite_fast_paths import ENTRY, ENTRY_B, ROOM, _mixed, _plain

from zlink_trio.core.errors import (
    InvalidConfiguration,
    InvalidOperation,
    StaleFence,
    StoreUnavailable,
)
from zlink_trio.core.identity import SpotKind
from zlink_trio.store import AuthorityExists, open_store
from zlink_trio.store.postgres import PostgresStore
from zlink_trio.store.postgres.schema import SCHEMA_VERSION, parse_url
from zlink_trio.store.postgres.session import Pipeline, PostgresSession
from zlink_trio.store.sqlite.session import Prefetch, updated_known_row

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


async def test_two_processes_reserving_at_once_never_issue_one_generation_twice():
    """Two stores on one prefix (two processes) reserving different IDs at once: every
    ObjectGeneration issued is distinct. Each group reads the sequence once and writes it
    before its COMMIT, so two groups overlapping would issue the same generations (no
    primary key is there to refuse the second): the advisory lock keeps them apart."""
    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as first, open_store(url) as second:
            generations: list[int] = []

            async def reserve_all(store, name: str) -> None:
                owner = (await store.location.new_claim(descriptor(name, capacity=200),
                                                        now=0.0, lease=60.0)).owner()

                async def one(i: int) -> None:
                    fence = await store.location.reserve(
                        f"{name}-{i}", kind=SpotKind.INSTANCE, stable_type="counter",
                        mesh=MESH, owner=owner, now=1.0)
                    generations.append(fence.object_generation)

                async with trio.open_nursery() as nursery:
                    for i in range(60):
                        nursery.start_soon(one, i)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(reserve_all, first, "n1")
                nursery.start_soon(reserve_all, second, "n2")
            assert len(generations) == 120
            assert len(set(generations)) == 120


async def test_concurrent_finds_share_statements_and_each_gets_its_own_record():
    """Finds that arrive together are read with one statement per batch (``read_keyed``):
    each caller still gets exactly its own record, or ``None``."""
    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as store:
            owner = await claim(store, "node-a", lease=1e6, capacity=100)
            for i in range(0, 60, 2):
                await reserve(store, owner, f"f-{i}")
            expected = {f"f-{i}": await store.location.find(f"f-{i}") for i in range(60)}
            before = (store.connection.lookup_batches, store.connection.lookups)
            found: dict[str, object] = {}

            async def find(spot_id: str) -> None:
                found[spot_id] = await store.location.find(spot_id)

            async with trio.open_nursery() as nursery:
                for spot_id in expected:
                    nursery.start_soon(find, spot_id)
            assert found == expected
            assert sum(record is not None for record in found.values()) == 30
            batches = store.connection.lookup_batches - before[0]
            assert store.connection.lookups - before[1] == 60
            assert batches < 10  # shared, not one statement each


async def test_a_failed_batch_of_finds_fails_every_caller_typed():
    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as store:
            prefix = parse_url(url).prefix
            _sql(f'ALTER TABLE "{prefix}".loc_records RENAME TO loc_records_gone')
            outcomes: list[object] = []

            async def find(spot_id: str) -> None:
                try:
                    outcomes.append(await store.location.find(spot_id))
                except StoreUnavailable as error:
                    outcomes.append(error)

            async with trio.open_nursery() as nursery:
                for i in range(5):
                    nursery.start_soon(find, f"x-{i}")
            assert len(outcomes) == 5
            assert all(isinstance(o, StoreUnavailable) for o in outcomes), outcomes
            _sql(f'ALTER TABLE "{prefix}".loc_records_gone RENAME TO loc_records')
            assert await store.location.find("x-0") is None  # and finds work again


def _counter(prefix: str) -> int:
    with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(f'SELECT value FROM "{prefix}".zlink_meta '  # type: ignore[arg-type]
                           "WHERE key = 'writes'").fetchone()
    assert row is not None
    return int(row[0])


async def test_a_write_by_hand_is_never_served_from_the_cache():
    """A row changed behind the stores' back (no lock, no counter of its own) is read
    from the table: the table's trigger counted the write."""
    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as store:
            prefix = parse_url(url).prefix
            owner = await claim(store, "node-a", lease=1e6, capacity=5)
            fence = await reserve(store, owner, "o-1")  # the Creating record is now cached
            before = _counter(prefix)
            _sql(f"DELETE FROM \"{prefix}\".loc_records WHERE spot_id = 'o-1'")
            assert _counter(prefix) == before + 1
            with pytest.raises(StaleFence):  # the table's truth, not the cached record
                await store.location.commit_ready(fence, now=0.0)
            fence = await reserve(store, owner, "o-1")  # and the ID is free again
            assert (await store.location.commit_ready(fence, now=0.0)).state.value == "ready"


async def test_another_stores_write_is_never_served_from_the_cache():
    """Two stores on one prefix (two processes): each write of one is counted, so the
    other's cached rows go."""
    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as first, open_store(url) as second:
            owner = await claim(first, "node-a", lease=1e6, capacity=5)
            fence = await reserve(first, owner, "o-2")  # cached by the first store
            assert await second.location.abort_creating(fence)  # the second removes it
            with pytest.raises(StaleFence):
                await first.location.commit_ready(fence, now=0.0)
            again = await reserve(first, owner, "o-2")  # not AuthorityExists
            assert again.object_generation > fence.object_generation


@pytest.mark.parametrize("seed", [1, 2])
async def test_cached_and_uncached_stores_agree_on_postgres(seed):
    """The mixed workload of the SQLite fast-path test (group commits of cold
    activations, closes, releases, inboxes, Actors joining and moving), on a store whose
    cache and prefetch are on and one whose cache is off: the same outcomes."""
    results = {}
    with trio.fail_after(4 * LIMIT):
        for cache in (True, False):
            async with fresh_url() as url, open_store(url) as store:
                store.location._db.cache.enabled = cache
                batches = await _mixed(store, seed)
                found = [_plain(await store.location.find(f"m-{i}")) for i in range(12)]
                found += [_plain(await store.location.members(c))
                          for c in (ENTRY, ROOM, ENTRY_B)]
                results[cache] = (batches, found, await store.location.statistics(),
                                  await store.relocation.statistics())
    assert results[True] == results[False]
    assert "nextContainer" in repr(results[True][0])  # some Actor moved


async def _one_group(store: PostgresStore, bodies: list, *, checks_first: bool = False,
                     inline: bool = False, expect_threaded: int | None = None,
                     reads: dict[object, Prefetch] | None = None) -> list[object]:
    """Run ``bodies`` as concurrent writes that form one group: a first write holds the
    worker thread until every other is queued behind it. ``inline``: each body names its
    reads (none), so the group runs in the Trio loop; else in a worker thread.
    ``expect_threaded``: the groups that ran in a worker thread (the holder's among them)
    when not as ``inline`` says; ``reads``: a body's hint other than ``Prefetch()``. Each
    outcome is the value returned, or the error raised."""
    gate = threading.Event()
    outcomes: list[object] = [None] * len(bodies)

    def hold(session) -> None:
        gate.wait(LIMIT)

    async def run(i: int) -> None:
        try:
            outcomes[i] = await store.connection.write(
                bodies[i], checks_first=checks_first,
                reads=(reads or {}).get(bodies[i], Prefetch()) if inline else None)
        except Exception as error:
            outcomes[i] = error

    groups = store.connection.groups
    threaded = store.connection.threaded_groups
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.connection.write, hold)
        await trio.testing.wait_all_tasks_blocked()
        for i in range(len(bodies)):
            nursery.start_soon(run, i)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    assert store.connection.groups == groups + 2  # the holder's, then one for the rest
    # The holder's group ran in a worker thread; the rest's did too unless inline.
    assert store.connection.threaded_groups - threaded == (
        expect_threaded if expect_threaded is not None else 1 if inline else 2)
    return outcomes


def _lifecycles(url: str) -> list[tuple[str, int]]:
    """The ``loc_lifecycles`` rows of the store at ``url``, by NodeId."""
    prefix = parse_url(url).prefix
    with psycopg.connect(POSTGRES_URL) as conn:
        return conn.execute(f'SELECT node_id, generation FROM "{prefix}".'  # type: ignore[arg-type]
                            "loc_lifecycles ORDER BY node_id").fetchall()


def _insert(node_id: str):
    def body(session):
        session.execute("INSERT INTO loc_lifecycles VALUES (?, 1)", (node_id,))
        return node_id
    return body


@pytest.mark.parametrize("inline", [False, True], ids=["threaded", "inline"])
async def test_a_statement_the_server_refuses_fails_its_body_alone(inline):
    """In a pipelined group the server's refusal of one body's statement may surface
    while a later body runs: the group runs again, each body alone, and only the body
    at fault fails (typed); the others are written once."""
    def divide_by_zero(session):
        session.execute("INSERT INTO loc_lifecycles VALUES ('bad', 1)")
        session.execute("SELECT 1 / 0")  # refused by the server, answer not read
        return "bad"

    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as store:
            outcomes = await _one_group(store, [_insert("a"), divide_by_zero, _insert("b")],
                                        inline=inline)
            assert outcomes[0] == "a"
            assert outcomes[2] == "b"
            assert isinstance(outcomes[1], StoreUnavailable)
            assert "division by zero" in str(outcomes[1])
            assert _lifecycles(url) == [("a", 1), ("b", 1)]


@pytest.mark.parametrize("inline", [False, True], ids=["threaded", "inline"])
async def test_a_body_that_raises_after_writing_fails_alone_with_nothing_written(inline):
    """A body said to check first (no savepoint) that raises after a write cannot be
    rolled back alone inside the group: the group runs again, each body alone, so its
    write is undone, its caller gets its own error, and the others are written."""
    def insert_then_refuse(session):
        session.execute("INSERT INTO loc_lifecycles VALUES ('half', 1)")
        raise ValueError("refused after writing")

    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as store:
            outcomes = await _one_group(
                store, [_insert("a"), insert_then_refuse, _insert("b")], checks_first=True,
                inline=inline)
            assert outcomes[0] == "a"
            assert outcomes[2] == "b"
            assert isinstance(outcomes[1], ValueError)
            assert _lifecycles(url) == [("a", 1), ("b", 1)]


@pytest.mark.parametrize("inline", [False, True], ids=["threaded", "inline"])
async def test_an_update_of_a_known_row_that_finds_none_is_answered_truly(inline):
    """``updated_known_row`` answers a pipelined UPDATE at once; when the row was not
    there after all, the group runs again unpipelined, where the answer is what the
    statement did, and the body writes the row whole."""
    answers: list[bool] = []

    def update_or_insert(session):
        changed = updated_known_row(
            session, "UPDATE loc_lifecycles SET generation = ? WHERE node_id = ?",
            (7, "ghost"))
        answers.append(changed)
        if not changed:
            session.execute("INSERT INTO loc_lifecycles VALUES (?, ?)", ("ghost", 7))
        return changed

    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as store:
            outcomes = await _one_group(store, [_insert("c"), update_or_insert],
                                        inline=inline)
            assert outcomes == ["c", False]
            assert answers == [True, False]
            assert _lifecycles(url) == [("c", 1), ("ghost", 7)]


async def test_a_body_of_an_inline_group_that_reads_a_row_not_named_runs_in_a_thread():
    """A group runs in the Trio loop when each body named its reads; a body that reads a
    row anyway (the loop must not wait for the server inside a body) sends the group,
    rolled back, to a worker thread: every body's outcome is the one it would have had,
    and each write is there once."""
    def read_then_insert(session):
        (generation,) = session.execute(
            "SELECT generation FROM loc_lifecycles WHERE node_id = 'seed'").fetchone()
        session.execute("INSERT INTO loc_lifecycles VALUES ('copied', ?)", (generation,))
        return generation

    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as store:
            await store.connection.write(lambda session: session.execute(
                "INSERT INTO loc_lifecycles VALUES ('seed', 5)"))
            outcomes = await _one_group(
                store, [_insert("a"), read_then_insert, _insert("b")], inline=True,
                expect_threaded=2)
            assert outcomes == ["a", 5, "b"]
            assert _lifecycles(url) == [("a", 1), ("b", 1), ("copied", 5), ("seed", 5)]


async def _chained(store: PostgresStore, monkeypatch: pytest.MonkeyPatch, first: list,
                   then: list, reads: dict[object, Prefetch] | None = None
                   ) -> tuple[list[object], list[object]]:
    """Run the inline writes ``first`` as one group and ``then`` as the group chained to
    its ``COMMIT``: ``then`` is queued while ``first``'s opening round trip is held.
    ``reads``: a body's hint other than ``Prefetch()``. The outcomes of each (the value
    returned, or the error raised)."""
    opened = trio.Event()
    release = trio.Event()
    sync_async = Pipeline.sync_async

    async def held(pipeline: Pipeline) -> None:
        if not opened.is_set():  # the first group's opening: hold it
            opened.set()
            await release.wait()
        await sync_async(pipeline)

    monkeypatch.setattr(Pipeline, "sync_async", held)
    outcomes: dict[int, list[object]] = {0: [None] * len(first), 1: [None] * len(then)}

    async def run(group: int, i: int, body) -> None:
        try:
            outcomes[group][i] = await store.connection.write(
                body, reads=(reads or {}).get(body, Prefetch()))
        except Exception as error:
            outcomes[group][i] = error

    chained = store.connection.chained_groups
    async with trio.open_nursery() as nursery:
        for i, body in enumerate(first):
            nursery.start_soon(run, 0, i, body)
        await opened.wait()
        for i, body in enumerate(then):
            nursery.start_soon(run, 1, i, body)
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert store.connection.chained_groups == chained + 1
    return outcomes[0], outcomes[1]


async def test_a_group_chained_to_the_commit_of_the_one_before_is_written_once(monkeypatch):
    """Under load a group's opening goes with the COMMIT of the group before it (one round
    trip for both): both groups are written, each write once."""
    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as store:
            first, then = await _chained(store, monkeypatch, [_insert("a"), _insert("b")],
                                         [_insert("c"), _insert("d")])
            assert sorted(first) == ["a", "b"]
            assert sorted(then) == ["c", "d"]
            assert _lifecycles(url) == [("a", 1), ("b", 1), ("c", 1), ("d", 1)]


async def test_a_group_chained_to_a_group_that_failed_runs_after_it(monkeypatch):
    """When the group before fails, the server skips the chained group's opening with the
    rest: the chained group runs afterwards as it was, and nothing of it is lost or
    written twice; only the body at fault fails."""
    def divide_by_zero(session):
        session.execute("SELECT 1 / 0")
        return "bad"

    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as store:
            first, then = await _chained(store, monkeypatch, [_insert("a"), divide_by_zero],
                                         [_insert("c"), _insert("d")])
            assert "a" in first
            assert any(isinstance(outcome, StoreUnavailable) for outcome in first)
            assert sorted(then) == ["c", "d"]
            assert _lifecycles(url) == [("a", 1), ("c", 1), ("d", 1)]


@pytest.mark.parametrize("chained", [False, True], ids=["first", "chained"])
async def test_a_write_whose_hint_psycopg_refuses_fails_alone(monkeypatch, chained):
    """A value no statement can carry (a NUL in a text parameter) fails as psycopg sends
    the group's opening, before the server sees it: that write fails alone, typed, with
    nothing of it written; the others of its group -- and a group before it, whose COMMIT
    was on its way -- are written once."""
    bad = _insert("bad")
    reads = {bad: Prefetch(records=("x\x00y",))}
    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as store:
            if chained:
                first, group = await _chained(store, monkeypatch, [_insert("a")],
                                              [_insert("c"), bad], reads)
                assert first == ["a"]
            else:
                group = await _one_group(store, [_insert("a"), _insert("c"), bad],
                                         inline=True, reads=reads)
            assert "c" in group
            # The caller's value, never storable here: refused as its own, not "retry".
            assert any(isinstance(outcome, InvalidOperation) and "NUL" in str(outcome)
                       for outcome in group)
            assert _lifecycles(url) == [("a", 1), ("c", 1)]


async def test_a_schema_of_version_1_is_brought_up_to_date():
    """Version 1 had no write counter: opening it adds the counter and its triggers."""
    with trio.fail_after(LIMIT):
        async with fresh_url() as url:
            prefix = parse_url(url).prefix
            async with open_store(url):
                pass
            _sql(f'DROP FUNCTION "{prefix}".zlink_foreign_write() CASCADE')
            _sql(f"DELETE FROM \"{prefix}\".zlink_meta WHERE key = 'writes'")
            _sql(f"UPDATE \"{prefix}\".zlink_meta SET value = 1 WHERE key = 'schema_version'")
            async with open_store(url) as store:
                owner = await claim(store, "node-a", lease=1e6, capacity=5)
                await reserve(store, owner, "v-1")
            with psycopg.connect(POSTGRES_URL) as conn:
                meta = dict(conn.execute(f'SELECT key, value FROM "{prefix}".zlink_meta'  # type: ignore[arg-type]
                                         ).fetchall())
            assert meta["schema_version"] == SCHEMA_VERSION
            counted = _counter(prefix)
            _sql(f"DELETE FROM \"{prefix}\".loc_records WHERE spot_id = 'v-1'")
            assert _counter(prefix) == counted + 1


@pytest.mark.parametrize("inline", [False, True], ids=["threaded", "inline"])
async def test_a_commit_whose_answer_is_lost_may_have_been_written(monkeypatch, inline):
    """The connection fails after the server committed a write but before its COMMIT's
    answer was read (here: no answer within the wait): the write is there, so its caller
    is told it may have been written -- never "nothing was written"."""
    execute, sync, sync_async = PostgresSession.execute, Pipeline.sync, Pipeline.sync_async
    commit_queued: list[Pipeline] = []

    def flagged(session, sql, parameters=(), /):
        if sql == "COMMIT" and session._pipeline is not None:
            commit_queued.append(session._pipeline)
        return execute(session, sql, parameters)

    def committed_here(url: str) -> bool:
        return ("lost", 1) in _lifecycles(url)

    def lost_answer(pipeline: Pipeline) -> None:
        # The COMMIT and a sync go out; once the server has committed (seen from another
        # connection), the answer is never read.
        pipeline._send_sync()
        while pipeline._pg.flush() == 1:
            pass
        for _ in range(10_000):
            if committed_here(url):
                raise psycopg.OperationalError("the server sent nothing (test)")
        raise AssertionError("the COMMIT never landed")

    def threaded_sync(pipeline: Pipeline) -> None:
        if commit_queued:
            commit_queued.clear()
            lost_answer(pipeline)
        sync(pipeline)

    async def inline_sync(pipeline: Pipeline) -> None:
        if commit_queued:
            commit_queued.clear()
            lost_answer(pipeline)
        await sync_async(pipeline)

    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as store:
            await store.connection.write(_insert("before"))  # connected: inline may run
            monkeypatch.setattr(PostgresSession, "execute", flagged)
            monkeypatch.setattr(Pipeline, "sync", threaded_sync)
            monkeypatch.setattr(Pipeline, "sync_async", inline_sync)
            with pytest.raises(StoreUnavailable, match="may have been written"):
                await store.connection.write(_insert("lost"),
                                             reads=Prefetch() if inline else None)
            assert committed_here(url)
            monkeypatch.undo()
            # The store goes on, on a new connection.
            assert await store.connection.write(_insert("after")) == "after"
            assert _lifecycles(url) == [("after", 1), ("before", 1), ("lost", 1)]


async def test_a_spot_id_holding_nul_is_refused_as_the_callers_and_writes_nothing():
    """PostgreSQL text holds no NUL character: a Spot ID with one is refused as the
    caller's input (InvalidOperation, nothing written) -- a find alone, never failing the
    finds it would have been read with -- and the store goes on."""
    with trio.fail_after(LIMIT):
        async with fresh_url() as url, open_store(url) as store:
            node = await claim(store)
            await reserve(store, node, "plain")
            with pytest.raises(InvalidOperation, match="NUL"):
                await reserve(store, node, "bad\x00id")
            outcomes: dict[str, object] = {}

            async def find(spot_id: str) -> None:
                try:
                    outcomes[spot_id] = await store.location.find(spot_id)
                except Exception as error:
                    outcomes[spot_id] = error

            async with trio.open_nursery() as nursery:
                for spot_id in ("plain", "bad\x00id", "absent"):
                    nursery.start_soon(find, spot_id)
            assert isinstance(outcomes["bad\x00id"], InvalidOperation)
            assert outcomes["plain"].spot_id == "plain"
            assert outcomes["absent"] is None
            stored = [r.spot_id for r in (await store.location.query(page_size=10)).records]
            assert "plain" in stored
            assert not [i for i in stored if "\x00" in i]

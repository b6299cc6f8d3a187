"""SQLite backend specifics: URL options, schema, durability, lock faults, cancellation.

The conformance suite already runs on SQLite (both dispatch modes); these tests
cover what only a file-backed, multi-process store has. Every test is bounded by
``trio.fail_after``; busy timeouts are tiny, and the only real waits are a busy
timeout expiring.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import sys
import threading
import time

import pytest
import trio
import trio.lowlevel
import trio.testing
from store_helpers import MESH, claim, descriptor, reserve

from zlink_trio.core.errors import (
    CapacityExceeded,
    InvalidConfiguration,
    StoreUnavailable,
    Unavailable,
)
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.placement import reminder_partition
from zlink_trio.core.records import AuthorityState
from zlink_trio.store import AuthorityExists, MembersRemain, open_store
from zlink_trio.store.sqlite import schema
from zlink_trio.store.sqlite.schema import (
    APPLICATION_ID,
    DEFAULT_DISPATCH,
    SCHEMA_VERSION,
    parse_url,
)

TIMEOUT = 10
DISPATCH = ["inline", "thread"]


def url_of(path, **options):
    query = "&".join(f"{k}={v}" for k, v in options.items())
    return f"sqlite://{path}" + (f"?{query}" if query else "")


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "zlink.db"


async def snapshot(store):
    page = await store.location.query(page_size=1000)
    return (page.records, await store.location.descriptors(now=0.0),
            await store.location.statistics(), await store.relocation.statistics())


class Blocker:
    """Another connection, in its own thread, holding ``BEGIN IMMEDIATE`` until released."""

    def __init__(self, path):
        self._path = path
        self._held = threading.Event()
        self._release = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        conn = sqlite3.connect(self._path, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._held.set()
            self._release.wait(TIMEOUT)
            conn.execute("ROLLBACK")
        finally:
            conn.close()

    async def __aenter__(self):
        self._thread.start()
        await trio.to_thread.run_sync(self._held.wait, TIMEOUT)
        assert self._held.is_set()
        return self

    def release(self):
        self._release.set()

    async def __aexit__(self, *exc):
        self.release()
        await trio.to_thread.run_sync(self._thread.join, TIMEOUT)


# -- URL options --------------------------------------------------------------------------


def test_url_defaults_and_options():
    options = parse_url("sqlite:///var/x.db")
    assert (options.path, options.synchronous, options.busy_timeout, options.dispatch) == (
        "/var/x.db", "normal", 5.0, DEFAULT_DISPATCH)
    options = parse_url("sqlite:///a%20b.db?synchronous=FULL&busy_timeout=0.05&dispatch=thread")
    assert (options.path, options.synchronous, options.busy_timeout, options.dispatch) == (
        "/a b.db", "full", 0.05, "thread")


@pytest.mark.parametrize("url", [
    "sqlite://host/x.db", "sqlite://", "sqlite:///", "sqlite:///x.db?synchronous=off",
    "sqlite:///x.db?busy_timeout=-1", "sqlite:///x.db?busy_timeout=nan",
    "sqlite:///x.db?busy_timeout=601", "sqlite:///x.db?mode=ro", "sqlite:///x.db?dispatch=x",
    "sqlite:///x.db?busy_timeout=1&busy_timeout=2", "sqlite:///x.db#frag",
])
async def test_bad_urls_are_refused_before_opening(url):
    with trio.fail_after(TIMEOUT), pytest.raises(InvalidConfiguration):
        async with open_store(url):
            pass


# -- schema, pragmas, durability ------------------------------------------------------------


@pytest.mark.parametrize(("sync", "expected"), [("normal", 1), ("full", 2)])
async def test_schema_wal_and_synchronous_applied_at_open(db_path, sync, expected):
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path, synchronous=sync)) as store:
            pragma = await store.location._db.read(
                lambda c: c.execute("PRAGMA synchronous").fetchone()[0])
            assert pragma == expected
        conn = sqlite3.connect(db_path)
        try:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table'")}
        finally:
            conn.close()
        assert tables
        assert all(t.startswith(("loc_", "rel_")) for t in tables)
        assert {"loc_records", "loc_claims", "rel_roots", "rel_inboxes"} <= tables


async def test_data_survives_close_and_reopen(db_path):
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)) as store:
            c = await claim(store, "node-a", lease=100.0)
            fence = await reserve(store, c, "r-1")
            await store.location.commit_ready(fence, now=1.0)
            receipt = await store.relocation.put_root(b"envelope")
            assert await store.relocation.inbox_append("r-1", fence.object_generation, b"m") == 1
            before = await snapshot(store)
        async with open_store(url_of(db_path)) as store:
            assert await snapshot(store) == before
            assert await store.relocation.get_root(receipt) == b"envelope"
            # The sequences continue where they were: nothing is reissued.
            assert await store.relocation.inbox_append("r-1", fence.object_generation, b"n") == 2
            again = await reserve(store, c, "r-2")
            assert again.object_generation > fence.object_generation


_CHILD = """
import sys, trio
sys.path.insert(0, {tests!r})
from store_helpers import claim, reserve
from zlink_trio.store import open_store

async def main():
    async with open_store({url!r}) as store:
        c = await claim(store, "child", lease=100.0)
        await reserve(store, c, "from-child")

trio.run(main)
"""


async def test_another_process_sees_and_is_fenced_by_the_same_file(db_path):
    url = url_of(db_path, busy_timeout=5)
    tests = str(__import__("pathlib").Path(__file__).parent)
    with trio.fail_after(60):
        await trio.run_process([sys.executable, "-c", _CHILD.format(tests=tests, url=url)])
        async with open_store(url) as store:
            record = await store.location.find("from-child")
            assert record is not None
            assert record.state is AuthorityState.CREATING
            c = await claim(store, "parent", lease=100.0)
            with pytest.raises(AuthorityExists):
                await reserve(store, c, "from-child")


async def test_newer_schema_version_is_refused(db_path):
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)):
            pass
        conn = sqlite3.connect(db_path)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.close()
        with pytest.raises(InvalidConfiguration, match="newer than this zlink_trio knows"):
            async with open_store(url_of(db_path)):
                pass


def downgrade(path, version):
    """Make a file of this code's schema exactly a file of ``version``, as an older release
    left it: undo the migrations after ``version``, newest first, in one transaction."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        if version < 5:  # no reminders
            conn.execute("DROP TABLE loc_reminders")
        if version < 4:  # no durable state
            conn.execute("DROP TABLE loc_state")
        if version < 3:  # no container columns nor indexes; no Actor row to lose
            assert conn.execute("SELECT count(*) FROM loc_records WHERE container IS NOT "
                                "NULL OR next_container IS NOT NULL").fetchone() == (0,)
            for column in ("container", "next_container"):
                conn.execute(f"DROP INDEX loc_records_{column}")
                conn.execute(f"ALTER TABLE loc_records DROP COLUMN {column}")
        if version < 2:  # the bodies have no relocationPayload key
            conn.execute("UPDATE loc_records SET body = json_remove(body, '$.relocationPayload')")
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
    finally:
        conn.close()


def layout(path):
    """``(user_version, loc_records' columns, the SQL of the container and next-container
    indexes, None where absent)``."""
    conn = sqlite3.connect(path)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        columns = [row[1] for row in conn.execute("PRAGMA table_info(loc_records)")]
        indexes = [conn.execute("SELECT sql FROM sqlite_schema WHERE name = ?",
                                (f"loc_records_{column}",)).fetchone()
                   for column in ("container", "next_container")]
    finally:
        conn.close()
    return version, columns, [None if index is None else index[0] for index in indexes]


async def test_a_version_1_file_is_migrated_to_name_relocation_payloads(db_path):
    # Version 2: a record's body carries ``relocationPayload`` (the payload root of a move
    # past its capture). A version-1 file -- bodies without the key -- is migrated at
    # open: every record reads back as it was, and a move can name its payload.
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)) as store:
            a = await claim(store, "node-a", lease=100.0)
            b = await claim(store, "node-b", lease=100.0)
            fence = await reserve(store, a, "r-1")
            record = await store.location.commit_ready(fence, now=1.0)
            await store.location.begin_relocation(record.fence(), target=b.owner(), now=1.0)
            sealed = await store.location.seal_relocation(record.fence(), now=1.0)
            before = await snapshot(store)
        downgrade(db_path, 1)
        async with open_store(url_of(db_path)) as store:
            assert await snapshot(store) == before
            payload = await store.relocation.put_root(b"payload")
            named = await store.location.record_relocation_payload(
                sealed.fence(), payload=payload, now=1.0)
            assert (await store.location.find("r-1")).relocation_payload == payload
            assert named.relocation_payload == payload
        conn = sqlite3.connect(db_path)
        try:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            missing = conn.execute("SELECT count(*) FROM loc_records WHERE "
                                   "json_type(body, '$.relocationPayload') IS NULL").fetchone()
        finally:
            conn.close()
        assert missing == (0,)


async def test_a_version_3_file_is_migrated_to_keep_durable_state(db_path):
    # Version 4: a Spot's durable state lives in ``loc_state`` (store.state_steps). A
    # version-3 file -- no such table -- gets it at open: every record reads back as it
    # was, and its Spots save and load state.
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)) as store:
            a = await claim(store, "node-a", lease=100.0)
            room = await store.location.commit_ready(await reserve(store, a, "room-1"),
                                                     now=1.0)
            before = await snapshot(store)
        downgrade(db_path, 3)
        conn = sqlite3.connect(db_path)
        try:
            assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = "
                                "'loc_state'").fetchone() == (0,)
        finally:
            conn.close()
        async with open_store(url_of(db_path)) as store:
            assert await snapshot(store) == before
            saved = await store.location.save_state(room.fence(), b"kept", now=1.0)
            assert await store.location.load_state("room-1") == saved
        assert layout(db_path)[0] == SCHEMA_VERSION


async def test_a_version_4_file_is_migrated_to_keep_reminders(db_path):
    # Version 5: a Spot's durable reminders live in ``loc_reminders``, taken through the
    # ``loc_reminders_wake`` index (store.reminder_steps). A version-4 file -- no such
    # table -- gets both at open: every record and state reads back as it was, and its
    # Spots set, list and hand over reminders.
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)) as store:
            a = await claim(store, "node-a", lease=100.0)
            room = await store.location.commit_ready(await reserve(store, a, "room-1"),
                                                     now=1.0)
            saved = await store.location.save_state(room.fence(), b"kept", now=1.0)
            before = await snapshot(store)
        downgrade(db_path, 4)
        conn = sqlite3.connect(db_path)
        try:
            assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name LIKE "
                                "'loc_reminders%'").fetchone() == (0,)
        finally:
            conn.close()
        async with open_store(url_of(db_path)) as store:
            assert await snapshot(store) == before
            assert await store.location.load_state("room-1") == saved
            tick = await store.location.set_reminder(room.fence(), "tick", due=2.0,
                                                     period=None, now=1.0)
            assert await store.location.reminders("room-1") == (tick,)
            [taken] = await store.location.take_due_reminders(
                MESH, [reminder_partition("room-1")], a.owner(), now=2.0, hold=5.0,
                limit=10)
            assert (taken.name, taken.taker) == ("tick", a.owner())
        conn = sqlite3.connect(db_path)
        try:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
            assert conn.execute("SELECT name FROM sqlite_schema WHERE tbl_name = "
                                "'loc_reminders' AND type = 'index' AND sql IS NOT NULL"
                                ).fetchall() == [("loc_reminders_wake",)]
        finally:
            conn.close()


async def test_a_version_2_file_is_migrated_to_hold_actor_membership(db_path, tmp_path):
    # Version 3: an Actor's record names its container, and a moving one its next
    # container; ``loc_records.container`` and ``loc_records.next_container`` (indexed)
    # hold them. A version-2 file -- no such columns, no Actor -- gets the columns, NULL
    # on every row, and the indexes at open, exactly as a new file has them: every
    # record reads back as it was, and Actors join its Spots and move between its nodes.
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(tmp_path / "new.db")):
            pass
        fresh = layout(tmp_path / "new.db")
        async with open_store(url_of(db_path)) as store:
            a = await claim(store, "node-a", lease=100.0)
            b = await claim(store, "node-b", lease=100.0)
            room = await store.location.commit_ready(await reserve(store, a, "room-1"),
                                                     now=1.0)
            await reserve(store, a, "creating-1")
            moving = await store.location.commit_ready(await reserve(store, a, "r-2"),
                                                       now=1.0)
            await store.location.begin_relocation(moving.fence(), target=b.owner(), now=1.0)
            before = await snapshot(store)
        downgrade(db_path, 2)
        assert layout(db_path)[0] == 2
        assert not {"container", "next_container"} & set(layout(db_path)[1])
        async with open_store(url_of(db_path)) as store:
            assert await snapshot(store) == before
            member = await store.location.commit_ready(await reserve(
                store, a, "p-1", kind=SpotKind.ACTOR, stable_type="player",
                container="room-1"), now=1.0)
            assert member.container == "room-1"
            assert await store.location.members("room-1") == [member]
            with pytest.raises(MembersRemain):
                await store.location.begin_close("room-1", object_generation=room.object_generation,
                                                 owner=a.owner(), now=1.0)
            b_entry = b.descriptor.entry_spot_id
            arriving = await store.location.begin_relocation(
                member.fence(), target=b.owner(), now=1.0, container=b_entry)
            assert await store.location.members(b_entry) == [arriving]
        assert layout(db_path) == fresh
        version, columns, indexes = fresh
        assert (version, columns[-2:]) == (SCHEMA_VERSION, ["container", "next_container"])
        assert None not in indexes
        conn = sqlite3.connect(db_path)
        try:
            named = conn.execute("SELECT spot_id, container, next_container FROM loc_records "
                                 "WHERE container IS NOT NULL OR next_container IS NOT NULL"
                                 ).fetchall()
        finally:
            conn.close()
        assert named == [("p-1", "room-1", b_entry)]


async def test_a_failed_migration_leaves_the_older_file_as_it_was(db_path):
    # The whole migration commits with the new version, or nothing does: here the
    # version-3 index cannot be created (its name is taken) after the columns were added.
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)) as store:
            await claim(store, "node-a", lease=100.0)
        downgrade(db_path, 2)
        conn = sqlite3.connect(db_path)
        with conn:
            conn.execute("CREATE INDEX loc_records_container ON loc_records (state)")
        conn.close()
        before = layout(db_path)
        with pytest.raises(StoreUnavailable, match="loc_records_container already exists"):
            async with open_store(url_of(db_path)):
                pass
        assert layout(db_path) == before
        assert before[0] == 2
        assert not {"container", "next_container"} & set(before[1])


async def test_a_release_that_knows_only_version_2_refuses_a_version_3_file(db_path,
                                                                            monkeypatch):
    # An older release must never write a layout it does not understand: it would write
    # Actor records' rows without their container column.
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)) as store:
            c = await claim(store, "node-a", lease=100.0)
            await reserve(store, c, "p-1", kind=SpotKind.ACTOR, stable_type="player",
                          container=c.descriptor.entry_spot_id)
        downgrade(db_path, 3)
        before = layout(db_path)
        assert before[0] == 3
        monkeypatch.setattr(schema, "SCHEMA_VERSION", 2)
        with pytest.raises(InvalidConfiguration, match="schema version 3, newer"):
            async with open_store(url_of(db_path)):
                pass
        assert layout(db_path) == before


async def test_foreign_database_is_refused(db_path):
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE users (id INTEGER)")
    conn.close()
    with trio.fail_after(TIMEOUT), pytest.raises(InvalidConfiguration, match="another"):
        async with open_store(url_of(db_path)):
            pass


async def test_unopenable_path_is_unavailable(tmp_path):
    with trio.fail_after(TIMEOUT), pytest.raises(Unavailable):
        async with open_store(url_of(tmp_path / "missing-dir" / "x.db")):
            pass


# -- lock held by another connection past the busy timeout ------------------------------------


@pytest.mark.parametrize("dispatch", DISPATCH)
async def test_locked_past_busy_timeout_is_unavailable_then_recovers(db_path, dispatch):
    url = url_of(db_path, busy_timeout=0.05, dispatch=dispatch)
    with trio.fail_after(TIMEOUT):
        async with open_store(url) as store:
            owner = await claim(store, "node-a", lease=100.0)
            before = await snapshot(store)
            async with Blocker(db_path) as blocker:
                started = trio.current_time()
                with pytest.raises(Unavailable, match="locked") as caught:
                    await store.location.new_claim(descriptor("node-b"), now=0.0, lease=1.0)
                assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
                with pytest.raises(Unavailable, match="locked"):
                    await reserve(store, owner, "r-1")
                assert trio.current_time() - started < 2.0  # bounded by the busy timeout
                # Readers are not blocked by the writer (WAL).
                assert await snapshot(store) == before
                blocker.release()
            assert await snapshot(store) == before  # nothing half-written
            await store.location.new_claim(descriptor("node-b"), now=0.0, lease=1.0)
            await reserve(store, owner, "r-1")
            assert (await store.location.statistics()).creating == 1


@pytest.mark.parametrize("dispatch", DISPATCH)
async def test_a_lock_outage_logs_one_warning_for_all_its_failed_calls_and_one_info_after(
        db_path, dispatch, caplog):
    caplog.set_level(logging.INFO, logger="zlink_trio.store")
    url = url_of(db_path, busy_timeout=0.01, dispatch=dispatch)
    with trio.fail_after(TIMEOUT):
        async with open_store(url) as store:
            owner = await claim(store, "node-a", lease=100.0)
            async with Blocker(db_path) as blocker:
                for n in range(30):
                    with pytest.raises(Unavailable, match="locked"):
                        await reserve(store, owner, f"r-{n}")
                [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING]
                assert warning.name == "zlink_trio.store"
                assert warning.getMessage().startswith(
                    f"the SQLite store {str(db_path)!r} is unavailable: SQLite store "
                    f"{str(db_path)!r} is locked by another connection past the busy timeout")
                assert await store.location.find("r-0") is None  # reads go on meanwhile
                blocker.release()
            caplog.clear()
            await reserve(store, owner, "r-0")
            await reserve(store, owner, "r-1")
    [back] = caplog.records
    assert back.levelno == logging.INFO
    assert back.getMessage().startswith(f"the SQLite store {str(db_path)!r} works again after ")
    assert back.getMessage().endswith("(30 failed calls in all)")


@pytest.mark.parametrize("dispatch", DISPATCH)
async def test_cancelled_caller_waits_for_its_transaction_which_commits_whole(db_path,
                                                                               dispatch):
    url = url_of(db_path, busy_timeout=5, dispatch=dispatch)
    with trio.fail_after(TIMEOUT):
        async with open_store(url) as store:
            owner = await claim(store, "node-a", lease=100.0, capacity=1)
            finished, fences = [], []
            async with Blocker(db_path) as blocker, trio.open_nursery() as nursery:
                scope = trio.CancelScope()

                async def attempt():
                    with scope:
                        fences.append(await reserve(store, owner, "r-1"))
                        await trio.lowlevel.checkpoint()  # the cancel is delivered here
                    finished.append(scope.cancelled_caught)

                nursery.start_soon(attempt)
                await trio.testing.wait_all_tasks_blocked()  # inside the worker thread
                scope.cancel()
                await trio.lowlevel.checkpoint()
                await trio.testing.wait_all_tasks_blocked()
                assert finished == []  # not abandoned: still waiting for the thread
                blocker.release()
            # The transaction finished whole and its result was delivered; the
            # cancellation came at the caller's next checkpoint.
            assert finished == [True]
            record = await store.location.find("r-1")
            assert record is not None
            assert record.state is AuthorityState.CREATING
            assert (await store.location.statistics()).creating == 1
            with pytest.raises(CapacityExceeded):  # the pending unit is counted (capacity 1)
                await reserve(store, owner, "r-2")
            await store.location.commit_ready(fences[0], now=1.0)
            stats = await store.location.statistics()
            assert (stats.creating, stats.ready) == (0, 2)  # r-1 and the Entry claim


@pytest.mark.parametrize("dispatch", DISPATCH)
async def test_cancelled_caller_whose_transaction_times_out_leaves_nothing(db_path, dispatch):
    url = url_of(db_path, busy_timeout=0.05, dispatch=dispatch)
    with trio.fail_after(TIMEOUT):
        async with open_store(url) as store:
            owner = await claim(store, "node-a", lease=100.0)
            before = await snapshot(store)
            async with Blocker(db_path):
                started = trio.current_time()
                with trio.move_on_after(0.001), pytest.raises(Unavailable, match="locked"):
                    # Not abandoned: the thread ran to its busy timeout and rolled back;
                    # the caller gets that outcome, the cancel at its next checkpoint.
                    await reserve(store, owner, "r-1")
                assert trio.current_time() - started >= 0.04
            assert await snapshot(store) == before


async def test_two_connections_share_one_authority_namespace(db_path):
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)) as a, open_store(url_of(db_path)) as b:
            owner = await claim(a, "node-a", lease=100.0)
            fence = await reserve(b, owner, "r-1")
            with pytest.raises(AuthorityExists):
                await reserve(a, owner, "r-1")
            record = await a.location.commit_ready(fence, now=1.0)
            assert await b.location.find("r-1") == record
            assert record.mesh == MESH


async def test_closed_store_refuses_calls(db_path):
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)) as store:
            pass
        with pytest.raises(Unavailable, match="closed"):
            await store.location.find("r-1")


def test_blocker_really_blocks(db_path):
    # Guard for the tests above: a BEGIN IMMEDIATE elsewhere makes ours busy.
    sqlite3.connect(db_path).close()
    holder = sqlite3.connect(db_path, isolation_level=None)
    other = sqlite3.connect(db_path, isolation_level=None, timeout=0)
    try:
        holder.execute("PRAGMA journal_mode = WAL")
        holder.execute("BEGIN IMMEDIATE")
        start = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
        assert time.monotonic() - start < 1.0
    finally:
        holder.close()
        other.close()


async def test_inline_dispatch_moves_large_payloads_to_the_thread(db_path, monkeypatch):
    hops = []
    real = trio.to_thread.run_sync

    async def counting(fn, *args, **kwargs):
        hops.append(fn)
        return await real(fn, *args, **kwargs)

    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path, dispatch="inline")) as store:
            monkeypatch.setattr(trio.to_thread, "run_sync", counting)
            small = await store.relocation.put_root(b"small")
            assert hops == []  # uncontended, small: inline
            big = bytes(300 * 1024)
            receipt = await store.relocation.put_root(big)
            assert await store.relocation.get_root(receipt) == big
            assert await store.relocation.get_root(small) == b"small"
            assert len(hops) == 2  # the large put and the large get


async def test_a_claim_stored_before_close_placement_existed_still_opens_and_accepts(db_path):
    # A claim of the previous layout is its JSON with exactly these four keys; a file
    # holding one opens, the claim accepts placements, and ClosePlacement adds the one
    # optional key without a schema migration (an older release can still open the file).
    old_keys = {"descriptor", "lifecycleGeneration", "leaseExpiresAt", "storeVersion"}
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)) as store:
            c = await claim(store, "node-a", lease=100.0)
        conn = sqlite3.connect(db_path)
        body = json.loads(conn.execute("SELECT body FROM loc_claims").fetchone()[0])
        conn.execute("UPDATE loc_claims SET body = ?",
                     (json.dumps({k: body[k] for k in old_keys}),))
        conn.commit()
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.close()
        async with open_store(url_of(db_path)) as store:
            assert await store.location.descriptors(now=0.0) == [c]
            assert await store.location.close_placement(MESH, c.descriptor.node_rid, 1)
        conn = sqlite3.connect(db_path)
        body = json.loads(conn.execute("SELECT body FROM loc_claims").fetchone()[0])
        assert conn.execute("PRAGMA user_version").fetchone()[0] == version
        conn.close()
        assert set(body) == old_keys | {"acceptsPlacements"}
        assert body["acceptsPlacements"] is False
        async with open_store(url_of(db_path)) as store:
            (closed,) = await store.location.descriptors(now=0.0)
            assert closed.accepts_placements is False

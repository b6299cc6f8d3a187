"""SQLite fast paths against the general path: row cache, record UPDATEs, codec, reads.

``zlink_trio/store/sqlite/rowcache.py`` keeps rows between a connection's write
transactions while no other connection commits; ``view.py`` writes a known record
row with an ``UPDATE``; ``codec.encode_record`` builds a record's text without
``to_json``'s dict. Each is held here to the general path it replaces: the same
outcomes as a store whose cache is off, the rows another connection wrote or a
rollback undid never served from the cache, the columns of every record row equal
to its body, and the same text as ``dumps(record.to_json())``. A read that meets a
leader gathering its group (``connection.py``) runs at once instead of waiting for the
limiter; it sees the state before the group or, when it cannot run at once, waits its
turn as every read did.
"""

from __future__ import annotations

import json
import random
import sqlite3
from typing import TYPE_CHECKING

import pytest
import trio
from store_helpers import MESH, claim, reserve
from test_sqlite_backend import url_of

from zlink_trio.core.errors import StaleFence, ZLinkError
from zlink_trio.core.identity import NodeRid, SpotKind, new_entry_spot_id
from zlink_trio.core.placement import reminder_partition
from zlink_trio.core.records import (
    AuthorityRecord,
    AuthorityState,
    CreationIntent,
    OwnerFence,
    RecoveryPointer,
    RootReceipt,
)
from zlink_trio.store import AuthorityExists, MembersRemain, open_store
from zlink_trio.store.rules import location as loc
from zlink_trio.store.sqlite.codec import (
    REMINDER_COLUMNS,
    decode_reminder,
    dumps,
    encode_record,
)
from zlink_trio.store.sqlite.errors import Busy
from zlink_trio.store.sqlite.view import LocationView

if TYPE_CHECKING:
    from zlink_trio.store.values import StoredReminder

TIMEOUT = 20
SHA = "ab" * 32
ENTRY = new_entry_spot_id("node-a", lambda n: bytes(range(n)))
ENTRY_B = new_entry_spot_id("node-b", lambda n: bytes(range(1, n + 1)))
ROOM = "room-0"


def _records():
    owner, target = OwnerFence(NodeRid(bytes(range(16))), 3), OwnerFence(NodeRid(b"\1" * 16), 9)
    intent = CreationIntent(content_ref="c-1", sha256=SHA, size=12)
    pointer = RecoveryPointer(root_ref=f"sha256:{SHA}", sha256=SHA, size=300, version=1)
    payload = RootReceipt(ref=f"sha256:{SHA}", sha256=SHA, size=41)
    base = {"spot_id": "r-1", "kind": SpotKind.USER, "stable_type": "room", "mesh": "world",
            "object_generation": 5, "owner_generation": 2, "store_version": 7, "owner": owner}
    yield AuthorityRecord(**base, state=AuthorityState.CREATING, creation_intent=intent)
    yield AuthorityRecord(**{**base, "kind": SpotKind.INSTANCE}, state=AuthorityState.CREATING,
                          recovery_pointer=pointer)
    for state in AuthorityState:
        moving = state in (AuthorityState.RELOCATING, AuthorityState.SEALED,
                           AuthorityState.RELAY_READY)
        for kept in (pointer, None):
            try:
                record = AuthorityRecord(**base, state=state, recovery_pointer=kept,
                                         relocation_target=target if moving else None)
            except ZLinkError:
                continue  # a state that keeps no pointer
            yield record
    yield AuthorityRecord(**{**base, "spot_id": 'é "q" \\ \u2028 x', "mesh": "wörld",
                             "stable_type": "t\u00e9\t"}, state=AuthorityState.READY)
    yield AuthorityRecord(**{**base, "object_generation": 2**63 - 1, "store_version": 1},
                          state=AuthorityState.CLOSING)
    # An Actor's record: the one with a "container" key, in every state and shape; a
    # moving one's also has "nextContainer" (its container at the target), after it.
    actor = {**base, "kind": SpotKind.ACTOR, "stable_type": "player"}
    for state in AuthorityState:
        if state is AuthorityState.MISSING:  # the absence of a record
            continue
        moving = state in (AuthorityState.RELOCATING, AuthorityState.SEALED,
                           AuthorityState.RELAY_READY)
        yield AuthorityRecord(**actor, state=state, container="room-1",
                              creation_intent=intent if state is AuthorityState.CREATING
                              else None, relocation_target=target if moving else None,
                              next_container="room-2" if moving else None)
    yield AuthorityRecord(**{**actor, "spot_id": "p \u00e9"}, state=AuthorityState.READY,
                          container='r\u00f6\"om \\ \u2028', recovery_pointer=pointer)
    for state in (AuthorityState.SEALED, AuthorityState.RELAY_READY):  # past the capture
        yield AuthorityRecord(**{**actor, "spot_id": "p \u00e9"}, state=state,
                              container='r\u00f6\"om \\ \u2028', recovery_pointer=pointer,
                              relocation_target=target, relocation_payload=payload,
                              next_container='n\u00e9xt "\\" \u2029')


def test_encode_record_is_dumps_of_to_json():
    seen, actors, moving = 0, 0, 0
    for record in _records():
        assert encode_record(record) == dumps(record.to_json())
        assert AuthorityRecord.from_json(json.loads(encode_record(record))) == record
        seen += 1
        actors += record.kind is SpotKind.ACTOR
        moving += record.next_container is not None
    assert seen >= 6
    assert actors >= 2
    assert moving >= 5


def _open(path, *, cache: bool, dispatch: str = "inline"):
    class Opened:
        async def __aenter__(self):
            self._cm = open_store(url_of(path, dispatch=dispatch))
            store = await self._cm.__aenter__()
            store.location._db.cache.enabled = cache
            return store

        async def __aexit__(self, *exc):
            return await self._cm.__aexit__(*exc)
    return Opened()


def _rows_match_bodies(path) -> int:
    """Every loc_records row's columns are what its body says; returns the row count."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT spot_id, state, mesh, owner_rid, owner_lifecycle, "
                            "object_generation, container, next_container, body "
                            "FROM loc_records").fetchall()
    finally:
        conn.close()
    for spot_id, state, mesh, rid, lifecycle, generation, container, after, body in rows:
        record = AuthorityRecord.from_json(json.loads(body))
        assert (spot_id, state, mesh, rid, lifecycle, generation, container, after) == (
            record.spot_id, record.state.value, record.mesh, str(record.owner.node_rid),
            record.owner.lifecycle_generation, record.object_generation, record.container,
            record.next_container)
    return len(rows)


def _reminder_rows(path) -> dict[tuple[str, str], StoredReminder]:
    """Every loc_reminders row, checked: its partition and wake columns are what the
    reminder it holds says."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(f"SELECT {REMINDER_COLUMNS} FROM loc_reminders").fetchall()
    finally:
        conn.close()
    found = {}
    for row in rows:
        reminder = decode_reminder(row)
        assert (row[3], row[-1]) == (reminder_partition(reminder.spot_id), reminder.wake)
        found[reminder.spot_id, reminder.name] = reminder
    return found


def _plain(result: object) -> object:
    """An outcome without its ObjectGenerations (the order of a batch decides those)."""
    if isinstance(result, AuthorityRecord):
        return {k: v for k, v in result.to_json().items() if k != "objectGeneration"}
    if isinstance(result, tuple | list):
        return tuple(_plain(part) for part in result)
    if hasattr(result, "object_generation"):  # a fence
        return (type(result).__name__, result.spot_id)
    return result


async def _mixed(store, seed: int) -> list[list[object]]:
    """Batches of eight calls at once (so group commits form) on eight distinct Spot IDs:
    cold activations, repeated commits, closes, releases, inbox calls, and Actors created
    on the Entry Spot that join and leave a room (several members of one container in
    one group) or move to node-b's Entry Spot and back, a step at a time (begun, aborted,
    committed). Returns each batch's outcomes, sorted (within a batch no two calls touch
    the same ID)."""
    owner = (await claim(store, "node-a", lease=1e6, capacity=50,
                         node_rid=NodeRid(b"\7" * 16), entry=ENTRY)).owner()
    other = (await claim(store, "node-b", lease=1e6, capacity=50,
                         node_rid=NodeRid(b"\10" * 16), entry=ENTRY_B)).owner()
    entries = {owner: ENTRY, other: ENTRY_B}
    await store.location.commit_ready(await reserve(store, owner, ROOM), now=1.0)
    fences: dict[str, tuple[object, object]] = {}
    batches: list[list[object]] = []

    async def one(rng: random.Random, spot: str, outcomes: list[object]) -> None:
        try:
            action = rng.randrange(8)
            if action <= 1:
                fence, receipt = await store.combined.reserve_with_root(
                    spot, f"root-{spot}".encode(), kind=SpotKind.INSTANCE,
                    stable_type="counter", mesh=MESH, owner=owner, now=1.0)
                fences[spot] = (fence, receipt)
                result: object = fence
                if action == 1:
                    ready, seq = await store.combined.commit_ready_with_first_record(
                        fence, b"first", now=1.0)
                    result = (ready, seq, await store.combined.finish_first_record(
                        spot, fence.object_generation, seq=seq,
                        expected_version=ready.store_version, root=receipt))
            elif action == 2 and spot in fences:
                fence, receipt = fences[spot]
                result = await store.combined.commit_ready_with_first_record(
                    fence, b"again", now=1.0)
            elif action == 3:
                record = await store.location.find(spot)
                result = None if record is None else await store.location.begin_close(
                    spot, object_generation=record.object_generation, owner=owner, now=2.0)
            elif action == 4:
                record = await store.location.find(spot)
                result = None if record is None else await store.location.release(
                    record.fence())
            elif action >= 6:  # an Actor: created on the Entry Spot, then moves between two
                record = await store.location.find(spot)
                if record is None:
                    result = await store.location.commit_ready(await reserve(
                        store, owner, spot, kind=SpotKind.ACTOR, stable_type="player",
                        container=ENTRY, now=1.0), now=1.0)
                elif action == 7 and record.kind is SpotKind.ACTOR:
                    result = await _move_step(store, record, entries, rng)
                else:  # refused unless an Actor (on node-a, Ready)
                    result = await store.location.move_membership(
                        spot, object_generation=record.object_generation, owner=owner,
                        container=ROOM if record.container == ENTRY else ENTRY, now=1.0)
            else:
                record = await store.location.find(spot)
                key = (spot, 1 if record is None else record.object_generation)
                result = (await store.relocation.inbox_append(*key, b"x"),
                          await store.relocation.inbox_set_cursor(*key, 1),
                          await store.relocation.inbox_cursor(*key))
        except (ZLinkError, AuthorityExists) as error:
            result = type(error).__name__
        outcomes.append((spot, action, _plain(result)))

    rng = random.Random(seed)
    for _ in range(20):
        outcomes: list[object] = []
        async with trio.open_nursery() as nursery:
            for spot in rng.sample([f"m-{i}" for i in range(12)], 8):
                nursery.start_soon(one, random.Random(rng.random()), spot, outcomes)
        batches.append(sorted(outcomes, key=repr))
    return batches


async def _move_step(store, record: AuthorityRecord, entries: dict[OwnerFence, str],
                     rng: random.Random) -> object:
    """One step of an Actor's move to the other node's Entry Spot: a Ready Actor begins
    it; a Relocating one aborts it, or seals, accepts relay-ready and commits."""
    if record.state is AuthorityState.READY:
        target = next(o for o in entries if o != record.owner)
        return await store.location.begin_relocation(record.fence(), target=target, now=1.0,
                                                     container=entries[target])
    if record.state is not AuthorityState.RELOCATING:
        return record.state.value
    if rng.randrange(2):
        return await store.location.abort_relocation(record.fence())
    target = record.relocation_target
    sealed = await store.location.seal_relocation(record.fence(), now=1.0)
    relay = await store.location.accept_relay_ready(sealed.fence(), target=target, now=1.0)
    return await store.location.commit_relocation(relay.fence(), now=1.0)


@pytest.mark.parametrize("dispatch", ["inline", "thread"])
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_cached_and_uncached_stores_agree(tmp_path, dispatch, seed):
    results = {}
    with trio.fail_after(TIMEOUT):
        for cache in (True, False):
            path = tmp_path / f"{cache}.db"
            async with _open(path, cache=cache, dispatch=dispatch) as store:
                batches = await _mixed(store, seed)
                found = [_plain(await store.location.find(f"m-{i}")) for i in range(12)]
                found += [_plain(await store.location.members(c))
                          for c in (ENTRY, ROOM, ENTRY_B)]
                room = await store.location.find(ROOM)
                try:  # refused while the room has a member
                    found.append(_plain(await store.location.begin_close(
                        ROOM, object_generation=room.object_generation, owner=room.owner,
                        now=2.0)))
                except MembersRemain as refused:
                    found.append(("MembersRemain", refused.members))
                results[cache] = (batches, found, await store.location.statistics(),
                                  await store.relocation.statistics())
            assert _rows_match_bodies(path) > 1
    assert results[True] == results[False]
    assert any(results[True][1][12:15])  # some Actor was a member at the end
    assert "nextContainer" in repr(results[True][0])  # and some Actor moved


async def test_another_connections_write_is_never_served_from_the_cache(tmp_path):
    path = tmp_path / "other.db"
    with trio.fail_after(TIMEOUT):
        async with _open(path, cache=True) as store:
            owner = await claim(store, "node-a", lease=1e6, capacity=5)
            fence = await reserve(store, owner, "o-1")  # the Creating record is now cached
            other = sqlite3.connect(path, isolation_level=None)
            try:
                other.execute("DELETE FROM loc_records WHERE spot_id = 'o-1'")
            finally:
                other.close()
            with pytest.raises(StaleFence):  # the table's truth, not the cached record
                await store.location.commit_ready(fence, now=0.0)
            fence = await reserve(store, owner, "o-1")  # and the ID is free again
            assert (await store.location.commit_ready(fence, now=0.0)).state.value == "ready"


async def test_a_rolled_back_write_leaves_nothing_in_the_cache(tmp_path):
    path = tmp_path / "rollback.db"
    with trio.fail_after(TIMEOUT):
        async with _open(path, cache=True) as store:
            owner = (await claim(store, "node-a", lease=1e6, capacity=5)).owner()
            db = store.location._db

            def reserve_then_fail(conn):
                view = LocationView(conn)
                loc.txn_reserve(view.state, "rb-1", kind=SpotKind.USER, stable_type="room",
                                mesh=MESH, owner=owner, now=0.0)
                view.flush()  # written (and cached) ...
                raise RuntimeError("after the write")  # ... then rolled back

            for together in (1, 3):  # alone, and in a group beside two others
                async def failing():
                    with pytest.raises(RuntimeError):
                        await db.write(reserve_then_fail)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(failing)
                    for i in range(together - 1):
                        nursery.start_soon(reserve, store, owner, f"peer-{together}-{i}")
                assert await store.location.find("rb-1") is None
                fence = await reserve(store, owner, "rb-1")  # not AuthorityExists
                assert await store.location.abort_creating(fence)


async def test_an_activation_reads_each_row_once(tmp_path):
    path = tmp_path / "count.db"
    with trio.fail_after(TIMEOUT):
        async with _open(path, cache=True) as store:
            owner = (await claim(store, "node-a", lease=1e6, capacity=5)).owner()
            statements: list[str] = []
            store.location._db._conn.set_trace_callback(statements.append)
            fence, receipt = await store.combined.reserve_with_root(
                "c-1", b"root", kind=SpotKind.INSTANCE, stable_type="counter", mesh=MESH,
                owner=owner, now=1.0)
            ready, seq = await store.combined.commit_ready_with_first_record(fence, b"r",
                                                                             now=1.0)
            done = await store.combined.finish_first_record(
                "c-1", fence.object_generation, seq=seq, expected_version=ready.store_version,
                root=receipt)
            store.location._db._conn.set_trace_callback(None)
    assert (done.cursor_moved, done.pointer_removed, done.root_deleted) == (True, True, True)
    selects = [s for s in statements if s.startswith("SELECT")]
    # Reserve reads the record (absent); nothing later reads a row written before.
    assert [s for s in selects if "loc_records" in s or "rel_" in s] == [
        "SELECT body FROM loc_records WHERE spot_id = 'c-1'"]
    assert _rows_match_bodies(path) == 2  # the Entry record and c-1


async def test_a_containers_members_are_one_range_of_each_membership_index(tmp_path):
    # Reserve into a container, MoveMembership (both containers), BeginClose, an Actor's
    # move (its next container at begin and at abort) and members read a container's
    # members with one SELECT each: a range of loc_records_container and one of
    # loc_records_next_container (no scan, no sort); a Spot's activation reads none.
    path = tmp_path / "members.db"
    with trio.fail_after(TIMEOUT):
        async with _open(path, cache=True) as store:
            owner = (await claim(store, "node-a", lease=1e6, capacity=5, entry=ENTRY)).owner()
            other = (await claim(store, "node-b", lease=1e6, capacity=5, entry=ENTRY_B)).owner()
            statements: list[str] = []
            store.location._db._conn.set_trace_callback(statements.append)
            room = await store.location.commit_ready(await reserve(store, owner, ROOM), now=1.0)
            spot_reads = [s for s in statements if s.startswith("SELECT") and "container" in s]
            actor = await store.location.commit_ready(await reserve(
                store, owner, "p-1", kind=SpotKind.ACTOR, stable_type="player",
                container=ENTRY), now=1.0)
            await store.location.move_membership(
                "p-1", object_generation=actor.object_generation, owner=owner,
                container=ROOM, now=1.0)
            with pytest.raises(MembersRemain):
                await store.location.begin_close(
                    ROOM, object_generation=room.object_generation, owner=owner, now=1.0)
            assert [r.spot_id for r in await store.location.members(ROOM)] == ["p-1"]
            moving = await store.location.begin_relocation(
                actor.fence(), target=other, now=1.0, container=ENTRY_B)
            assert await store.location.members(ENTRY_B) == [moving]
            await store.location.abort_relocation(moving.fence())
            store.location._db._conn.set_trace_callback(None)
    assert spot_reads == []
    ranges = [s for s in statements if s.startswith("SELECT") and "container" in s]
    # Reserve, Move (from and to), BeginClose, members, the move's begin (the moving
    # record's own members -- a Spot with members does not move -- and its next
    # container's), members, abort.
    assert len(ranges) == 9
    conn = sqlite3.connect(path)
    try:
        for statement in ranges:
            plan = " ".join(row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}"))
            searches = [part.strip() for part in plan.split("SEARCH")[1:]]
            assert len(searches) == 2, (statement, plan)
            assert searches[0].startswith("loc_records USING "), (statement, plan)
            assert "INDEX loc_records_container (container=?)" in searches[0], (statement, plan)
            assert searches[1].startswith("loc_records USING "), (statement, plan)
            assert "INDEX loc_records_next_container (next_container=?)" in searches[1], (
                statement, plan)
            assert "SCAN" not in plan, (statement, plan)
            assert "TEMP B-TREE" not in plan, (statement, plan)
    finally:
        conn.close()
    # The Entry records, the room, the Actor (its columns named the next container while
    # it moved, and name none again after the abort).
    assert _rows_match_bodies(path) == 4


@pytest.mark.parametrize("busy", [False, True])
async def test_a_read_beside_a_gathering_group(tmp_path, busy, monkeypatch):
    path = tmp_path / "gather.db"
    with trio.fail_after(TIMEOUT):
        async with _open(path, cache=True) as store:
            owner = await claim(store, "node-a", lease=1e6, capacity=60)
            db = store.location._db
            waited: list[bool] = []
            real = db._read

            def read(body, single, *, wait=True):
                waited.append(wait)
                if busy and not wait:  # the attempt at once meets another connection's lock
                    raise Busy
                return real(body, single, wait=wait)
            monkeypatch.setattr(db, "_read", read)
            for attempt in range(50):  # until this task runs inside a leader's gathering
                done: list[object] = []

                async def one(spot_id: str, done: list[object] = done) -> None:
                    done.append(await reserve(store, owner, spot_id))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(one, f"g-{attempt}")
                    while not db._gathering and not done:
                        await trio.lowlevel.checkpoint()
                    if not db._gathering:
                        continue
                    waited.clear()
                    record = await store.location.find(f"g-{attempt}")
                break
            else:
                pytest.fail("never met a gathering leader")
            if busy:  # tried at once, then waited its turn: after the group committed
                assert waited == [False, False, True]
                assert record.state.value == "creating"
            else:  # at once, without the limiter: before the group committed
                assert waited == [False]
                assert record is None
            assert (await store.location.find(f"g-{attempt}")).state.value == "creating"


@pytest.mark.parametrize("cache", [True, False])
async def test_a_release_deletes_a_user_spots_reminder_rows(tmp_path, cache):
    # Release runs the oracle over the view, whose reminders are written back: with the
    # row cache on (the record served from it) or off, a User Spot's rows go with its
    # record, an Instance Spot's stay.
    path = tmp_path / f"release-{cache}.db"
    with trio.fail_after(TIMEOUT):
        async with _open(path, cache=cache) as store:
            owner = await claim(store, "node-a", lease=1e6, capacity=5)
            location = store.location
            kept = {}
            for spot_id, kind, stable_type in (("room-1", SpotKind.USER, "room"),
                                               ("counter-1", SpotKind.INSTANCE, "counter")):
                record = await location.commit_ready(await reserve(
                    store, owner, spot_id, kind=kind, stable_type=stable_type), now=0.0)
                for name, period in (("tick", None), ("tock", 5.0)):
                    kept[spot_id, name] = await location.set_reminder(
                        record.fence(), name, due=1.0, period=period, now=0.0)
                assert _reminder_rows(path) == kept
                closing = await location.begin_close(
                    spot_id, object_generation=record.object_generation,
                    owner=owner.owner(), now=0.0)
                assert await location.release(closing.fence()) is True
                if kind is SpotKind.USER:
                    del kept[spot_id, "tick"], kept[spot_id, "tock"]
                assert _reminder_rows(path) == kept
            assert list(kept) == [("counter-1", "tick"), ("counter-1", "tock")]


async def test_a_take_with_nothing_due_takes_no_write_lock(tmp_path):
    # Every node looks for due reminders several times a second: with nothing due the
    # take is a read (no BEGIN IMMEDIATE), so a process frozen in it blocks no writer.
    path = tmp_path / "idle.db"
    with trio.fail_after(TIMEOUT):
        async with _open(path, cache=True) as store:
            owner = await claim(store, "node-a", lease=1e6)
            location = store.location
            record = await location.commit_ready(await reserve(
                store, owner, "counter-1", kind=SpotKind.INSTANCE, stable_type="counter"),
                now=0.0)
            await location.set_reminder(record.fence(), "tick", due=50.0, period=None,
                                        now=0.0)
            statements: list[str] = []
            location._db._conn.set_trace_callback(statements.append)
            assert await location.take_due_reminders(
                MESH, list(range(64)), owner.owner(), now=10.0, hold=5.0, limit=10) == []
            location._db._conn.set_trace_callback(None)
    assert not [s for s in statements if s.startswith(("BEGIN IMMEDIATE", "INSERT", "UPDATE",
                                                       "DELETE"))], statements


async def test_a_take_reads_only_due_rows_of_its_partitions_from_the_wake_index(tmp_path):
    # A take's candidates are one covering range of loc_reminders_wake per partition
    # (mesh, part, wake <= now): no table scan; its rows -- and every write after it --
    # keep the partition and wake columns equal to the reminders they hold.
    path = tmp_path / "take.db"
    with trio.fail_after(TIMEOUT):
        async with _open(path, cache=True) as store:
            owner = await claim(store, "node-a", lease=1e6, capacity=8)
            location = store.location
            spots = [f"counter-{i}" for i in range(6)]
            for i, spot_id in enumerate(spots):
                record = await location.commit_ready(await reserve(
                    store, owner, spot_id, kind=SpotKind.INSTANCE, stable_type="counter"),
                    now=0.0)
                await location.set_reminder(record.fence(), "tick", due=float(i), period=2.0,
                                            now=0.0)
            parts = sorted({reminder_partition(s) for s in spots[:3]})
            statements: list[str] = []
            location._db._conn.set_trace_callback(statements.append)
            taken = await location.take_due_reminders(MESH, parts, owner.owner(), now=10.0,
                                                      hold=5.0, limit=10)
            location._db._conn.set_trace_callback(None)
            assert {r.spot_id for r in taken} == {s for s in spots
                                                  if reminder_partition(s) in parts}
            rows = _reminder_rows(path)
            assert all(rows[r.spot_id, "tick"] == r for r in taken)
            for reminder in taken:
                assert await location.reminder_done(reminder, now=10.0) is True
            assert {r.due for r in _reminder_rows(path).values()
                    if reminder_partition(r.spot_id) in parts} == {11.0, 12.0}
    # The read that finds something due, then the write transaction that takes it.
    read, scan = [s for s in statements if s.startswith("SELECT spot_id, name FROM loc_reminders")]
    assert read == scan
    conn = sqlite3.connect(path)
    try:
        plan = " ".join(row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {scan}"))
    finally:
        conn.close()
    assert ("SEARCH loc_reminders USING COVERING INDEX loc_reminders_wake "
            "(mesh=? AND part=? AND wake<?)") in plan, plan
    assert "SCAN" not in plan, plan

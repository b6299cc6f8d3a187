"""SQLite group commit: concurrent writes share one transaction, each keeps its own outcome.

Writes made in the same scheduling tick on ``dispatch=inline`` run in one
``BEGIN IMMEDIATE … COMMIT``, each under its own savepoint
(``zlink_trio/store/sqlite/connection.py``, *Group commit*). What a caller can observe:
every write gets exactly the outcome it would get alone, a refused write leaves
nothing behind while its peers commit, a caller cancelled before its group started
wrote nothing, and another connection's lock sends the whole group to the thread.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from store_helpers import claim, descriptor, ready, reserve, units
from test_sqlite_backend import Blocker, url_of
from test_sqlite_fast_paths import _rows_match_bodies

from zlink_trio.core.errors import CapacityExceeded, Unavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.store import AuthorityExists, MembersRemain, open_store

TIMEOUT = 10


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "group.db"


async def test_concurrent_writes_commit_together_and_a_refused_one_alone_rolls_back(db_path):
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)) as store:
            owner = await claim(store, "node-a", lease=100.0, capacity=3)
            db = store.location._db
            groups, grouped = db.groups, db.grouped
            outcomes: list[tuple[str, object]] = []

            async def one(spot_id: str) -> None:
                try:
                    outcomes.append((spot_id, await reserve(store, owner, spot_id)))
                except (AuthorityExists, CapacityExceeded) as error:
                    outcomes.append((spot_id, error))

            async with trio.open_nursery() as nursery:
                for spot_id in ("g-1", "g-2", "g-1", "g-3", "g-4"):  # g-1 twice; capacity 3
                    nursery.start_soon(one, spot_id)
            assert db.grouped - grouped == 5
            assert db.groups - groups < 5  # some shared a transaction
            won = {s: o for s, o in outcomes if not isinstance(o, Exception)}
            refused = sorted((s, type(o).__name__) for s, o in outcomes
                             if isinstance(o, Exception))
            # Capacity 3 (the Entry claim is not counted) and g-1 asked twice; Trio
            # may start the five in any order. Each outcome is exactly as if run alone,
            # in arrival order: three win; a g-1 after a winning g-1 meets it as
            # AuthorityExists; whatever comes once the node is full is CapacityExceeded.
            assert len(won) == 3
            assert len(refused) == 2
            if "g-1" in won:
                assert ("g-1", "AuthorityExists") in refused
            else:
                assert refused == [("g-1", "CapacityExceeded"), ("g-1", "CapacityExceeded")]
            assert (await store.location.statistics()).creating == 3
            for spot_id, fence in won.items():
                record = await store.location.find(spot_id)
                assert record is not None
                assert record.object_generation == fence.object_generation
            for spot_id, kind in refused:
                if kind == "CapacityExceeded":
                    assert await store.location.find(spot_id) is None


async def test_a_refused_write_in_a_group_does_not_touch_its_peers(db_path):
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)) as store:
            owner = await claim(store, "node-a", lease=100.0, capacity=10)
            await reserve(store, owner, "taken")
            results: list[object] = []

            async def one(spot_id: str) -> None:
                try:
                    results.append(await reserve(store, owner, spot_id))
                except AuthorityExists as error:
                    results.append(error)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(one, "a")
                nursery.start_soon(one, "taken")  # refused in the middle of the group
                nursery.start_soon(one, "b")
            assert sum(isinstance(r, AuthorityExists) for r in results) == 1
            assert (await store.location.statistics()).creating == 3
            generations = [(await store.location.find(s)).object_generation for s in "ab"]
            assert len(set(generations)) == 2


async def _membership_calls(store, desc, *, together: list[str] | None = None,
                            order: list[str] | None = None) -> dict[str, object]:
    """A room with one member, p-0; then p-1 and p-2 join it, p-0 leaves and the room is
    closed: all at once (``together`` records the order the calls reached the store), or
    one after the other in ``order``. The outcome of each call, as a comparable value."""
    c = await store.location.new_claim(desc, now=0.0, lease=100.0)
    owner, entry = c.owner(), desc.entry_spot_id
    room = await ready(store, c, "room-1")
    first = await store.location.commit_ready(await reserve(
        store, c, "p-0", kind=SpotKind.ACTOR, stable_type="player", container="room-1"),
        now=0.0)
    calls = {
        "p-1": lambda: reserve(store, c, "p-1", kind=SpotKind.ACTOR, stable_type="player",
                               container="room-1"),
        "p-2": lambda: reserve(store, c, "p-2", kind=SpotKind.ACTOR, stable_type="player",
                               container="room-1"),
        "leave": lambda: store.location.move_membership(
            "p-0", object_generation=first.object_generation, owner=owner, container=entry,
            now=0.0),
        "close": lambda: store.location.begin_close(
            "room-1", object_generation=room.object_generation, owner=owner, now=0.0),
    }
    outcomes: dict[str, object] = {}

    async def one(name: str) -> None:
        if together is not None:
            together.append(name)  # the call queues its write before it first yields
        try:
            result = await calls[name]()
        except (MembersRemain, Unavailable) as error:
            outcomes[name] = (type(error).__name__, getattr(error, "members", None))
        else:
            outcomes[name] = result.to_json() if hasattr(result, "to_json") else result

    if order is None:
        async with trio.open_nursery() as nursery:
            for name in calls:
                nursery.start_soon(one, name)
    else:
        for name in order:
            await one(name)
    for container in ("room-1", entry):
        outcomes[container] = [r.to_json() for r in await store.location.members(container)]
    return outcomes


async def test_a_body_sees_the_memberships_its_group_wrote_before_it(db_path):
    # Actors joining a room, one leaving it and a close of the room, in one tick: each
    # body reads the container's members from the rows the bodies before it wrote (the
    # container column, inside the group's transaction), so every outcome is the
    # memory oracle's for the same calls one after the other, in arrival order.
    desc = descriptor("node-a", capacity=10)
    arrived: list[str] = []
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)) as store:
            db = store.location._db
            groups, grouped = db.groups, db.grouped
            outcomes = await _membership_calls(store, desc, together=arrived)
            # Five set-up writes one after the other, then the four calls: some of those
            # shared a transaction.
            assert db.grouped - grouped == 5 + 4
            assert db.groups - groups < 5 + 4
        async with open_store("memory://") as oracle:
            assert outcomes == await _membership_calls(oracle, desc, order=arrived)
    assert _rows_match_bodies(db_path) == 3 + len(outcomes["room-1"]) - (
        "p-0" in [r["spotId"] for r in outcomes["room-1"]])


async def test_callers_cancelled_before_their_group_ran_wrote_nothing(db_path):
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path, busy_timeout=5)) as store:
            owner = await claim(store, "node-a", lease=100.0)
            scopes = {name: trio.CancelScope() for name in ("q-2", "q-3", "q-4")}
            cancelled: list[str] = []

            async def queued(spot_id: str) -> None:
                with scopes[spot_id]:
                    await reserve(store, owner, spot_id)
                if scopes[spot_id].cancelled_caught:
                    cancelled.append(spot_id)

            async with Blocker(db_path) as blocker, trio.open_nursery() as nursery:
                nursery.start_soon(reserve, store, owner, "q-1")  # its group waits in the thread
                await trio.testing.wait_all_tasks_blocked()
                for spot_id in ("q-2", "q-3", "q-4"):  # q-2 leads the next group, waiting
                    nursery.start_soon(queued, spot_id)
                await trio.testing.wait_all_tasks_blocked()
                scopes["q-2"].cancel()  # the waiting leader: q-3 takes the lead over
                scopes["q-4"].cancel()  # a queued follower
                await trio.testing.wait_all_tasks_blocked()
                assert sorted(cancelled) == ["q-2", "q-4"]
                blocker.release()
            assert await store.location.find("q-1") is not None
            assert await store.location.find("q-3") is not None  # led by the new leader
            assert await store.location.find("q-2") is None
            assert await store.location.find("q-4") is None


async def test_a_group_meeting_another_connections_lock_fails_whole(db_path):
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path, busy_timeout=0.05)) as store:
            owner = await claim(store, "node-a", lease=100.0)
            failures: list[Unavailable] = []

            async def one(spot_id: str) -> None:
                try:
                    await reserve(store, owner, spot_id)
                except Unavailable as error:
                    failures.append(error)

            async with Blocker(db_path), trio.open_nursery() as nursery:
                for spot_id in ("l-1", "l-2", "l-3"):
                    nursery.start_soon(one, spot_id)
            assert len(failures) == 3
            assert all("locked" in str(f) for f in failures)
            assert (await store.location.statistics()).creating == 0
            await reserve(store, owner, "l-1")  # the store serves again


async def test_a_body_rolled_back_after_its_writes_leaves_the_shared_rows_as_they_were(db_path):
    # The bodies of a group share the sequence and capacity rows (view.GroupRows); one
    # that fails after writing them must leave them as if it had never run.
    from zlink_trio.core.identity import SpotKind
    from zlink_trio.store.rules import location as loc
    from zlink_trio.store.sqlite.view import LocationView

    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)) as store:
            owner = await claim(store, "node-a", lease=100.0, capacity=10)
            fence = owner.owner()
            db = store.location._db
            groups = db.groups
            fences: list[object] = []

            def failing(conn: object) -> None:
                view = LocationView(conn)  # type: ignore[arg-type]
                loc.txn_reserve(view.state, "lost", kind=SpotKind.USER, stable_type="room",
                                mesh=owner.descriptor.mesh, owner=fence, now=0.0)
                view.flush()
                raise RuntimeError("after the writes")

            async def bad() -> None:
                with pytest.raises(RuntimeError, match="after the writes"):
                    await db.write(failing)

            async def good(spot_id: str) -> None:
                fences.append(await reserve(store, owner, spot_id))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(good, "x-1")
                nursery.start_soon(bad)
                nursery.start_soon(good, "x-2")
            assert db.groups - groups == 1  # all three in one group
            assert await store.location.find("lost") is None
            assert (await units(store, owner)) == (2, 0)
            generations = sorted(f.object_generation for f in fences)  # type: ignore[attr-defined]
            assert generations[1] == generations[0] + 1  # the lost one's was never issued
            later = await reserve(store, owner, "x-3")
            assert later.object_generation == generations[1] + 1
            assert (await units(store, owner)) == (3, 0)


async def test_a_checks_first_body_failing_after_its_writes_fails_its_whole_group(db_path):
    # A body that promises to check before it writes runs without a savepoint; should
    # it fail after writing anyway, nothing of its group may be written.
    with trio.fail_after(TIMEOUT):
        async with open_store(url_of(db_path)) as store:
            owner = await claim(store, "node-a", lease=100.0, capacity=10)
            db = store.location._db
            groups = db.groups
            errors: list[BaseException] = []

            def broken(conn: object) -> None:
                conn.execute("INSERT INTO rel_roots VALUES ('half', x'00')")  # type: ignore[attr-defined]
                raise RuntimeError("after a write")

            async def bad() -> None:
                try:
                    await db.write(broken, checks_first=True)
                except RuntimeError as error:
                    errors.append(error)

            async def good(spot_id: str) -> None:
                try:
                    await reserve(store, owner, spot_id)
                except RuntimeError as error:
                    errors.append(error)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(good, "y-1")
                nursery.start_soon(bad)
                nursery.start_soon(good, "y-2")
            assert db.groups - groups == 1  # the three ran as one group, which failed whole
            assert len(errors) == 3  # every caller was told
            assert await store.location.find("y-1") is None
            assert await store.location.find("y-2") is None
            assert (await units(store, owner)) == (0, 0)
            row = await db.read(lambda conn: conn.execute(
                "SELECT count(*) FROM rel_roots WHERE ref = 'half'").fetchone()[0])
            assert row == 0
            assert await reserve(store, owner, "y-1") is not None  # the next group runs

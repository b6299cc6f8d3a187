"""What the Redis Cluster backend adds beyond the conformance suite: its URL, its buckets.

The conformance suite and the differential model run the backend with its default
1024 buckets; these tests use a few buckets, so that a handful of Spot IDs spread over
slots and masters, and check what a user can observe of that layout: ObjectGenerations
strictly increasing per ID and unique store-wide without a store-wide counter, every
key of a Spot in one hash slot, Query / statistics / orphans merged over every bucket
(one script per master, or one call per bucket when the slot map is stale), a bucket
count that cannot change under a deployment, and typed errors for bad URLs and absent
clusters, and what saves a cold activation round trips (a CommitReady on claims read
recently, a shift within a lifecycle that waits, a cold activation's root kept in its
Spot's bucket, units taken ahead -- and the buckets' counts and dead marks that keep a
dead process's units from keeping its claim) without changing an answer.
"""

from __future__ import annotations

import socket
from functools import partial

import pytest
import trio
from redis_helpers import cluster_test_store, cluster_url_with, fresh_cluster_url
from store_helpers import MESH, claim, ready, reserve

from zlink_trio.bench.stores import count_store_calls
from zlink_trio.core.errors import (
    DeadlineExceeded,
    InvalidConfiguration,
    InvalidOperation,
    NotFound,
    StaleFence,
    StoreUnavailable,
)
from zlink_trio.core.records import AuthorityState
from zlink_trio.store import AuthorityExists, open_store
from zlink_trio.store.redis.admin import scan_keys
from zlink_trio.store.redis.resp import encode_command
from zlink_trio.store.redis_cluster import parse_cluster_url
from zlink_trio.store.redis_cluster import runner as runner_module
from zlink_trio.store.redis_cluster.keys import hash_slot
from zlink_trio.store.redis_cluster.runner import AHEAD

TIMEOUT = 30


@pytest.mark.parametrize("url", [
    "redis+cluster://",
    "redis+cluster://127.0.0.1",
    "redis+cluster://127.0.0.1:7001,nohost",
    "redis+cluster://127.0.0.1:7001/3",
    "redis+cluster://127.0.0.1:7001?buckets=0",
    "redis+cluster://127.0.0.1:7001?buckets=16385",
    "redis+cluster://127.0.0.1:7001?prefix=a{b}",
    "redis+cluster://127.0.0.1:7001?db=1",
])
async def test_malformed_urls_are_refused_before_anything_is_opened(url):
    with pytest.raises(InvalidConfiguration):
        async with open_store(url):
            pass


def test_a_url_lists_masters_and_options():
    config = parse_cluster_url(
        "redis+cluster://u:p%40ss@10.0.0.1:7001,10.0.0.2:7002?prefix=app&buckets=64&timeout=2")
    assert config.nodes == (("10.0.0.1", 7001), ("10.0.0.2", 7002))
    assert (config.username, config.password) == ("u", "p@ss")
    assert (config.prefix, config.buckets, config.timeout) == ("app", 64, 2.0)
    assert "p@ss" not in config.where


async def test_an_unreachable_cluster_is_a_typed_error():
    with trio.fail_after(TIMEOUT):
        with pytest.raises(StoreUnavailable):
            async with open_store("redis+cluster://127.0.0.1:1?timeout=0.5"):
                pass


async def test_generations_increase_per_id_and_are_unique_store_wide():
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store(buckets=64) as store:
            node = await claim(store, capacity=100)
            seen: dict[str, list[int]] = {}
            for _ in range(3):
                for i in range(20):
                    spot_id = f"g-{i}"
                    record = await ready(store, node, spot_id)
                    seen.setdefault(spot_id, []).append(record.object_generation)
                    closing = await store.location.begin_close(
                        spot_id, object_generation=record.object_generation,
                        owner=record.owner, now=0.0)
                    await store.location.release(closing.fence())
            everything = [g for gens in seen.values() for g in gens]
            assert len(set(everything)) == len(everything)
            assert all(gens == sorted(set(gens)) for gens in seen.values())
            assert len({store.keys.bucket(i) for i in seen}) > 1  # several buckets used
            stats = await store.location.statistics()
            assert stats.last_object_generation == max(everything)


async def _keys_of(store) -> list[bytes]:
    found = []
    for master in store.router.masters():
        found += await scan_keys(partial(store.router.call_master, master),
                                 f"{store.config.prefix}:*")
    return found


async def test_every_key_of_a_spot_shares_one_hash_slot():
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store(buckets=64) as store:
            node = await claim(store)
            fence, _ = await store.combined.reserve_with_root(
                "s-1", b"root bytes", kind=node.descriptor.served_types["room"],
                stable_type="room", mesh=MESH, owner=node.owner(), now=0.0)
            await store.combined.commit_ready_with_first_record(fence, b"first", now=0.0)
            keys = [k.decode() for k in await _keys_of(store) if b":s-1" in k]
            assert any(":spot:" in k for k in keys)
            assert any(":inbox:" in k for k in keys)
            spot_slot = hash_slot(store.keys.spot("s-1"))
            assert {hash_slot(k) for k in keys} == {spot_slot}
            # ... and so do the counters its transactions change.
            assert {hash_slot(k) for k in store.keys.bucket_meta(store.keys.bucket("s-1"))} == {
                spot_slot}


async def _scripts_loaded(store) -> None:
    # Every master holds every script before commands are counted: a master that has not
    # seen one yet (a fresh cluster, this test run alone) loads it first (NOSCRIPT).
    sources = store.location._run._source  # type: ignore[attr-defined]
    for master in store.router.masters():
        for source in sources.values():
            await store.router.call_master(master, encode_command(["SCRIPT", "LOAD", source]))


async def test_a_cold_activations_root_is_kept_beside_its_record_one_script_a_step():
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store(buckets=64) as store:
            await _scripts_loaded(store)
            node = await claim(store, capacity=10)
            kind = node.descriptor.served_types["room"]
            with count_store_calls(store) as calls:
                fence, receipt = await store.combined.reserve_with_root(
                    "s-1", b"root bytes", kind=kind, stable_type="room", mesh=MESH,
                    owner=node.owner(), now=0.0)
            # The owner's unit, then one script: the record and its root in one slot.
            assert (calls.commands, calls.round_trips) == (2, 2)
            assert hash_slot(store.keys.root(receipt.ref)) == hash_slot(store.keys.spot("s-1"))
            assert await store.relocation.get_root(receipt) == b"root bytes"
            ready_record, seq = await store.combined.commit_ready_with_first_record(
                fence, b"first", now=0.0)
            with count_store_calls(store) as calls:
                cleanup = await store.combined.finish_first_record(
                    "s-1", fence.object_generation, seq=seq,
                    expected_version=ready_record.store_version, root=receipt)
            assert (calls.commands, calls.round_trips) == (1, 1)
            assert (cleanup.cursor_moved, cleanup.pointer_removed, cleanup.root_deleted) == (
                True, True, True)
            assert (await store.relocation.statistics()).roots == 0
            # A root put on its own lives in its ref's bucket and is finished all the same.
            apart = await store.relocation.put_root(b"a root of its own")
            assert store.keys.root_bucket(apart.ref) == store.keys.bucket(apart.ref)
            fence, _ = await store.combined.reserve_with_root(
                "s-2", b"more root bytes", kind=kind, stable_type="room", mesh=MESH,
                owner=node.owner(), now=0.0)
            ready_record, seq = await store.combined.commit_ready_with_first_record(
                fence, b"first", now=0.0)
            cleanup = await store.combined.finish_first_record(
                "s-2", fence.object_generation, seq=seq,
                expected_version=ready_record.store_version, root=apart)
            assert (cleanup.cursor_moved, cleanup.root_deleted) == (True, True)
            with pytest.raises(NotFound):
                await store.relocation.get_root(apart)
            # Arguments are checked before a bucket is computed from them: typed errors.
            with pytest.raises(InvalidOperation):
                await store.combined.reserve_with_root(
                    "lone \ud800", b"root", kind=kind, stable_type="room", mesh=MESH,
                    owner=node.owner(), now=0.0)
            with pytest.raises(InvalidOperation):
                await store.combined.finish_first_record(
                    "s-2", fence.object_generation, seq=1, expected_version=1,
                    root=None)  # type: ignore[arg-type]


async def test_query_statistics_and_orphans_cover_every_bucket():
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store(buckets=16) as store:
            node = await claim(store, "node-q", capacity=100, lease=5.0)
            ids = sorted(f"q-{i:02d}" for i in range(30))
            for spot_id in ids[:20]:
                await ready(store, node, spot_id)
            for spot_id in ids[20:]:
                await reserve(store, node, spot_id)  # left Creating: orphans once it dies
            walked, cursor = [], None
            while True:
                page = await store.location.query(page_size=7, cursor=cursor)
                walked += [r.spot_id for r in page.records]
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert walked == sorted([*ids, node.descriptor.entry_spot_id])
            stats = await store.location.statistics()
            assert (stats.claims, stats.ready, stats.creating) == (1, 21, 10)
            orphans = await store.location.orphans("node-q", now=10.0, limit=6)
            assert [r.spot_id for r in orphans] == ids[20:26]
            rest = await store.location.orphans("node-q", now=10.0, after=ids[25])
            assert [r.spot_id for r in rest] == ids[26:]


async def test_a_listed_node_that_does_not_answer_is_passed_over():
    # The slot map is read from the first listed node that answers (redis_cluster.router).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]  # nothing listens once the probe is closed
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store(buckets=8) as store:
            node = await claim(store)
            await ready(store, node, "d-1")
            url = cluster_url_with(store.config.prefix, buckets=8).replace(
                "redis+cluster://", f"redis+cluster://127.0.0.1:{dead},", 1)
            async with open_store(url) as other:
                assert (await other.location.find("d-1")) is not None
                assert ("127.0.0.1", dead) not in other.router.masters()


async def test_the_blocks_own_error_leaves_the_store_as_raised():
    async def fail_inside() -> None:
        async with cluster_test_store() as store:
            await store.location.find("e-1")
            raise LookupError("the block's own")

    with trio.fail_after(TIMEOUT), pytest.raises(LookupError, match="the block's own"):
        await fail_inside()


async def test_the_bucket_count_of_a_deployment_cannot_change():
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store(buckets=8) as store:
            prefix = store.config.prefix
            async with open_store(cluster_url_with(prefix, buckets=8)):
                pass
            with pytest.raises(InvalidConfiguration, match="buckets=8"):
                async with open_store(cluster_url_with(prefix, buckets=16)):
                    pass


async def test_reads_over_every_bucket_fall_back_to_one_call_per_bucket():
    # Query and statistics read each master's buckets in one script (redis_cluster.sweep);
    # with a stale slot map that script meets keys its node does not serve, fails having
    # written nothing, and that master's buckets are read one call each (with redirects).
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store(buckets=32) as store:
            node = await claim(store, capacity=100)
            for i in range(12):
                await ready(store, node, f"f-{i}")
            await store.relocation.put_root(b"a root")
            sweep = store.location.sweep
            right = (await store.location.query(page_size=1000),
                     await store.location.statistics(), await store.relocation.statistics())
            assert (sweep.grouped, sweep.fell_back) == (9, 0)  # 3 reads x 3 masters
            masters = store.router.masters()
            slots = store.router._slots
            for slot, address in enumerate(slots):  # every slot "on" the next master
                if address is not None:
                    slots[slot] = masters[(masters.index(address) + 1) % len(masters)]
            store.router.version += 1
            stale = (await store.location.query(page_size=1000),
                     await store.location.statistics(), await store.relocation.statistics())
            assert stale == right
            assert sweep.fell_back >= 3
            assert store.router.moved > 0


async def test_a_claim_newer_than_the_claims_read_recently_is_read_again():
    # The first store read the claims (its Reserve's unit) before node-b claimed; its
    # CommitReady for node-b runs on those recent claims, is refused for a lifecycle they
    # lack, and runs again on claims read then -- the answer a fresh read gives.
    with trio.fail_after(TIMEOUT):
        async with (fresh_cluster_url(buckets=8) as url, open_store(url) as first,
                    open_store(url) as second):
            node_a = await claim(first, "node-a", capacity=10)
            await ready(first, node_a, "s-a")
            node_b = await claim(second, "node-b", capacity=10)
            fence = await reserve(second, node_b, "s-b")
            record = await first.location.commit_ready(fence, now=0.0)
            assert record.state is AuthorityState.READY
            assert record.owner == node_b.owner()


async def test_a_shift_within_a_lifecycle_is_written_by_the_close_of_the_store():
    # CommitReady's pending -> active changes no total and waits in the runner; the
    # store's close writes it, so the nodes slot counts the unit as active.
    with trio.fail_after(TIMEOUT):
        async with fresh_cluster_url(buckets=8) as url:
            async with open_store(url) as store:
                node = await claim(store, capacity=10)
                await ready(store, node, "s-1")
            async with open_store(url) as store:
                key = store.keys.load(  # type: ignore[attr-defined]
                    MESH, node.descriptor.node_rid, node.lifecycle_generation)
                units = await store.location._run.command(  # type: ignore[attr-defined]
                    "units", ["HMGET", key, "pending", "active"])
                assert units == [None, b"1"]


async def _load(store: object, node: object) -> list[object]:
    """The raw (pending, active) of ``node``'s lifecycle in the nodes slot: units in use
    and units taken ahead alike."""
    key = store.keys.load(  # type: ignore[attr-defined]
        MESH, node.descriptor.node_rid, node.lifecycle_generation)  # type: ignore[attr-defined]
    return await store.location._run.command(  # type: ignore[attr-defined,no-any-return]
        "units", ["HMGET", key, "pending", "active"])


async def _closed(store: object, node: object, spot_id: str) -> None:
    """Activate ``spot_id`` on ``node`` and close it: its record gone, its unit given back."""
    record = await ready(store, node, spot_id)  # type: ignore[arg-type]
    closing = await store.location.begin_close(  # type: ignore[attr-defined]
        spot_id, object_generation=record.object_generation,
        owner=node.owner(), now=0.0)  # type: ignore[attr-defined]
    await store.location.release(closing.fence())  # type: ignore[attr-defined]


async def test_units_taken_ahead_count_against_capacity_and_go_back_at_close():
    # Far from capacity a Reserve takes AHEAD units more than its own (later ones use the
    # hand: no round trip to the nodes slot); near it, one at a time; the store's close
    # gives back what it did not use, so the nodes slot counts exactly the units in use.
    with trio.fail_after(TIMEOUT):
        async with fresh_cluster_url(buckets=8) as url:
            async with open_store(url) as store:
                run = store.location._run  # type: ignore[attr-defined]
                roomy = await claim(store, "node-roomy", capacity=1000)
                await reserve(store, roomy, "a-1")
                with pytest.raises(AuthorityExists):  # its unit goes back in the hand
                    await reserve(store, roomy, "a-1")
                assert await _load(store, roomy) == [str(AHEAD + 1).encode(), None]
                assert run.in_hand(MESH, roomy.descriptor.node_rid,
                                   roomy.lifecycle_generation) == AHEAD
                await ready(store, roomy, "a-2")
                tight = await claim(store, "node-tight", capacity=2 * AHEAD)
                await reserve(store, tight, "t-1")
                assert await _load(store, tight) == [b"1", None]
            async with open_store(url) as store:
                assert await _load(store, roomy) == [b"1", b"1"]
                assert await _load(store, tight) == [b"1", None]


async def test_near_capacity_the_hand_drains_and_units_go_one_at_a_time(monkeypatch):
    # A take for more beside a script takes all it asks for or none: near capacity the
    # hand empties, then each Reserve takes its own unit, so the nodes slot counts the
    # records' units and nothing held ahead.
    monkeypatch.setattr(runner_module, "AHEAD", 4)
    monkeypatch.setattr(runner_module, "_REFILL_AT", 2)
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store(buckets=8) as store:
            run = store.location._run  # type: ignore[attr-defined]
            node = await claim(store, "node-near", capacity=10)
            await reserve(store, node, "n-1")
            assert await _load(store, node) == [b"5", None]  # its own and 4 ahead
            for i in range(2, 9):
                await reserve(store, node, f"n-{i}")
            assert await _load(store, node) == [b"8", None]
            assert run.in_hand(MESH, node.descriptor.node_rid, node.lifecycle_generation) == 0


async def test_units_are_taken_ahead_only_for_the_stores_own_lifecycles():
    # A Reserve this store makes for another node's lifecycle (a remote create names the
    # target as owner) takes that one unit, none ahead: the other node's capacity counts
    # its records only.
    with trio.fail_after(TIMEOUT):
        async with fresh_cluster_url(buckets=8) as url, open_store(url) as here, \
                open_store(url) as there:
            other = await claim(there, "node-there", capacity=1000)
            await reserve(here, other, "r-1")
            assert await _load(here, other) == [b"1", None]


async def test_removing_its_own_claim_gives_back_the_units_in_hand():
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store(buckets=8) as store:
            node = await claim(store, "node-leaving", capacity=1000)
            await _closed(store, node, "x-1")
            assert await store.location.remove(MESH, node.descriptor.node_rid,
                                               node.lifecycle_generation)
            assert await _load(store, node) == [None, None]


async def test_a_take_beside_a_script_that_fails_leaves_the_scripts_outcome(monkeypatch):
    # The nodes slot's master is paused while a Reserve from the hand sends a take for
    # more beside its script, on another master: the take is given up at the store
    # timeout, and the Reserve, which wrote its record, says so.
    monkeypatch.setattr(runner_module, "_REFILL_AT", 10 * AHEAD)  # every Reserve refills
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store(buckets=64, timeout=0.3) as store:
            keys, router = store.keys, store.router  # type: ignore[attr-defined]
            node = await claim(store, "node-beside", capacity=100 * AHEAD)
            await reserve(store, node, "b-0")
            nodes_master = router.master_of(hash_slot(keys.nodes("claims")))
            spot = next(f"b-{i}" for i in range(1, 1000)
                        if router.master_of(hash_slot(keys.spot(f"b-{i}"))) != nodes_master)
            await router.call_master(nodes_master,
                                     encode_command(["CLIENT", "PAUSE", "1000", "WRITE"]))
            try:
                fence = await reserve(store, node, spot)
            finally:  # the tests after this one find every master answering
                await router.call_master(nodes_master, encode_command(["CLIENT", "UNPAUSE"]))
            record = await store.location.find(spot)
            assert record is not None
            assert record.object_generation == fence.object_generation


async def test_units_a_dead_process_held_ahead_keep_no_dead_claim():
    # The buckets count the units their records hold: RemoveDeadClaims removes a dead
    # lifecycle that owns nothing though the nodes slot still counts the units its
    # process held ahead when it died -- and keeps one that still owns a record.
    with trio.fail_after(TIMEOUT):
        async with fresh_cluster_url(buckets=8) as url:
            async with open_store(url) as store:
                gone = await claim(store, "node-gone", capacity=1000, lease=10.0)
                await _closed(store, gone, "g-1")
                owning = await claim(store, "node-owning", capacity=1000, lease=10.0)
                await reserve(store, owning, "o-1")
                store.location._run._hand.clear()  # type: ignore[attr-defined]  # killed
            async with open_store(url) as store:
                assert (await _load(store, gone))[0] == str(AHEAD).encode()
                assert await store.location.remove_dead_claims("node-gone", now=100.0) == 1
                assert await _load(store, gone) == [None, None]
                assert await store.location.remove_dead_claims("node-owning", now=100.0) == 0
                assert [r.spot_id for r in await store.location.orphans(
                    "node-owning", now=100.0)] == ["o-1"]


async def test_a_deployment_created_before_the_buckets_counted_units_keeps_the_old_rule():
    # Its records' units were never counted in their buckets: it takes no unit ahead, and
    # RemoveDeadClaims removes only a dead claim that holds no unit in the nodes slot.
    with trio.fail_after(TIMEOUT):
        async with fresh_cluster_url(buckets=8) as url:
            async with open_store(url) as store:
                config = store.keys.nodes("config")  # type: ignore[attr-defined]
                await store.router.call(  # type: ignore[attr-defined]
                    hash_slot(config), encode_command(["HDEL", config, "counted"]), write=True)
            async with open_store(url) as store:
                node = await claim(store, "node-old", capacity=1000, lease=10.0)
                await reserve(store, node, "old-1")
                assert await _load(store, node) == [b"1", None]
                assert await store.location.remove_dead_claims("node-old", now=100.0) == 0


async def test_a_lifecycle_removed_as_dead_owns_nothing_new_even_on_claims_read_before(
        monkeypatch):
    # RemoveDeadClaims marks the lifecycle dead in every bucket before it reads their
    # counts: a Reserve sent after, on claims read before (by a node whose clock says the
    # lease still runs), is refused and writes nothing.
    monkeypatch.setattr(runner_module, "FACTS_MAX_AGE", 600.0)  # the read before serves
    with trio.fail_after(TIMEOUT):
        async with (fresh_cluster_url(buckets=8) as url, open_store(url) as late,
                    open_store(url) as other):
            node = await claim(late, "node-late", capacity=1000, lease=10.0)
            await _closed(late, node, "l-1")
            assert await other.location.remove_dead_claims("node-late", now=100.0) == 1
            with pytest.raises(StaleFence):
                await reserve(late, node, "l-2", now=1.0)
            assert await other.location.find("l-2") is None


async def test_a_paused_cluster_is_given_up_within_the_store_timeout():
    # The deadlines travel with each command (no cancel scope on the way): a Reserve to
    # paused masters ends in StoreUnavailable after the URL's timeout, not the pause's end,
    # and a caller whose deadline has passed sends nothing.
    with trio.fail_after(TIMEOUT):
        async with cluster_test_store(buckets=8, timeout=0.3) as store:
            node = await claim(store, capacity=10)
            for master in store.router.masters():
                await store.router.call_master(
                    master, encode_command(["CLIENT", "PAUSE", "1500", "ALL"]))
            started = trio.current_time()
            with pytest.raises(StoreUnavailable):
                await reserve(store, node, "p-1")
            assert trio.current_time() - started < 1.0
            with pytest.raises(DeadlineExceeded), trio.CancelScope(
                    deadline=trio.current_time() - 1):
                await reserve(store, node, "p-2")
            for master in store.router.masters():  # the pause ends: calls go through
                await store.router.call_master(master, encode_command(["CLIENT", "UNPAUSE"]))
            assert (await reserve(store, node, "p-3")).spot_id == "p-3"

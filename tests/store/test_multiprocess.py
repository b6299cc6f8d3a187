"""Several processes, one store (issue 4, item 4): SQLite file, Redis database, Redis Cluster.

Three OS processes (``multiprocess_worker.py``, run with this interpreter)
share one store: one SQLite file (default dispatch), one Redis database or one
Redis Cluster (its default 1024 buckets) under one fresh key prefix. Each stores
its own node claim, then runs 200 concurrent GetOrCreate attempts over the same
10 Spot IDs -- Find, wait on a Creating/Closing record, Reserve, the factory,
CommitReady or (sometimes) AbortCreating as a rejection -- and a closer that
closes and releases Ready records it owns so that the others re-create them.
Every factory run appends ``pid spot_id generation`` to one shared ``O_APPEND``
log.

The parent then checks, from the workers' JSON reports, the log and the
store's final contents:

* no store call failed unexpectedly and every attempt ended in a final
  state (``existing``, ``created`` or ``rejected``);
* exactly one factory run per (Spot ID, ObjectGeneration) across all
  processes, and exactly the runs the successful Reserves called for;
* every attempt's ``UserCreate`` event path and every store write's
  ``SpotAuthority`` step is defined by the compiled tables, and the store's
  answers agree with the table's target state;
* generations strictly increase per ID, both in the log's order and in
  commit order; each incarnation ended exactly once (committed or aborted),
  only committed ones were closed, only committed ones were reported as
  Existing, and every incarnation but an ID's last one is over;
* the final store is consistent: each ID's record is exactly what its last
  incarnation implies (Ready at the committing process, or Missing), the
  three Entry claims are intact, and the statistics match the records.

The test can fail: ``ZLINK_MP_FAULT=skip-reserve-check`` makes the workers run
the factory when Reserve lost to a Creating record, and the duplicate-factory
check fires. ``ZLINK_MP_SEED`` replays a seed (the failure message names it).
"""

from __future__ import annotations

import collections
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from postgres_helpers import postgres_test_store
from postgres_helpers import url_with as postgres_url_with
from redis_helpers import (
    cluster_test_store,
    cluster_url_with,
    delete_cluster_prefix,
    raw_client,
    redis_test_store,
    url_with,
)

from statecharts import SpotAuthority, UndefinedTransition, UserCreate, compile
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState
from zlink_trio.store import open_store
from zlink_trio.store.redis.admin import scan_keys

WORKER = Path(__file__).resolve().with_name("multiprocess_worker.py")
PROCESSES = 3
ATTEMPTS = 200
IDS = [f"mp-{i}" for i in range(10)]
#: Hard bounds: the whole test, a worker's own run, and its start-up handshake.
TEST_TIMEOUT = 90
WORKER_TIMEOUT = 60
READY_TIMEOUT = 30
UC = compile(UserCreate)
SA = compile(SpotAuthority)
#: The terminal results a GetOrCreate may end in here (capacity and deadlines are ample).
EXPECTED_FINALS = frozenset({"existing", "created", "rejected"})
#: UserCreate events that are store writes, and the SpotAuthority event each one is.
WRITES = {"reserve_won": "reserve", "commit_ready": "commit_ready",
          "abort_creating": "abort_creating"}


# -- running the workers ------------------------------------------------------------------


def _open_for_append(path: Path) -> Any:
    return path.open("ab")


async def _read_line(stream: trio.abc.ReceiveStream) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(1024)
        if not chunk:
            break
        data += chunk
    return data


async def run_workers(url: str, tmp_path: Path, seed: int) -> tuple[list[dict], str]:
    """Start the workers, let them go together, wait; kill whatever is left in the end."""
    log = tmp_path / "factory.log"
    fault = os.environ.get("ZLINK_MP_FAULT", "")
    procs: list[trio.Process] = []
    errs = []
    try:
        for index in range(PROCESSES):
            err = _open_for_append(tmp_path / f"worker-{index}.err")
            errs.append(err)
            procs.append(await trio.lowlevel.open_process(
                [sys.executable, str(WORKER), "--url", url, "--log", str(log),
                 "--out", str(tmp_path / f"worker-{index}.json"), "--index", str(index),
                 "--seed", str(seed + index), "--attempts", str(ATTEMPTS),
                 "--ids", str(len(IDS)), "--timeout", str(WORKER_TIMEOUT), "--fault", fault],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err))
        with trio.fail_after(READY_TIMEOUT):
            greetings = [await _read_line(p.stdout) for p in procs]
        assert all(g.startswith(b"ready ") for g in greetings), (greetings, _stderr(tmp_path))
        for proc in procs:  # every claim is stored: start the attempts together
            await proc.stdin.send_all(b"go\n")
        for proc in procs:
            await proc.wait()
        codes = [p.returncode for p in procs]
        assert codes == [0] * PROCESSES, (codes, _stderr(tmp_path))
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
            with trio.CancelScope(shield=True), trio.move_on_after(10):
                await proc.wait()
                for stream in (proc.stdin, proc.stdout):
                    if stream is not None:
                        await stream.aclose()
        for err in errs:
            err.close()
    results = [json.loads((tmp_path / f"worker-{i}.json").read_text())
               for i in range(PROCESSES)]
    return results, log.read_text() if log.exists() else ""


def _stderr(tmp_path: Path) -> str:
    return "\n".join(f"--- worker {i} stderr:\n"
                     + (tmp_path / f"worker-{i}.err").read_text(errors="replace")[-4000:]
                     for i in range(PROCESSES))


async def all_records(store: Any) -> list[Any]:
    records, cursor = [], None
    while True:
        page = await store.location.query(page_size=1000, cursor=cursor)
        records.extend(page.records)
        cursor = page.next_cursor
        if cursor is None:
            return records


# -- the checks ---------------------------------------------------------------------------


def factory_runs_once(log_text: str) -> list[tuple[int, str, int]]:
    """Parse the side-effect log; assert one factory run per (Spot ID, generation)."""
    runs = []
    for line in log_text.splitlines():
        pid, spot_id, generation = line.split(" ")
        runs.append((int(pid), spot_id, int(generation)))
    by_incarnation = collections.defaultdict(list)
    for pid, spot_id, generation in runs:
        by_incarnation[spot_id, generation].append(pid)
    duplicates = {k: pids for k, pids in by_incarnation.items() if len(pids) > 1}
    assert not duplicates, (
        f"the factory ran more than once for {len(duplicates)} (Spot ID, generation) pairs "
        f"(pairs -> pids): {dict(sorted(duplicates.items())[:10])}")
    return runs


def replay_user_create(events: list[str]) -> str:
    """The UserCreate state the events lead to from the initial state; every step defined."""
    state = UC.initial
    for event in events:
        state = UC.step(state, event)  # UndefinedTransition when the chart forbids it
    return state


def check_authority_steps(steps: list[list[str]], where: str) -> None:
    """Each ``[from, event, to]`` is a SpotAuthority transition and they chain."""
    previous = None
    for frm, event, to in steps:
        assert previous is None or frm == previous, f"{where}: {steps} do not chain"
        assert SA.allows(frm, event), f"{where}: SpotAuthority has no {event!r} from {frm!r}"
        assert SA.step(frm, event) == to, (
            f"{where}: the store answered {to!r} to {event!r} from {frm!r}; the chart says "
            f"{SA.step(frm, event)!r}")
        previous = to


def check_run(results: list[dict], log_text: str, records: list[Any], stats: Any,
              seed: int) -> dict[str, int]:
    """Every assertion of the module docstring; returns a summary of what happened."""
    pid_of_rid = {r["node_rid"]: r["pid"] for r in results}
    attempts = [(r["pid"], a) for r in results for a in r["attempts"]]
    closes = [(r["pid"], c) for r in results for c in r["closes"]]
    # No store call failed.
    failed = [a for _, a in attempts if a["error"]] + [c for _, c in closes if c["error"]]
    assert not failed, f"seed {seed}: {len(failed)} failed, first: {failed[0]}"
    assert [len(r["attempts"]) for r in results] == [ATTEMPTS] * PROCESSES

    # Exactly one factory run per (ID, generation), and exactly the Reserves' runs.
    runs = factory_runs_once(log_text)
    reserved = sorted((pid, a["spot_id"], a["generation"]) for pid, a in attempts
                      if any(step[1] == "reserve" for step in a["sa"]))
    assert sorted(runs) == reserved, "factory runs differ from the Reserves won"

    # The statecharts allow every step and every attempt ends in a final state.
    for pid, a in attempts:
        where = f"seed {seed}, pid {pid}, attempt {a['k']} on {a['spot_id']}"
        try:
            final = replay_user_create(a["uc"])
        except UndefinedTransition as error:
            raise AssertionError(f"{where}: {a['uc']}: {error}") from None
        assert UC.is_final(final), f"{where}: ended in non-final {final!r}: {a['uc']}"
        assert final == a["final"] in EXPECTED_FINALS, (where, final, a["final"], a["uc"])
        assert [WRITES[e] for e in a["uc"] if e in WRITES] == [s[1] for s in a["sa"]], (
            where, a["uc"], a["sa"])
        check_authority_steps(a["sa"], where)
    for pid, c in closes:
        where = f"seed {seed}, pid {pid}, close of {c['spot_id']} gen {c['generation']}"
        assert [s[1] for s in c["sa"]] == ["begin_close", "release"], (where, c["sa"])
        check_authority_steps(c["sa"], where)

    # Generations: strictly increasing per ID, each incarnation ended once.
    generations = [g for _, _, g in runs]
    assert len(set(generations)) == len(generations), "a generation was issued twice"
    log_order = collections.defaultdict(list)
    for _, spot_id, generation in runs:
        log_order[spot_id].append(generation)
    for spot_id, gens in log_order.items():
        assert gens == sorted(set(gens)), f"{spot_id}: generations in log order {gens}"
    committed = {(a["spot_id"], a["generation"]): (pid, a["committed_at"])
                 for pid, a in attempts if a["final"] == "created"}
    aborted = {(a["spot_id"], a["generation"]) for _, a in attempts if a["final"] == "rejected"}
    assert len(committed) + len(aborted) == len(runs), "an incarnation ended twice or never"
    assert set(committed) | aborted == {(s, g) for _, s, g in runs}
    commit_order = collections.defaultdict(list)
    for (spot_id, generation), _ in sorted(committed.items(), key=lambda kv: kv[1][1]):
        commit_order[spot_id].append(generation)
    for spot_id, gens in commit_order.items():
        assert gens == sorted(set(gens)), f"{spot_id}: generations in commit order {gens}"
    closed = [(c["spot_id"], c["generation"]) for _, c in closes]
    assert len(set(closed)) == len(closed), "an incarnation was closed twice"
    assert set(closed) <= set(committed), "closed an incarnation that was never committed"
    for pid, c in closes:
        assert committed[c["spot_id"], c["generation"]][0] == pid, "closed another's record"
    for pid, a in attempts:
        if a["final"] == "existing":
            assert (a["spot_id"], a["generation"]) in committed, (
                f"pid {pid} attempt {a['k']} reported Existing generation {a['generation']} "
                "that was never committed")

    # The final store: each ID's record is what its last incarnation implies.
    by_id = {r.spot_id: r for r in records}
    entries = {r["entry_spot_id"]: r for r in results}
    assert set(by_id) <= set(IDS) | set(entries), f"unexpected records {set(by_id)}"
    for spot_id, result in entries.items():
        entry = by_id[spot_id]
        assert entry.kind is SpotKind.ENTRY
        assert entry.state is AuthorityState.READY
        assert str(entry.owner.node_rid) == result["node_rid"]
    ended = set(aborted) | set(closed)
    for spot_id in IDS:
        gens = log_order.get(spot_id, [])
        assert all((spot_id, g) in ended for g in gens[:-1]), (
            f"{spot_id}: an earlier incarnation of {gens} is still live")
        record = by_id.get(spot_id)
        if not gens or (spot_id, gens[-1]) in ended:
            assert record is None, f"{spot_id}: expected Missing, store has {record!r}"
            continue
        assert record is not None, f"{spot_id}: generation {gens[-1]} committed, store is Missing"
        assert record.state is AuthorityState.READY
        assert record.object_generation == gens[-1]
        assert record.matches(SpotKind.USER, "room")
        assert pid_of_rid[str(record.owner.node_rid)] == committed[spot_id, gens[-1]][0]
    assert stats.claims == PROCESSES
    assert (stats.creating, stats.closing, stats.relocating, stats.sealed) == (0, 0, 0, 0)
    assert stats.ready == len(records)
    assert stats.last_object_generation >= max(
        [*generations, *(r.object_generation for r in records)])

    summary = {
        "factory_runs": len(runs),
        "created": len(committed),
        "rejected": len(aborted),
        "existing": sum(a["final"] == "existing" for _, a in attempts),
        "closed": len(closed),
        "recreated_ids": sum(len(g) > 1 for g in commit_order.values()),
        "waited": sum("found_creating" in a["uc"] or "reserve_lost_creating" in a["uc"]
                      for _, a in attempts),
        "reserve_lost_cross_process": sum(
            pid_of_rid[rid] != pid for pid, a in attempts for rid in a["lost_to"]),
        "waited_cross_process": sum(
            pid_of_rid[rid] != pid for pid, a in attempts for rid in a["waited_on"]),
        "committing_processes": len({pid for pid, _ in committed.values()}),
    }
    # The run exercised what it claims to: contention, waiting, rejection, re-creation.
    for key in ("rejected", "closed", "recreated_ids", "waited"):
        assert summary[key] > 0, f"seed {seed}: the run never exercised {key}: {summary}"
    assert summary["committing_processes"] > 1, summary
    cross = summary["reserve_lost_cross_process"] + summary["waited_cross_process"]
    assert cross > 0, f"seed {seed}: the processes never met each other's records: {summary}"
    assert max(r["started"] for r in results) < min(r["started"] + r["elapsed"]
                                                    for r in results), "the runs did not overlap"
    return summary


async def exercise(store: Any, url: str, tmp_path: Path) -> dict[str, int]:
    seed = int(os.environ.get("ZLINK_MP_SEED") or random.randrange(2**32))
    results, log_text = await run_workers(url, tmp_path, seed)
    records = await all_records(store)
    stats = await store.location.statistics()
    try:
        summary = check_run(results, log_text, records, stats, seed)
    except AssertionError as error:  # name the seed: ZLINK_MP_SEED replays its choices
        raise AssertionError(f"seed {seed} (ZLINK_MP_SEED): {error}") from None
    t0 = min(r["started"] for r in results)
    print(f"seed {seed}: {summary}; started/elapsed",
          [(round(r["started"] - t0, 3), round(r["elapsed"], 2)) for r in results])
    return summary


# -- the tests ----------------------------------------------------------------------------


async def test_three_processes_share_one_sqlite_file(tmp_path):
    url = f"sqlite://{tmp_path / 'store.db'}"  # the default dispatch and busy timeout
    with trio.fail_after(TEST_TIMEOUT):
        async with open_store(url) as store:
            await exercise(store, url, tmp_path)


async def test_three_processes_share_one_redis_database(tmp_path):
    with trio.fail_after(TEST_TIMEOUT):
        # One fresh prefix shared by the three processes; fails (not skips) under CI
        # without Redis, and deletes the prefix's keys afterwards (redis_helpers).
        async with redis_test_store() as store:
            prefix = store.config.prefix
            await exercise(store, url_with(prefix), tmp_path)
        async with raw_client() as client:
            assert await scan_keys(client.call, f"{prefix}:*") == []


async def test_three_processes_share_one_postgres_schema(tmp_path):
    with trio.fail_after(TEST_TIMEOUT):
        # One fresh schema shared by the three processes; fails (not skips) under CI
        # without PostgreSQL, and drops the schema afterwards (postgres_helpers).
        async with postgres_test_store() as store:
            await exercise(store, postgres_url_with(store.options.prefix), tmp_path)


async def test_three_processes_share_one_redis_cluster(tmp_path):
    with trio.fail_after(TEST_TIMEOUT):
        # One fresh prefix on the test cluster (ZLINK_TEST_REDIS_CLUSTER, redis_helpers);
        # fails (not skips) under CI without it, deletes the prefix's keys afterwards.
        async with cluster_test_store() as store:
            await exercise(store, cluster_url_with(store.config.prefix), tmp_path)
            assert await delete_cluster_prefix(store) > 0
            assert await delete_cluster_prefix(store) == 0


# -- the checks have teeth ----------------------------------------------------------------


def test_a_second_factory_run_for_one_generation_is_reported():
    factory_runs_once("10 mp-0 4\n11 mp-1 5\n12 mp-0 6\n")
    with pytest.raises(AssertionError, match=r"more than once .*\('mp-0', 4\): \[10, 11\]"):
        factory_runs_once("10 mp-0 4\n11 mp-0 4\n12 mp-0 6\n")


def test_a_step_the_user_create_chart_forbids_is_reported():
    assert replay_user_create(["spot_id_given", "found_creating", "other_attempt_missing",
                               "placement_selected", "reserve_won", "create_accepted",
                               "commit_ready"]) == "created"
    with pytest.raises(UndefinedTransition):  # a waiter may not run the factory
        replay_user_create(["spot_id_given", "found_creating", "reserve_won"])
    with pytest.raises(AssertionError, match="the chart says 'creating'"):
        check_authority_steps([["missing", "reserve", "ready"]], "here")

"""No lost callers during activation, under load (issue #13 item 2), on SQLite and Redis.

Three node processes (``mesh_node_worker.py``, one Mesh, one secret, each serving the
Instance Spot type ``meshcounter``) open one fresh store at the same moment: on SQLite
a file that does not exist yet and that no process prepares first (``start_nodes(...,
together=True)`` releases the three opens at once), so the processes race to create
it. Then each process sends 1,500 concurrent ``Add(1)`` requests with Instance intent,
all first calls to Spots that do not exist yet: 500 IDs that every process calls twice
(six first callers from three processes race for each) and 20 IDs that every process
calls 25 times (75 concurrent first callers each). Half of each process's requests
start at once; the other half pause at a checkpoint after every five, so those later
calls meet activations in flight -- a Ready record read before the owner registered the
host -- and not only missing IDs.

Every request must succeed -- no StaleRoute (a call that read Ready before the owner
registered the host), no Unavailable, no "database is locked" -- and be answered once;
the replies of one ID are exactly the totals 1..N from one owner (each message ran
once, serially, on one incarnation), and the factory log shows one ObjectGeneration
per ID.

Three processes opening one fresh file meet SQLite's lock without a busy handler
(another connection switching the file to WAL) in about one round of a hundred on
this kind of machine, so the open race has its own test too: three processes
(``fresh_open_worker.py``) open a node on a new fresh file together, a hundred times.

The tests run on the real clock (real sockets), bounded by ``trio.fail_after``; the
processes are killed whatever happens.
"""

from __future__ import annotations

import collections
import json
import os
import random
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
from mesh_node_procs import NodeProc, factory_runs, start_nodes, stop, wait_loaded

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

NAMES = ["n0", "n1", "n2"]
SECRET = "first-calls-secret-0123456789abcdefghij"
#: 20 IDs with 25 first callers in each process, 500 IDs with 2 in each process.
HOT = [f"hot-{i}" for i in range(20)]
WIDE = [f"wide-{i}" for i in range(500)]
HOT_CALLS, WIDE_CALLS = 25, 2
PER_PROCESS = len(HOT) * HOT_CALLS + len(WIDE) * WIDE_CALLS  # 1,500
#: AT_ONCE requests start together, then a checkpoint after every SPREAD started.
AT_ONCE, SPREAD = PER_PROCESS // 2, 5
#: Each call's own deadline; the whole test's bound (start, 4,500 calls, stop).
CALL_TIMEOUT = 25.0
TEST_TIMEOUT = 60.0
OPEN_WORKER = Path(__file__).resolve().with_name("fresh_open_worker.py")
OPEN_ROUNDS = 100


def plan(seed: int) -> list[str]:
    """One process's 1,500 target IDs, in its own shuffled order (request ``i`` -> item
    ``i``), so hot and wide IDs interleave and the processes race in different orders."""
    ids = HOT * HOT_CALLS + WIDE * WIDE_CALLS
    random.Random(seed).shuffle(ids)
    return ids


def fresh(url: str) -> bool:
    """A SQLite URL names no file yet (any other URL: ``True``)."""
    return not url.startswith("sqlite://") or not Path(url.removeprefix("sqlite://")).exists()


async def test_thousands_of_concurrent_first_calls_lose_no_caller(mesh_url, tmp_path):
    """Item 2: 3 x 1,500 concurrent first calls over 520 new IDs, zero errors.

    The SQLite file is created by the three racing opens (a locked open waits its busy
    timeout). Every request is answered ``ok``; each ID's replies are 1..N (N = the
    requests sent to it from all processes) from one owner, and its factory ran once.
    """
    assert fresh(mesh_url), f"{mesh_url} exists before the nodes start"
    plans = {name: plan(seed) for seed, name in enumerate(NAMES)}
    answers: dict[str, dict[str, Any]] = {}
    with trio.fail_after(TEST_TIMEOUT):
        async with start_nodes(NAMES, mesh_url, tmp_path, together=True,
                               secret=SECRET) as nodes:

            async def burst(node) -> None:
                answers[node.name] = await node.call(
                    answer_within=TEST_TIMEOUT, op="burst", ids=plans[node.name],
                    count=PER_PROCESS, timeout=CALL_TIMEOUT, at_once=AT_ONCE,
                    spread=SPREAD)

            async with trio.open_nursery() as nursery:
                for node in nodes:
                    nursery.start_soon(burst, node)
            stderr = {node.name: node.stderr() for node in nodes}

    results = []
    for name in NAMES:
        got = answers[name]["results"]
        assert [r.get("spot") for r in got] == plans[name], f"{name}: not one answer per request"
        results += got
    failed = [r for r in results if not r["ok"]]
    kinds = collections.Counter((r["error"], r["message"][:100]) for r in failed)
    assert not failed, f"{len(failed)} of {len(results)} failed: {kinds.most_common(5)}"
    peaks = {name: answers[name]["peak_in_flight"] for name in NAMES}
    assert all(peak >= AT_ONCE for peak in peaks.values()), f"too few calls at once: {peaks}"

    sent = collections.Counter(spot for name in NAMES for spot in plans[name])
    values: dict[str, list[int]] = collections.defaultdict(list)
    owners: dict[str, set[str]] = collections.defaultdict(set)
    for r in results:
        values[r["spot"]].append(r["value"])
        owners[r["spot"]].add(r["node"])
    wrong = {spot: sorted(values[spot]) for spot in sent
             if sorted(values[spot]) != list(range(1, sent[spot] + 1))}
    assert not wrong, f"{len(wrong)} IDs did not run each message once: {list(wrong.items())[:3]}"
    split = {spot: nodes for spot, nodes in owners.items() if len(nodes) != 1}
    assert not split, f"IDs answered by more than one owner: {list(split.items())[:3]}"

    runs = factory_runs(tmp_path)
    per_id = collections.Counter(spot for spot, _, _ in runs)
    assert per_id == dict.fromkeys(sent, 1), (
        f"factory runs per ID differ from one: {[(s, n) for s, n in per_id.items() if n != 1]}"
        f", never built: {sorted(set(sent) - set(per_id))[:5]}")
    assert {spot: {node} for spot, _, node in runs} == owners  # built where it answered
    assert len({generation for _, generation, _ in runs}) == len(sent)
    assert len({node for nodes in owners.values() for node in nodes}) == 3, (
        "placement did not spread the new IDs over the three nodes")
    locked = {name: text for name, text in stderr.items() if "locked" in text}
    assert not locked, f"a node logged a locked store: {locked}"


@asynccontextmanager
async def open_workers(names: list[str], tmp_path: Path) -> AsyncIterator[list[NodeProc]]:
    """One ``fresh_open_worker.py`` per name, loaded; all are killed when the block ends."""
    workers: list[NodeProc] = []
    try:
        for name in names:
            err_path = tmp_path / f"{name}.err"
            with err_path.open("ab") as err:
                process = await trio.lowlevel.open_process(
                    [sys.executable, str(OPEN_WORKER), "--node", name,
                     "--timeout", str(TEST_TIMEOUT)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                    env=dict(os.environ))
            workers.append(NodeProc(name, process, err_path))
        async with trio.open_nursery() as nursery:
            for worker in workers:
                nursery.start_soon(wait_loaded, worker)
        yield workers
    finally:
        for worker in workers:
            await stop(worker)


async def test_nodes_opening_one_fresh_sqlite_file_at_once_all_open(tmp_path):
    """Item 2: three processes open a node on one fresh SQLite file at the same moment,
    a hundred times over (a new file each round): every open succeeds.

    A connection that meets another's WAL switch is told "database is locked" at once;
    the store tries it again until its busy timeout instead of failing the node.
    """
    failed = []
    with trio.fail_after(TEST_TIMEOUT):
        async with open_workers(NAMES, tmp_path) as workers:
            for round_no in range(OPEN_ROUNDS):
                path = tmp_path / f"fresh-{round_no}.db"
                line = json.dumps({"op": "open", "store": f"sqlite://{path}"}).encode() + b"\n"
                for worker in workers:  # one write each: the opens start together
                    assert worker.proc.stdin is not None
                    await worker.proc.stdin.send_all(line)
                for worker in workers:
                    answer = await worker.read_line(TEST_TIMEOUT)
                    if not answer["ok"]:
                        failed.append((round_no, worker.name, answer["error"],
                                       answer["message"]))
    assert not failed, f"{len(failed)} of {OPEN_ROUNDS * len(NAMES)} opens failed: {failed[:3]}"

"""Calls across node processes (issue #5 item 7), on one SQLite file and on Redis.

Three node processes (``mesh_node_worker.py``) on 127.0.0.1 share one store. Every
factory run appends ``(ID, generation, node)`` to one log, which is the proof of how
many incarnations were built. The tests run on the real clock (real sockets) and are
bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import collections

import trio
from mesh_node_procs import factory_runs, launch, running, runs_per_id, start_nodes

NAMES = ["n0", "n1", "n2"]
TEST_TIMEOUT = 60


async def test_every_node_calls_spots_owned_by_the_others(mesh_url, tmp_path):
    """Item 7: calls from every node reach Spots owned by other node processes.

    Each node cold-activates three counters (placement spreads them over the mesh);
    then every node sends every counter a plain request (no Instance intent). Each
    reply comes from the owner the store names, the running totals show one serial
    incarnation per ID, and at least one call of every node crossed to another process.
    """
    ids = [f"calls-{i}" for i in range(9)]
    with trio.fail_after(TEST_TIMEOUT):
        async with start_nodes(NAMES, mesh_url, tmp_path) as nodes:
            by_rid = {node.node_rid: node.name for node in nodes}
            for i, spot in enumerate(ids):
                first = await nodes[i % 3].call(op="request", spot=spot, n=1, intent=True)
                assert (first["ok"], first["value"]) == (True, 1), first
            owner = {}
            for spot in ids:
                found = await nodes[0].call(op="find", spot=spot)
                owner[spot] = by_rid[found["ref"]["node_rid"]]
            crossed = collections.Counter()
            for _round in range(3):
                for node in nodes:
                    for spot in ids:
                        answer = await node.call(op="request", spot=spot, n=1)
                        assert answer["ok"], (node.name, spot, answer)
                        assert answer["node"] == owner[spot], (node.name, spot, answer, owner)
                        crossed[node.name] += answer["node"] != node.name
            totals = {spot: (await nodes[1].call(op="request", spot=spot, n=0))["value"]
                      for spot in ids}
    assert totals == dict.fromkeys(ids, 1 + 3 * 3)  # every call ran once, on one incarnation
    assert all(crossed[name] > 0 for name in NAMES), (crossed, owner)
    assert len(set(owner.values())) > 1, f"placement put every Spot on one node: {owner}"
    runs = runs_per_id(tmp_path)
    assert {spot: [node for _, node in runs[spot]] for spot in ids} == {
        spot: [owner[spot]] for spot in ids}


async def test_300_concurrent_first_messages_build_one_incarnation_per_id(mesh_url, tmp_path):
    """Item 7: 300 concurrent Instance-intent first messages over 10 IDs from 3 nodes.

    Each node process sends 100 concurrent ``Add(1)`` with Instance intent over the same
    10 (missing) IDs at once. The factory runs exactly once per ID across all processes,
    every message is answered, and the 30 replies of each ID are exactly the totals
    1..30 from one owner (each message handled once, serially, by one incarnation).
    """
    ids = [f"burst-{i}" for i in range(10)]
    with trio.fail_after(TEST_TIMEOUT):
        async with start_nodes(NAMES, mesh_url, tmp_path) as nodes:
            answers: dict[str, dict] = {}

            async def burst(node) -> None:
                answers[node.name] = await node.call(op="burst", ids=ids, count=100,
                                                     timeout=30)

            async with trio.open_nursery() as nursery:
                for node in nodes:
                    nursery.start_soon(burst, node)
    results = [r for name in NAMES for r in answers[name]["results"]]
    failed = [r for r in results if not r["ok"]]
    assert not failed, f"{len(failed)} of 300 failed, e.g. {failed[:3]}"
    runs = factory_runs(tmp_path)
    per_id = collections.Counter(spot for spot, _, _ in runs)
    assert per_id == dict.fromkeys(ids, 1), f"factory runs per ID: {per_id}"
    values: dict[str, list[int]] = collections.defaultdict(list)
    owners: dict[str, set[str]] = collections.defaultdict(set)
    for r in results:
        values[r["spot"]].append(r["value"])
        owners[r["spot"]].add(r["node"])
    for spot in ids:
        assert sorted(values[spot]) == list(range(1, 31)), (spot, sorted(values[spot]))
        assert owners[spot] == {next(node for s, _, node in runs if s == spot)}


async def test_placement_reads_the_mesh_not_the_callers_registry(mesh_url, tmp_path):
    """Issue #26 item 7: three processes whose registries differ -- n0 registers
    meshcounter and meshroom, n1 only meshroom, n2 nothing (a client-only node).

    Concurrent first messages with Instance intent for meshcounter from all three build
    each ID once, on n0, the only node that serves the type (two of the callers do not
    register it); the User Spots n2 creates land on n0 or n1, whose descriptors serve
    meshroom; and every node reaches every Spot across the links.
    """
    ids = [f"wide-{i}" for i in range(6)]
    rooms = [f"room-{i}" for i in range(4)]
    with trio.fail_after(TEST_TIMEOUT):
        async with (
            running(await launch("n0", mesh_url, tmp_path,
                                 spots="meshcounter,meshroom")) as n0,
            running(await launch("n1", mesh_url, tmp_path, spots="meshroom")) as n1,
            running(await launch("n2", mesh_url, tmp_path, spots="none")) as n2,
        ):
            nodes = [n0, n1, n2]
            answers: dict[str, dict] = {}

            async def burst(node) -> None:
                answers[node.name] = await node.call(op="burst", ids=ids, count=30,
                                                     timeout=30)

            async with trio.open_nursery() as nursery:
                for node in nodes:
                    nursery.start_soon(burst, node)
            for room in rooms:
                created = await n2.call(op="get_or_create", spot=room, timeout=20)
                assert created["ok"], created
            room_owner = {room: next(node for spot, _, node in factory_runs(tmp_path)
                                     if spot == room) for room in rooms}
            for node in nodes:
                for room in rooms:
                    answer = await node.call(op="request", spot=room, n=1, timeout=20)
                    assert (answer["ok"], answer["node"]) == (True, room_owner[room]), (
                        node.name, room, answer)
    results = [r for name in ("n0", "n1", "n2") for r in answers[name]["results"]]
    failed = [r for r in results if not r["ok"]]
    assert not failed, f"{len(failed)} of 90 failed, e.g. {failed[:3]}"
    assert {r["node"] for r in results} == {"n0"}
    runs = runs_per_id(tmp_path)
    assert {spot: [node for _, node in runs[spot]] for spot in ids} == {
        spot: ["n0"] for spot in ids}
    assert set(room_owner.values()) <= {"n0", "n1"}
    assert all(len(runs[room]) == 1 for room in rooms)

"""Restart recovery (issue #13 item 1), with real node processes on SQLite and Redis.

* A node SIGKILLed while it owned steady Ready Spots and restarted under the same
  NodeId makes them usable again within about one lease, with no operator: each
  Instance Spot answers again from a new incarnation (a larger ObjectGeneration, its
  state lost with the process), each User Spot is ``NotFound`` and can be created
  again. The dead lifecycle's claim and Entry claim are gone from the store.
* A process paused past its lease (SIGSTOP, the GC-pause zombie) while a new process
  of its NodeId took over never handles a message again once it wakes up.
* A second process started with a NodeId whose holder is alive is refused at start,
  within about a third of a lease (the holder's renewal gives it away), with a message
  that says what to do; the first process keeps serving.

Real processes and sockets on the real clock, bounded by ``trio.fail_after``; waits on
other processes poll with a short pause (no event crosses processes).
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import trio
from mesh_node_procs import factory_runs, launch, running, start_nodes, stop

from zlink_trio.core.records import AuthorityState
from zlink_trio.store import open_store

TEST_TIMEOUT = 60
LEASE = 2.0
PACE = 0.1


async def test_restarted_node_makes_its_steady_spots_usable_again(mesh_url, tmp_path):
    """Item 1: SIGKILL + restart under the same NodeId -> usable within one lease."""
    instances = [f"inst-{i}" for i in range(4)]
    users = [f"user-{i}" for i in range(2)]
    with trio.fail_after(TEST_TIMEOUT):
        async with open_store(mesh_url) as store, start_nodes(
                ["caller"], mesh_url, tmp_path, weight=0) as (caller,):
            victim = await launch("r0", mesh_url, tmp_path, lease=LEASE)
            async with running(victim):
                for spot in instances:
                    answer = await caller.call(op="request", spot=spot, n=5, intent=True)
                    assert (answer["ok"], answer["node"]) == (True, "r0"), answer
                for spot in users:
                    created = await caller.call(op="get_or_create", spot=spot)
                    assert created["ok"]
                    assert created["ref"]["node_rid"] == victim.node_rid
                before = {spot: await store.location.find(spot) for spot in instances + users}
                assert all(r.state is AuthorityState.READY for r in before.values())
                victim.kill()
                assert await victim.proc.wait() == -9
            killed_at = time.monotonic()
            # Restarted at once: its predecessor's lease (LEASE) is still running.
            async with running(await launch("r0", mesh_url, tmp_path, lease=LEASE)) as again:
                serving = []
                for spot in instances:
                    while True:
                        answer = await caller.call(op="request", spot=spot, n=1, intent=True,
                                                   timeout=5)
                        if answer["ok"]:
                            break
                        assert answer["error"] in ("Unavailable", "StaleRoute"), answer
                        await trio.sleep(PACE)
                    serving.append(time.monotonic() - killed_at)
                    assert (answer["node"], answer["value"]) == ("r0", 1), answer  # new state
                for spot in users:
                    assert (await caller.call(op="find", spot=spot))["ref"] is None
                    created = await caller.call(op="get_or_create", spot=spot)
                    assert (created["ok"], created["state"]) == (True, "created"), created
                    assert created["ref"]["node_rid"] == again.node_rid
                after = {spot: await store.location.find(spot) for spot in instances + users}
                claims = {str(c.descriptor.node_rid) for c in
                          await store.location.descriptors(now=time.time())}
                stats = await store.location.statistics()
    for spot, old in before.items():
        assert after[spot].object_generation > old.object_generation, spot
        assert str(after[spot].owner.node_rid) == again.node_rid
    # Usable within about one lease of the death (+ process start and one poll).
    assert max(serving) < LEASE + 6, serving
    # The dead lifecycle left nothing behind: only the two live claims exist.
    assert claims == {caller.node_rid, again.node_rid}
    assert stats.claims == 2, stats
    runs = factory_runs(tmp_path)
    for spot in instances:
        gens = sorted(g for s, g, _ in runs if s == spot)
        assert gens == [before[spot].object_generation, after[spot].object_generation], runs


async def test_second_process_with_a_live_node_id_is_refused_at_start(mesh_url, tmp_path):
    """Item 1: two live processes may not share a NodeId; the second one is refused."""
    with trio.fail_after(TEST_TIMEOUT):
        async with start_nodes(["dup"], mesh_url, tmp_path, lease=LEASE) as (first,):
            assert (await first.call(op="request", spot="d-1", intent=True))["ok"]
            second = await launch("dup", mesh_url, tmp_path, lease=LEASE)
            started = time.monotonic()
            try:
                status = await second.proc.wait()
            finally:
                await stop(second)
            waited = time.monotonic() - started
            answer = await first.call(op="request", spot="d-1", n=2)
    assert status != 0
    error = second.stderr()
    assert "NodeId 'dup' is held by a live process" in error, error
    assert "give this one another node_id" in error, error
    assert waited < LEASE + 5, waited  # refused once the holder renewed (lease / 3)
    assert (answer["ok"], answer["value"]) == (True, 3), answer  # the first keeps serving


def _handled_by_pid(tmp_path) -> list[tuple[int, int]]:
    """``(seq, pid)`` of every ``Step`` handled, from the worker's append-only log
    (``handle SPOT_ID SEQ NODE_ID PID OPERATION``)."""
    log = tmp_path / "factory.log.handled"
    lines = log.read_text().splitlines() if log.exists() else []
    fields = (line.split(" ") for line in lines)
    return [(int(seq), int(pid)) for _, _, seq, _, pid, _operation in fields]


@pytest.mark.parametrize("mesh_url", ["redis"], indirect=True)
async def test_a_paused_owner_woken_after_its_restart_never_acts_again(mesh_url, tmp_path):
    """Item 1, fencing: the GC-pause zombie. ``r0`` is SIGSTOPped past its lease, a new
    process starts under NodeId ``r0`` and releases the Spot, which activates anew there;
    the old process is then SIGCONTed: it handles nothing any more (its own local call
    fails), and the Spot keeps being served by the new process only.

    Redis only: on SQLite a process frozen inside a write transaction (a lease renewal's
    commit and fsync) keeps the file's write lock until it resumes, and every other
    process's store calls fail ``StoreUnavailable`` after the busy timeout meanwhile --
    the "SQLite locked" rows of ``tests/chaos`` cover that outage (docs/reliability.md).
    """
    spot = "zombie-1"
    with trio.fail_after(TEST_TIMEOUT):
        async with start_nodes(["caller"], mesh_url, tmp_path, weight=0) as (caller,):
            old = await launch("r0", mesh_url, tmp_path, lease=LEASE)
            async with running(old):
                first = await caller.call(op="step", spot=spot, seq=1, intent=True)
                assert (first["ok"], first["node"]) == (True, "r0"), first
                os.kill(old.info["pid"], signal.SIGSTOP)
                try:
                    async with running(await launch("r0", mesh_url, tmp_path,
                                                    lease=LEASE)) as new:
                        while True:
                            again = await caller.call(op="step", spot=spot, seq=2,
                                                      intent=True, timeout=5)
                            if again["ok"]:
                                break
                            await trio.sleep(PACE)
                        os.kill(old.info["pid"], signal.SIGCONT)
                        woken = await old.call(op="step", spot=spot, seq=3, timeout=3)
                        later = await caller.call(op="step", spot=spot, seq=4, timeout=5)
                finally:
                    os.kill(old.info["pid"], signal.SIGCONT)
    assert again["count"] == 1, again  # a new incarnation: the old state died
    assert not woken["ok"], woken  # the zombie refused its own call
    assert (later["ok"], later["count"]) == (True, 2), later
    handled = _handled_by_pid(tmp_path)
    old_pid, new_pid = old.info["pid"], new.info["pid"]
    assert handled == [(1, old_pid), (2, new_pid), (4, new_pid)], handled

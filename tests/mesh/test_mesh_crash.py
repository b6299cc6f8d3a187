"""A node process dies or restarts (issue #5 item 7), on one SQLite file and on Redis.

* SIGKILL of a node: the Spots it owned answer ``Unavailable`` from every other node,
  before and after its lease runs out, and are never recreated elsewhere (their
  authority stays in the store until the NodeId restarts).
* A node SIGKILLed in the middle of a cold activation (``ZLINK_CRASH_AT``) and
  restarted under the same NodeId resumes that activation ([3/4]): the caller on
  another node then gets its reply from the same incarnation, with the first message
  applied exactly once.

Real processes and sockets: the real clock, bounded by ``trio.fail_after``; waits on
other processes' store writes poll with a short pause (no event crosses processes).
"""

from __future__ import annotations

import time

import trio
from mesh_node_procs import factory_runs, launch, running, start_nodes

from zlink_trio.core.records import AuthorityState
from zlink_trio.store import open_store

TEST_TIMEOUT = 60
LEASE = 2.0
#: Pause between two attempts while waiting for another process (a lease to run out).
PACE = 0.2


async def live_rids(store, mesh: str = "world") -> set[str]:
    return {str(c.descriptor.node_rid) for c in await store.location.descriptors(
        mesh, now=time.time())}


async def test_sigkilled_owner_is_unavailable_and_never_recreated(mesh_url, tmp_path):
    """Item 7: a node killed with SIGKILL -> its Spots answer Unavailable from the others
    and are not recreated, even once its lease has expired."""
    ids = [f"kill-{i}" for i in range(9)]
    with trio.fail_after(TEST_TIMEOUT):
        async with open_store(mesh_url) as store, start_nodes(
                ["k0", "k1", "k2"], mesh_url, tmp_path, lease=LEASE) as nodes:
            by_rid = {node.node_rid: node for node in nodes}
            for i, spot in enumerate(ids):
                assert (await nodes[i % 3].call(op="request", spot=spot, intent=True))["ok"]
            owner = {spot: by_rid[str((await store.location.find(spot)).owner.node_rid)]
                     for spot in ids}
            victim = owner[ids[0]]
            dead = [spot for spot in ids if owner[spot] is victim]
            alive = [spot for spot in ids if owner[spot] is not victim]
            survivors = [node for node in nodes if node is not victim]
            victim.kill()
            await victim.proc.wait()

            async def check_round() -> None:
                for node in survivors:
                    for spot in dead:
                        for intent in (False, True):
                            answer = await node.call(op="request", spot=spot, intent=intent,
                                                     timeout=5)
                            assert answer.get("error") == "Unavailable", (node.name, spot,
                                                                          intent, answer)
                    for spot in alive:
                        answer = await node.call(op="request", spot=spot, n=0)
                        assert (answer["ok"], answer["node"]) == (True, owner[spot].name), answer

            await check_round()  # lease still running: the link is refused
            message = (await survivors[0].call(op="request", spot=dead[0]))["message"]
            while victim.node_rid in await live_rids(store):
                await trio.sleep(PACE)
                await check_round()
            await check_round()  # lease expired: still Unavailable, still not recreated
            records = {spot: await store.location.find(spot) for spot in dead}
    assert all(r is not None and r.state is AuthorityState.READY
               and str(r.owner.node_rid) == victim.node_rid for r in records.values()), records
    runs = factory_runs(tmp_path)
    assert sorted(spot for spot, _, _ in runs) == sorted(ids), runs  # one run each, no more
    assert message, "Unavailable says what happened and what to do"


async def test_restarted_node_resumes_an_interrupted_activation(mesh_url, tmp_path):
    """Item 7: a node restarted mid-activation resumes it ([3/4]).

    ``r0`` is the only node that takes new Spots; ``r1`` (placement weight 0) sends the
    first message with Instance intent, so ``r0`` activates the Spot and dies by SIGKILL
    after CommitReady, before the first message reached its queue. ``r1``'s call ends
    Unavailable. ``r0`` restarts under the same NodeId; its startup scan resumes the
    activation, and ``r1``'s next plain call is answered by the same incarnation with the
    first message applied exactly once.
    """
    spot = "resume-1"
    crash = {"ZLINK_CRASH_AT": "cold:after_ready_before_restore"}
    with trio.fail_after(TEST_TIMEOUT):
        async with open_store(mesh_url) as store, start_nodes(
                ["r1"], mesh_url, tmp_path, weight=0) as (caller,):
            # Short lease for the lifecycle that dies: the restarted one adopts its
            # records once that lease has run out.
            first = await launch("r0", mesh_url, tmp_path, env=crash, lease=LEASE)
            async with running(first):
                answer = await caller.call(op="request", spot=spot, n=1, intent=True)
                assert await first.proc.wait() == -9, first.stderr()  # died at the step
            assert answer.get("error") in ("Unavailable", "DeadlineExceeded"), answer
            interrupted = await store.location.find(spot)
            assert interrupted is not None
            assert interrupted.recovery_pointer is not None  # the activation is unfinished
            # Default lease (10 s): no renewal falls inside the startup scan. (A renewal
            # there stops the node today: NodeLifecycle has no 'renew' from 'claimed'.)
            async with running(await launch("r0", mesh_url, tmp_path)):
                while True:  # the restarted node's scan runs concurrently with start-up
                    record = await store.location.find(spot)
                    if record.state is AuthorityState.READY and record.recovery_pointer is None:
                        break
                    await trio.sleep(PACE)
                reply = await caller.call(op="request", spot=spot, n=10)
    assert (reply["ok"], reply["node"]) == (True, "r0"), reply
    assert reply["value"] == 1 + 10  # the first message ran once, before the later one
    assert record.object_generation == interrupted.object_generation
    runs = factory_runs(tmp_path)
    assert {(s, g, n) for s, g, n in runs} == {(spot, interrupted.object_generation, "r0")}

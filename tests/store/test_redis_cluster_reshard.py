"""Slots move between masters while cold activations run (issue #15, item 5).

Eight tasks, each with its own node claim, run activation cycles -- Reserve,
CommitReady, BeginClose, Release -- over Spot IDs whose buckets live in the hash
slots ``redis-cli --cluster reshard`` moves: the first ``SLOTS`` slots of the master
that serves slot 0 go to another master and back, ``ROUNDS`` times, while the traffic
runs. The test asserts what a user can observe:

* no operation failed except with a typed, retryable error (``Unavailable`` /
  ``StoreUnavailable`` / ``DeadlineExceeded``, after which the task re-reads the record
  and carries on from what it finds) or the protocol's own refusal (``AuthorityExists``
  when another task holds the ID);
* no double incarnation: each (Spot ID, ObjectGeneration) was reserved and committed at
  most once, and per ID the generations of the successful Reserves strictly increase
  in the order the Reserves returned (one of them can only win after the previous
  incarnation was released);
* afterwards no record is left and every lifecycle's capacity units are back to zero;
* the run did meet the migration: the router followed ``MOVED`` / ``ASK`` or retried
  ``TRYAGAIN`` at least once.
"""

from __future__ import annotations

import collections
import random
from typing import Any

import trio
from redis_helpers import cluster_test_store, cluster_url
from store_helpers import MESH, claim, units

from zlink_trio.core.errors import DeadlineExceeded, StoreUnavailable, Unavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState
from zlink_trio.store import AuthorityExists
from zlink_trio.store.redis_cluster.keys import hash_slot

TEST_TIMEOUT = 120
TASKS = 8
SLOTS = 300
ROUNDS = 3
IDS = 12
RETRYABLE = (StoreUnavailable, Unavailable, DeadlineExceeded)


async def _redis_cli(*args: str) -> str:
    done = await trio.run_process(["redis-cli", *args], capture_stdout=True,
                                  capture_stderr=True)
    return done.stdout.decode()


async def _reshard(first: str, source: str, target: str) -> None:
    host, _, port = first.rpartition(":")
    await trio.run_process(
        ["redis-cli", "--cluster", "reshard", f"{host}:{port}", "--cluster-from", source,
         "--cluster-to", target, "--cluster-slots", str(SLOTS), "--cluster-yes"],
        capture_stdout=True, capture_stderr=True)


class Traffic:
    """The tasks' shared record of what happened."""

    def __init__(self) -> None:
        self.reserved: dict[str, list[int]] = collections.defaultdict(list)
        self.committed: collections.Counter[tuple[str, int]] = collections.Counter()
        self.retryable: collections.Counter[str] = collections.Counter()
        self.untyped: list[BaseException] = []
        self.cycles = 0


async def _settle(store: Any, owner: Any, spot_id: str, traffic: Traffic,
                  gen: int | None) -> None:
    """After a retryable error: read the record and finish this task's incarnation."""
    while True:
        try:
            record = await store.location.find(spot_id)
            if record is None or record.owner != owner or (
                    gen is not None and record.object_generation != gen):
                return
            if gen is None:  # a Reserve that may have run: it did
                traffic.reserved[spot_id].append(record.object_generation)
            if record.state is AuthorityState.CREATING:
                await store.location.abort_creating(_reservation(record))
                return
            if record.state is AuthorityState.READY:
                record = await store.location.begin_close(
                    spot_id, object_generation=record.object_generation, owner=owner, now=0.0)
            await store.location.release(record.fence())
            return
        except RETRYABLE as error:
            traffic.retryable[type(error).__name__] += 1


def _reservation(record: Any) -> Any:
    from zlink_trio.core.records import ReservationFence

    return ReservationFence(spot_id=record.spot_id, store_version=record.store_version,
                            object_generation=record.object_generation,
                            owner_generation=record.owner_generation, owner=record.owner,
                            owner_lease_expires_at=0.0)


async def _cycle(store: Any, owner: Any, spot_id: str, traffic: Traffic) -> None:
    gen: int | None = None
    try:
        fence = await store.location.reserve(spot_id, kind=SpotKind.USER, stable_type="room",
                                             mesh=MESH, owner=owner, now=0.0)
        gen = fence.object_generation
        traffic.reserved[spot_id].append(gen)
        ready = await store.location.commit_ready(fence, now=0.0)
        traffic.committed[spot_id, gen] += 1
        closing = await store.location.begin_close(spot_id, object_generation=gen,
                                                   owner=owner, now=0.0)
        await store.location.release(closing.fence())
        assert ready.state is AuthorityState.READY
    except AuthorityExists:
        return
    except RETRYABLE as error:
        traffic.retryable[type(error).__name__] += 1
        await _settle(store, owner, spot_id, traffic, gen)


async def test_reshard_under_traffic_fails_nothing_untyped_and_never_doubles(tmp_path):
    with trio.fail_after(TEST_TIMEOUT):
        async with cluster_test_store() as store:
            keys = store.keys
            host, _, port = cluster_url().split("//")[1].split(",")[0].partition(":")
            nodes = await _redis_cli("-h", host, "-p", port.split("?")[0], "cluster", "nodes")
            masters = {}  # node ID -> (host:port, its slot ranges)
            for line in nodes.splitlines():
                fields = line.split()
                if "master" in fields[2]:
                    masters[fields[0]] = (fields[1].split("@")[0], fields[8:])
            source = next(n for n, (_, slots) in masters.items()
                          if any(part.split("-")[0] == "0" for part in slots))
            target = next(n for n in masters if n != source)
            first = masters[source][0]
            ids = [f"rs-{i}" for i in range(20000) if hash_slot(keys.spot(f"rs-{i}")) < SLOTS]
            ids = ids[:IDS]
            assert len(ids) == IDS
            claims = [await claim(store, f"rs-node-{i}", capacity=100, lease=1e6)
                      for i in range(TASKS)]
            traffic = Traffic()
            moving = trio.Event()

            async def work(i: int) -> None:
                rng = random.Random(i)
                owner = claims[i].owner()
                while not moving.is_set() or traffic.cycles < 200:
                    try:
                        await _cycle(store, owner, rng.choice(ids), traffic)
                    except Exception as error:
                        traffic.untyped.append(error)
                    traffic.cycles += 1

            async def reshard() -> None:
                for _ in range(ROUNDS):
                    await _reshard(first, source, target)
                    await _reshard(first, target, source)
                moving.set()

            async with trio.open_nursery() as nursery:
                for i in range(TASKS):
                    nursery.start_soon(work, i)
                nursery.start_soon(reshard)

            assert not traffic.untyped, traffic.untyped[:3]
            for spot_id, gens in traffic.reserved.items():
                assert gens == sorted(set(gens)), f"{spot_id}: reserved generations {gens}"
            assert max(traffic.committed.values()) == 1, traffic.committed.most_common(3)
            assert sum(traffic.committed.values()) > 0
            for spot_id in ids:
                assert await store.location.find(spot_id) is None
            for c in claims:
                assert await units(store, c) == (0, 0)
            router = store.router
            followed = router.moved + router.asked + router.retried
            print(f"cycles {traffic.cycles}, committed {sum(traffic.committed.values())}, "
                  f"moved {router.moved}, asked {router.asked}, retried {router.retried}, "
                  f"retryable errors {dict(traffic.retryable)}")
            assert followed > 0, "the traffic never met a moving slot"

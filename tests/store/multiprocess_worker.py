"""One OS process of ``test_multiprocess.py``: a node that drives the store protocol itself.

Run as a script with the venv's python (the parent test does this)::

    python tests/store/multiprocess_worker.py --url URL --log LOG --out OUT --seed S
        [--attempts 200] [--ids 10] [--fault skip-reserve-check]

Handshake with the parent: the worker opens ``URL``, stores its node claim
(its own descriptor serving ``room`` as USER, a generous lease, capacity far
above what ten Spot IDs can use), prints ``ready <pid>`` on stdout and waits
for one line on stdin (``go``), so that the three processes start their
attempts together. It then runs ``--attempts`` concurrent GetOrCreate
attempts (trio tasks) over the Spot IDs ``mp-0`` .. ``mp-<ids-1>`` and one
closer task that repeatedly closes (BeginClose + Release) a Ready record this
process owns, so that other attempts -- in any process -- re-create it.

Each attempt is driven *by* the compiled ``UserCreate`` table: the loop looks
at the current chart state, does the store call that state calls for, and
steps the table with the event naming the store's answer (an undefined step
raises and is reported). Every store write the attempt makes is recorded as a
``SpotAuthority`` step ``[from, event, to]``, where ``to`` is what the store
answered (the returned record's state, or ``missing`` for a delete that
returned ``True``), so the parent can check it against the table.

Meeting a *Closing* record takes ``found_closing`` / ``reserve_lost_closing``
into the same wait as a Creating one; the wait ends only on a Ready record
(``other_attempt_ready``) or Missing (``other_attempt_missing``).

The factory appends one line ``pid spot_id generation`` to the shared
side-effect log ``LOG`` with a single ``O_APPEND`` write, so the file is one
total order of factory runs across all processes. The results go to ``OUT``
as JSON (written via a temporary file and renamed).

``--fault skip-reserve-check`` makes the worker deliberately wrong: when
Reserve refuses because another attempt holds the ID in Creating, the
attempt runs the factory anyway (under the holder's generation) and then
reports a rejection. The parent's duplicate-factory check must fail then.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import trio

from statecharts import SpotAuthority, UserCreate, compile
from zlink_trio.core.errors import CapacityExceeded
from zlink_trio.core.identity import NodeRid, SpotKind
from zlink_trio.core.records import AuthorityState
from zlink_trio.store import AuthorityExists, open_store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from store_helpers import MESH, descriptor

UC = compile(UserCreate)
SA = compile(SpotAuthority)
STABLE_TYPE = "room"
LEASE = 3600.0
CAPACITY = 10_000
#: Attempts start at a random moment in this window (the first BURST at once).
WINDOW = 3.0
BURST = 40
#: Deadline of one attempt (spans waiting on other attempts, like the runtime's).
ATTEMPT_DEADLINE = 20.0
REJECT_PROBABILITY = 0.15
CLOSE_ROUNDS = 25


def now() -> float:
    """The store clock: CLOCK_MONOTONIC is one clock for every process on this host."""
    return time.monotonic()


def append_line(path: str, line: str) -> None:
    """One ``O_APPEND`` write of one line: atomic against the other processes' writes."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        data = line.encode()
        assert os.write(fd, data) == len(data)
    finally:
        os.close(fd)


class Worker:
    def __init__(self, store: Any, args: argparse.Namespace, claim: Any) -> None:
        self.store = store.location
        self.args = args
        self.me = claim.owner()
        self.rng = random.Random(args.seed)
        self.pid = os.getpid()
        self.owned: dict[str, int] = {}  # spot_id -> generation this process committed
        self.attempts: list[dict[str, Any]] = []
        self.closes: list[dict[str, Any]] = []

    # -- one GetOrCreate attempt, driven by the UserCreate table ------------------------

    async def attempt(self, k: int, spot_id: str, delay: float) -> None:
        result: dict[str, Any] = {"k": k, "spot_id": spot_id, "uc": [], "sa": [],
                                  "generation": None, "committed_at": None, "error": None,
                                  "fault": False, "lost_to": [],
                                  "waited_on": []}
        self.attempts.append(result)
        state = UC.initial

        def event(name: str) -> None:
            nonlocal state
            result["uc"].append(name)
            state = UC.step(state, name)

        await trio.sleep(delay)
        deadline = now() + ATTEMPT_DEADLINE
        fence: Any = None
        try:
            while not UC.is_final(state):
                if state == "validating":
                    event("spot_id_given")
                elif state == "resolving":
                    found = await self.store.find(spot_id)
                    if found is None:
                        event("found_missing")
                    elif not found.matches(SpotKind.USER, STABLE_TYPE):
                        event("found_type_mismatch")
                    elif found.state is AuthorityState.READY:
                        result["generation"] = found.object_generation
                        event("found_ready")
                    else:  # Creating or Closing: wait for the authority to change
                        result["waited_on"].append(str(found.owner.node_rid))
                        event("found_closing" if found.state is AuthorityState.CLOSING
                              else "found_creating")
                elif state == "waiting_on_creating":
                    event(await self.wait_for_change(spot_id, deadline, result))
                elif state == "selecting_placement":
                    # Placement reads the live descriptors (06 §3.1); this node is the one.
                    live = await self.store.descriptors(MESH, now=now())
                    if self.me not in [c.owner() for c in live]:
                        raise AssertionError(f"own claim {self.me!r} is not live: {live!r}")
                    event("placement_selected")
                elif state == "reserving":
                    try:
                        fence = await self.store.reserve(
                            spot_id, kind=SpotKind.USER, stable_type=STABLE_TYPE, mesh=MESH,
                            owner=self.me, now=now())
                    except AuthorityExists as exists:
                        current = exists.current
                        result["lost_to"].append(str(current.owner.node_rid))
                        if not current.matches(SpotKind.USER, STABLE_TYPE):
                            event("reserve_lost_type_mismatch")
                        elif current.state is AuthorityState.READY:
                            result["generation"] = current.object_generation
                            event("reserve_lost_ready")
                        elif (self.args.fault == "skip-reserve-check"
                              and current.state is AuthorityState.CREATING):
                            # Deliberately wrong: act as if Reserve had been won.
                            result["fault"] = True
                            event("reserve_won")
                            await self.factory(spot_id, current.object_generation)
                            event("create_rejected")
                            event("abort_creating")
                        else:
                            result["waited_on"].append(str(current.owner.node_rid))
                            event("reserve_lost_closing"
                                  if current.state is AuthorityState.CLOSING
                                  else "reserve_lost_creating")
                    except CapacityExceeded:
                        event("reserve_refused_capacity")
                    else:
                        result["generation"] = fence.object_generation
                        result["sa"].append(["missing", "reserve", "creating"])
                        event("reserve_won")
                elif state == "running_factory":
                    await self.factory(spot_id, fence.object_generation)
                    if self.rng.random() < REJECT_PROBABILITY:
                        event("create_rejected")
                    else:
                        event("create_accepted")
                elif state == "committing_ready":
                    record = await self.store.commit_ready(fence, now=now())
                    result["committed_at"] = time.monotonic_ns()
                    result["sa"].append(["creating", "commit_ready", record.state.value])
                    if record.object_generation != fence.object_generation:
                        raise AssertionError(f"commit_ready returned {record!r} for {fence!r}")
                    self.owned[spot_id] = record.object_generation
                    event("commit_ready")
                elif state == "cleaning_up_rejected":
                    deleted = await self.store.abort_creating(fence)
                    result["sa"].append(["creating", "abort_creating",
                                         "missing" if deleted else "not-deleted"])
                    event("abort_creating")
                else:
                    raise AssertionError(f"the worker has no step for UserCreate state {state!r}")
        except Exception as error:  # reported to the parent, which fails the test
            result["error"] = "".join(traceback.format_exception(error))
        result["final"] = state

    async def wait_for_change(self, spot_id: str, deadline: float,
                              result: dict[str, Any]) -> str:
        """Poll ``find`` with backoff until Ready (existing), Missing (compete) or deadline."""
        pause = 0.002
        while True:
            if now() >= deadline:
                return "deadline_expired"
            await trio.sleep(pause)
            pause = min(pause * 2, 0.05)
            found = await self.store.find(spot_id)
            if found is None:
                return "other_attempt_missing"
            if found.state is AuthorityState.READY:
                result["generation"] = found.object_generation
                return "other_attempt_ready"

    async def factory(self, spot_id: str, generation: int) -> None:
        """The side effect that must run once per (ID, generation): one log line."""
        await trio.sleep(self.rng.uniform(0.0, 0.01))  # a Creating window others can meet
        append_line(self.args.log, f"{self.pid} {spot_id} {generation}\n")

    # -- close / re-create rounds --------------------------------------------------------

    async def closer(self) -> None:
        for _ in range(CLOSE_ROUNDS):
            await trio.sleep(self.rng.uniform(0.5, 1.5) * WINDOW / CLOSE_ROUNDS)
            if not self.owned:
                continue
            spot_id = self.rng.choice(sorted(self.owned))
            generation = self.owned.pop(spot_id)
            close: dict[str, Any] = {"spot_id": spot_id, "generation": generation, "sa": [],
                                     "error": None}
            self.closes.append(close)
            try:
                found = await self.store.find(spot_id)
                if (found is None or found.object_generation != generation
                        or found.owner != self.me or found.state is not AuthorityState.READY):
                    raise AssertionError(f"{spot_id} generation {generation} committed by this "
                                         f"process is no longer its Ready record: {found!r}")
                closing = await self.store.begin_close(
                    spot_id, object_generation=generation, owner=self.me, now=now(),
                    expected_owner_generation=found.owner_generation,
                    expected_store_version=found.store_version)
                close["sa"].append(["ready", "begin_close",
                                    "missing" if closing is None else closing.state.value])
                released = await self.store.release(closing.fence())
                close["sa"].append(["closing", "release",
                                    "missing" if released else "not-deleted"])
                close["released_at"] = time.monotonic_ns()
            except Exception as error:
                close["error"] = "".join(traceback.format_exception(error))

    # -- the whole run -------------------------------------------------------------------

    async def run(self) -> None:
        ids = [f"mp-{i}" for i in range(self.args.ids)]
        async with trio.open_nursery() as nursery:
            for k in range(self.args.attempts):
                delay = 0.0 if k < BURST else self.rng.uniform(0.0, WINDOW)
                nursery.start_soon(self.attempt, k, ids[k % len(ids)], delay)
            nursery.start_soon(self.closer)


async def main(args: argparse.Namespace) -> None:
    with trio.fail_after(args.timeout):
        async with open_store(args.url) as store:
            node = descriptor(f"mp{args.index}", node_rid=NodeRid.generate(), capacity=CAPACITY,
                              served={STABLE_TYPE: SpotKind.USER})
            claim = await store.location.new_claim(node, now=now(), lease=LEASE)
            print(f"ready {os.getpid()}", flush=True)
            line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if line.strip() != "go":
                raise SystemExit(f"expected 'go' from the parent, got {line!r}")
            worker = Worker(store, args, claim)
            started = time.monotonic()
            await worker.run()
            out = {"pid": worker.pid, "index": args.index, "seed": args.seed,
                   "node_rid": str(claim.descriptor.node_rid),
                   "lifecycle_generation": claim.lifecycle_generation,
                   "entry_spot_id": claim.descriptor.entry_spot_id,
                   "started": started, "elapsed": time.monotonic() - started,
                   "attempts": sorted(worker.attempts, key=lambda a: a["k"]),
                   "closes": worker.closes}
    write_atomically(args.out, json.dumps(out))


def write_atomically(path: str, text: str) -> None:
    """Write ``path`` whole or not at all (a temporary file renamed over it)."""
    tmp = f"{path}.tmp"
    Path(tmp).write_text(text)
    os.replace(tmp, path)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--attempts", type=int, default=200)
    parser.add_argument("--ids", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--fault", choices=["", "skip-reserve-check"], default="")
    return parser.parse_args(argv)


if __name__ == "__main__":
    trio.run(main, parse_args())

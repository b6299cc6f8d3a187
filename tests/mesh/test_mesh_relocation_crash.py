"""SIGKILL of the source or of the target at each step of a relocation (issue #11).

For every relocation crash point (``zlink_trio/runtime/crash_points.py``;
source: ``before_seal``, ``sealed``, ``captured``, ``committed``, ``relaying``; target:
``target_reserved``, ``restored``, ``relay_ready``, ``target_committed``), on a SQLite
file and on Redis (a fresh key prefix per scenario): two node processes share the
store -- ``s`` owns the Spot (a ``MeshMover``: every handled ``Step(seq)`` is logged
with its node), ``t`` is the target -- and a caller node ``c`` runs in the test's
process (a real node with a listening link; it owns nothing). ``c`` sends acknowledged
steps 1..2 and ``t`` step 3; then ``c`` keeps sending steps 10000, 10001, ... (each waits
for its reply) while ``s`` moves the Spot to ``t``, and the process whose role the
step belongs to -- started with ``ZLINK_CRASH_AT=relocation:<step>``, the only one --
SIGKILLs itself there. The survivors and the store are then observed, including a new
caller ``d`` that has no cached route. Where the issue's rule says "until it restarts"
(``RESTARTS``), the victim restarts under its NodeId once its lease ran out and the
Spot is called once more.

The scenarios of both backends run concurrently (``PARALLEL`` at once) in one module
fixture; each test then checks one scenario:

* ``test_..._never_two_owners_and_no_acknowledged_message_runs_twice`` -- every step
  is handled at most once, every acknowledged one exactly once and by the node its
  reply names; no process other than the one the store's record names hosts the Spot;
  one incarnation (one factory run at ``s``, at most one restored shell at ``t``).
* ``test_..._outcome`` -- the issue's rule: before relay-ready the source serves again
  when the target died, and the Spot is Unavailable until the source restarts when
  the source died; after relay-ready the target serves when the source died, and the
  Spot is Unavailable until the target restarts when the target died. The restart
  releases what its dead lifecycle owned (issue #13 item 1, ``store.dead_lifecycle``):
  a move that had not reached relay-ready is aborted and released, a committed record
  released, a RelayReady record (the target died before committing, issue #26 item 4)
  released -- not resumed (06 §8, ``docs/decisions.md``) -- and the next Instance-intent
  call activates a new incarnation. No payload root is left once the restart is done.
* ``test_the_target_died_after_relay_ready_row_loses_and_duplicates_nothing`` -- the
  row the issue names: 0 lost (every acknowledged step ran, where its reply says), 0
  duplicated (no step ran twice), every call ended, and the Spot usable again.
* ``test_a_caller_whose_route_names_the_dead_source_reaches_the_target_next`` --
  ``committed`` and ``relaying``: ``c``'s cached route names the dead source.

Every process and wait is bounded by a timeout; the wait for a
dead process's lease polls the store with a short pause (no event crosses processes).
"""
from __future__ import annotations

import collections
import importlib.util
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
from mesh_node_procs import (
    InProcNode,
    factory_runs,
    handled_steps,
    in_process,
    launch,
    stop,
    wait_ready,
)

from zlink_trio.store import open_store

if TYPE_CHECKING:
    from mesh_node_procs import NodeProc

HERE = Path(__file__).parent

SPOT = "moving-1"
SOURCE_STEPS = ("before_seal", "sealed", "captured", "committed", "relaying")
TARGET_STEPS = ("target_reserved", "restored", "relay_ready", "target_committed")
SCENARIOS = [(step, "source") for step in SOURCE_STEPS] + [
    (step, "target") for step in TARGET_STEPS]
IDS = [f"{victim}-{step}" for step, victim in SCENARIOS]
BACKENDS = ("sqlite", "redis", "postgresql")
PARALLEL = 6
SCENARIO_TIMEOUT = 45
#: The victim's lease when it is not restarted: long enough that a caller's cached route
#: to it is still within the lease when the test calls right after the kill ...
VICTIM_LEASE = 4.0
#: ... and when it is: the restart waits for it to run out.
RESTART_LEASE = 1.5
#: Where the issue's rule says "until it restarts" (the Spot is Unavailable meanwhile),
#: the victim restarts under its NodeId and the survivors call the Spot once more.
RESTARTS = {("before_seal", "source"), ("sealed", "source"), ("captured", "source"),
            ("relay_ready", "target"), ("target_committed", "target")}
#: Of those, where the restart releases the record (``store.dead_lifecycle``: the dead
#: lifecycle owned it, or -- ``relay_ready`` -- was the target of its move past relay-ready)
#: and the Spot is usable again as a new incarnation: all of them.
RELEASED = RESTARTS
#: The source's ``default_timeout``: how long it waits for a target past relay-ready.
SETTLE = 2.0
#: Each call's own deadline inside the worker.
CALL = 3.0
PACE = 0.2
#: ``c``'s stream of steps during the move: STREAM_FIRST, STREAM_FIRST + 1, ... -- above
#: every fixed step number of a scenario (1..3, 200..203, 300, 400..402), however many it
#: sends before the victim dies (a slow store on a loaded machine makes the move take
#: hundreds of steps): two requests with one number would look like one run twice.
STREAM_FIRST = 10_000
STREAM_MAX = 100_000

def postgres_helpers() -> Any:
    spec = importlib.util.spec_from_file_location(
        "relocation_crash_postgres_helpers", HERE.parent / "store" / "postgres_helpers.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def redis_helpers() -> Any:
    spec = importlib.util.spec_from_file_location(
        "relocation_crash_redis_helpers", HERE.parent / "store" / "redis_helpers.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@attrs.define
class Outcome:
    """What one scenario observed (``record*`` are ``(state, owner, target, owner gen)``
    with the owner and target as ``"s"`` / ``"t"``)."""

    victim_rc: int | None
    pre: list[dict[str, Any]]
    right_after: list[dict[str, Any]]
    relocate: dict[str, Any] | None
    stream: list[dict[str, Any]]
    settled: dict[str, dict[str, Any]]
    record: tuple[Any, ...] | None
    roots: int
    hosts: dict[str, list[str]]
    restarted: dict[str, dict[str, Any]]
    record_after_restart: tuple[Any, ...] | None
    roots_after_restart: int | None
    hosts_after_restart: dict[str, list[str]]
    handled: list[tuple[str, int, str]]
    factories: list[tuple[str, int, str]]
    stderr: str

    def acknowledged(self) -> list[dict[str, Any]]:
        answers = [*self.pre, *self.right_after, *self.stream, *self.settled.values(),
                   *self.restarted.values()]
        return [a for a in answers if a.get("ok")]


async def _record(store: Any, roles: dict[str, str]) -> tuple[Any, ...] | None:
    record = await store.location.find(SPOT)
    if record is None:
        return None
    target = record.relocation_target
    return (record.state.value, roles.get(str(record.owner.node_rid), "?"),
            None if target is None else roles.get(str(target.node_rid), "?"),
            record.owner_generation)


async def _lease_ran_out(store: Any, node: NodeProc) -> None:
    while True:
        claims = await store.location.descriptors("world", now=time.time())
        if node.node_rid not in {str(claim.descriptor.node_rid) for claim in claims}:
            return
        await trio.sleep(PACE)  # another process's lease: polled, nothing to wait on


async def _hosts(nodes: list[NodeProc]) -> dict[str, list[str]]:
    return {node.name: (await node.call(op="hosts"))["hosts"] for node in nodes}


async def _scenario(step: str, victim_role: str, url: str, tmp: Path) -> Outcome:
    crash = {"ZLINK_CRASH_AT": f"relocation:{step}"}
    on_source = victim_role == "source"
    restarts = (step, victim_role) in RESTARTS
    lease = {"lease": RESTART_LEASE if restarts else VICTIM_LEASE}
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(open_store(url))

        async def start(name: str, **options: Any) -> NodeProc:
            node = await launch(name, url, tmp, **options)
            stack.push_async_callback(stop, node)
            return node

        async def caller(name: str) -> InProcNode:
            return await stack.enter_async_context(in_process(name, url, tmp, weight=0))

        s = await start("s", env=crash if on_source else None, default_timeout=SETTLE,
                        **(lease if on_source else {}))
        t = await start("t", env=None if on_source else crash, weight=0,
                        **({} if on_source else lease))
        c = await caller("c")
        async with trio.open_nursery() as nursery:
            for node in (s, t):
                nursery.start_soon(wait_ready, node)
        roles = {s.node_rid: "s", t.node_rid: "t"}
        victim, survivor = (s, t) if on_source else (t, s)

        pre = [await c.call(op="step", spot=SPOT, seq=1, intent=True),
               await c.call(op="step", spot=SPOT, seq=2),
               await t.call(op="step", spot=SPOT, seq=3)]
        assert [(a["ok"], a["node"]) for a in pre] == [(True, "s")] * 3, pre
        await c.call(op="spawn", tag="stream", cmd={
            "op": "stream", "spot": SPOT, "first": STREAM_FIRST, "stop_after": STREAM_MAX,
            "timeout": CALL})
        await s.call(op="spawn", tag="move", cmd={
            "op": "relocate", "spot": SPOT, "to": "t", "timeout": 10})
        with trio.fail_after(20):
            victim_rc = await victim.proc.wait()
        right_after = []
        if on_source:  # at once: c's route cache still names the node it last reached
            right_after = [await c.call(op="step", spot=SPOT, seq=200, timeout=CALL),
                           await c.call(op="step", spot=SPOT, seq=201, timeout=CALL)]
        relocate = None if on_source else await s.call(op="join", tag="move")
        await c.call(op="stop_stream")
        stream = (await c.call(op="join", tag="stream"))["results"]
        fresh = await caller("d")  # a caller without a cached route
        settled = {"c": await c.call(op="step", spot=SPOT, seq=202, timeout=CALL),
                   "d": await fresh.call(op="step", spot=SPOT, seq=203, timeout=CALL),
                   survivor.name: await survivor.call(op="step", spot=SPOT, seq=300,
                                                      timeout=CALL)}
        record = await _record(store, roles)
        roots = (await store.relocation.statistics()).roots
        hosts = await _hosts([survivor])
        restarted: dict[str, dict[str, Any]] = {}
        record_after_restart, roots_after_restart, hosts_after_restart = None, None, {}
        again = None
        if restarts:
            await _lease_ran_out(store, victim)
            again = await start(victim.name, weight=1 if on_source else 0,
                                default_timeout=SETTLE)
            await wait_ready(again)
            roles[again.node_rid] = victim.name
            restarted = {
                # Released by the restart when the dead lifecycle owned the record: the
                # Instance-intent call activates a new incarnation (RELEASED).
                "again": await again.call(op="step", spot=SPOT, seq=400, timeout=CALL,
                                          intent=(step, victim_role) in RELEASED),
                "c": await c.call(op="step", spot=SPOT, seq=401, timeout=CALL),
                survivor.name: await survivor.call(op="step", spot=SPOT, seq=402,
                                                   timeout=CALL)}
            record_after_restart = await _record(store, roles)
            roots_after_restart = (await store.relocation.statistics()).roots
            hosts_after_restart = {f"{victim.name} restarted": (await again.call(op="hosts"))[
                "hosts"], **await _hosts([survivor])}
        procs = [s, t] if again is None else [s, t, again]
        stderr = "\n".join(f"--- {n.name}:\n{n.stderr()}" for n in procs)
    return Outcome(
        victim_rc=victim_rc, pre=pre, right_after=right_after, relocate=relocate,
        stream=stream, settled=settled, record=record, roots=roots, hosts=hosts,
        restarted=restarted, record_after_restart=record_after_restart,
        roots_after_restart=roots_after_restart, hosts_after_restart=hosts_after_restart,
        handled=handled_steps(tmp), factories=factory_runs(tmp), stderr=stderr[-6000:])


def _run_all(urls: dict[tuple[str, str, str], str], tmp: Path
             ) -> dict[tuple[str, str, str], Outcome | BaseException]:
    outcomes: dict[tuple[str, str, str], Outcome | BaseException] = {}

    async def main() -> None:
        limiter = trio.CapacityLimiter(PARALLEL)

        async def one(key: tuple[str, str, str]) -> None:
            backend, step, victim = key
            where = tmp / f"{backend}-{victim}-{step}"
            where.mkdir()
            async with limiter:
                try:
                    with trio.fail_after(SCENARIO_TIMEOUT):
                        outcomes[key] = await _scenario(step, victim, urls[key], where)
                except Exception as exc:  # reported by the scenario's own tests
                    outcomes[key] = exc

        async with trio.open_nursery() as nursery:
            for key in urls:
                nursery.start_soon(one, key)

    trio.run(main)
    return outcomes


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Every scenario of every backend (Redis and PostgreSQL only when they answer)."""
    helpers = redis_helpers()
    tmp = tmp_path_factory.mktemp("relocation-crash")

    async def reachable() -> str:
        try:
            async with helpers.raw_client() as client:
                await client.command(["PING"])
        except Exception as exc:
            return str(exc)
        return ""

    problem = trio.run(reachable)
    postgres = postgres_helpers()
    try:
        postgres.ping()
    except Exception as exc:
        postgres_problem = str(exc)
    else:
        postgres_problem = ""
    run = uuid.uuid4().hex[:8]
    urls: dict[tuple[str, str, str], str] = {}
    prefixes = []
    schemas = []
    for step, victim in SCENARIOS:
        urls[("sqlite", step, victim)] = (
            f"sqlite://{tmp / f'{victim}-{step}.db'}?busy_timeout=5")
        if not problem:
            prefix = f"zlreloc-{run}-{victim}-{step}".replace("_", "-")
            prefixes.append(prefix)
            urls[("redis", step, victim)] = helpers.url_with(prefix)
        if not postgres_problem:
            schema = postgres.fresh_prefix()
            schemas.append(schema)
            urls[("postgresql", step, victim)] = postgres.url_with(schema)
    try:
        yield _run_all(urls, tmp), {"redis": problem, "postgresql": postgres_problem}
    finally:
        async def cleanup() -> None:
            for prefix in prefixes:
                await helpers.delete_prefix(prefix)
            for schema in schemas:
                await postgres.drop_prefix(schema)
        trio.run(cleanup)


def _outcome(outcomes: Any, backend: str, step: str, victim: str) -> Outcome:
    found, problems = outcomes
    if problems.get(backend):
        (redis_helpers() if backend == "redis" else postgres_helpers()).unreachable(
            problems[backend])
    outcome = found[(backend, step, victim)]
    if isinstance(outcome, BaseException):
        raise outcome
    assert isinstance(outcome, Outcome)
    return outcome


def _unavailable(answer: dict[str, Any]) -> bool:
    return answer.get("error") == "Unavailable"


def _served_by(answer: dict[str, Any], node: str) -> bool:
    return bool(answer.get("ok")) and answer.get("node") == node


def scenario_params() -> list[Any]:
    return [pytest.param(backend, step, victim, id=f"{backend}-{name}")
            for backend in BACKENDS
            for (step, victim), name in zip(SCENARIOS, IDS, strict=True)]


@pytest.mark.parametrize(("backend", "step", "victim"), scenario_params())
def test_a_node_killed_during_a_move_leaves_never_two_owners_and_no_acknowledged_message_runs_twice(
        outcomes, backend, step, victim):
    """A SIGKILL at any step: never two owners, no acknowledged message run twice."""
    o = _outcome(outcomes, backend, step, victim)
    assert o.victim_rc == -9, o.stderr  # it died at the step, by SIGKILL
    assert all(a["ok"] for a in o.pre), o.pre
    runs = collections.Counter(seq for _, seq, _ in o.handled)
    assert [seq for seq, n in runs.items() if n > 1] == [], o.handled  # nothing ran twice
    handler = {seq: node for _, seq, node in o.handled}
    for answer in o.acknowledged():
        assert handler.get(answer["seq"]) == answer["node"], (answer, o.handled)
    # The store names one owner; no other process hosts the Spot, before the restart or
    # after it.
    assert o.record is not None
    observed = [(o.record, o.hosts)]
    if o.restarted:
        observed.append((o.record_after_restart, o.hosts_after_restart))
    for record, hosts in observed:
        assert record is not None
        hosting = {name.split()[0] for name, spots in hosts.items() if SPOT in spots}
        assert hosting <= {record[1]}, (record, hosts)
    # One incarnation: built once at s, at most once more (the restored shell) at t --
    # and, once a restart released the dead lifecycle's record, one new incarnation
    # (a larger generation) built once.
    by_generation = collections.defaultdict(list)
    for _, generation, node in o.factories:
        by_generation[generation].append(node)
    first, *later = sorted(by_generation)
    assert sorted(by_generation[first]) in (["s"], ["s", "t"]), o.factories
    assert len(later) == (1 if (step, victim) in RELEASED else 0), o.factories
    assert all(len(by_generation[g]) == 1 for g in later), o.factories


@pytest.mark.parametrize(("backend", "step", "victim"), scenario_params())
def test_a_node_killed_during_a_move_outcome(outcomes, backend, step, victim):
    """The issue's rule for the step and the killed process (module docstring)."""
    o = _outcome(outcomes, backend, step, victim)
    assert o.victim_rc == -9, o.stderr
    if victim == "target" and step in ("target_reserved", "restored"):
        # Before relay-ready, the target died: the move aborts, the source serves again.
        assert o.relocate is not None
        assert o.relocate["outcome"] == "aborted", o.relocate
        assert o.record == ("ready", "s", None, 1)
        assert all(_served_by(a, "s") for a in o.settled.values()), o.settled
        assert o.hosts == {"s": [SPOT]}
        assert o.roots == 0
    elif victim == "source" and step in ("before_seal", "sealed", "captured"):
        # Before relay-ready, the source died: Unavailable until it restarts. The restart
        # aborts the move and releases the record its dead lifecycle owned; the next
        # Instance-intent call activates a new incarnation on the restarted source.
        state = "relocating" if step == "before_seal" else "sealed"
        assert o.record == (state, "s", "t", 1)
        assert all(_unavailable(a) for a in o.settled.values()), o.settled
        assert o.hosts == {"t": []}
        _assert_served_again(o)
        assert o.hosts_after_restart == {"s restarted": [SPOT], "t": []}
        # A captured payload root is named on the Sealed record: the restart deletes it.
        leftover = 1 if step == "captured" else 0
        assert (o.roots, o.roots_after_restart) == (leftover, 0)
    elif victim == "source":
        # After relay-ready (committed at the target), the source died: the target serves
        # -- its own calls and a caller that resolves afresh (for a caller whose cached
        # route names the dead source, see the test below).
        assert o.record == ("ready", "t", None, 2)
        assert _served_by(o.settled["t"], "t"), o.settled
        assert _served_by(o.settled["d"], "t"), o.settled
        assert o.hosts == {"t": [SPOT]}
        assert o.roots == 0
    else:
        # After relay-ready, the target died: Unavailable until the target restarts.
        assert o.relocate is not None
        if step == "relay_ready":
            # The target never committed and the record is still the source's: the
            # source cannot abort, the target's restart releases the move (it is not
            # resumed, 06 §8) and deletes its payload root; the source's incarnation
            # ends, and the next Instance-intent call activates a new one (on ``s``).
            assert _unavailable(o.relocate), o.relocate
            assert o.record == ("relay_ready", "s", "t", 1)
            assert o.roots == 1
            _assert_served_again(o)
            assert o.hosts_after_restart == {"t restarted": [], "s": [SPOT]}
        else:
            # Committed: the dead target owned the Ready record; its restart releases
            # it, and the next Instance-intent call activates a new incarnation
            # (placed on ``s``: the restarted target takes no new Spots, weight 0).
            assert o.relocate["outcome"] == "committed", o.relocate
            assert o.record == ("ready", "t", None, 2)
            assert o.hosts == {"s": []}
            _assert_served_again(o)
            assert o.hosts_after_restart == {"t restarted": [], "s": [SPOT]}
            # The target died before deleting the payload root; the source, which saw
            # the commit in the store, deleted it.
            assert o.roots == 0
        assert all(_unavailable(a) for a in o.settled.values()), o.settled
        assert o.roots_after_restart == 0  # no payload root is left


def _assert_served_again(o: Outcome) -> None:
    """After the restart released the record: one new incarnation at ``s`` serves all."""
    assert o.record_after_restart == ("ready", "s", None, 1), o.record_after_restart
    assert all(_served_by(a, "s") for a in o.restarted.values()), o.restarted
    assert o.restarted["again"]["count"] == 1, o.restarted  # a new state: nothing moved


@pytest.mark.parametrize(("backend", "step", "victim"), [
    pytest.param(backend, step, "source", id=f"{backend}-source-{step}")
    for backend in BACKENDS for step in ("committed", "relaying")])
def test_a_caller_whose_route_names_the_dead_source_reaches_the_target_next(
        outcomes, backend, step, victim):
    """After relay-ready the target serves when the source died -- also for a caller
    whose cached route names the dead source: its call may fail (it is not resent), but
    its next call resolves afresh and reaches the target."""
    o = _outcome(outcomes, backend, step, victim)
    failed, following = o.right_after
    assert o.record == ("ready", "t", None, 2)
    assert _unavailable(failed) or _served_by(failed, "t"), failed
    assert _served_by(following, "t"), following


def lost_and_duplicated(o: Outcome) -> tuple[int, int]:
    """``(lost, duplicated)``: acknowledged steps that did not run where their reply says
    (or at all), and steps that ran more than once."""
    runs = collections.Counter(seq for _, seq, _ in o.handled)
    handler = {seq: node for _, seq, node in o.handled}
    lost = sum(1 for a in o.acknowledged() if handler.get(a["seq"]) != a["node"])
    return lost, sum(1 for n in runs.values() if n > 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_target_died_after_relay_ready_row_loses_and_duplicates_nothing(
        outcomes, backend):
    """SIGKILL of the target after relay-ready, restart under the same NodeId: the Spot
    is usable again, 0 lost / 0 duplicated, every call ended, no payload root left."""
    o = _outcome(outcomes, backend, "relay_ready", "target")
    assert o.victim_rc == -9, o.stderr
    assert lost_and_duplicated(o) == (0, 0), o.handled
    answers = [*o.pre, *o.stream, *o.settled.values(), *o.restarted.values()]
    assert all(a.get("ok") or a.get("error") for a in answers), answers  # each one ended
    assert all(_served_by(a, "s") for a in o.restarted.values()), o.restarted
    assert o.roots_after_restart == 0

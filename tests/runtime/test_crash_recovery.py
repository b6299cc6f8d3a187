"""Crash recovery (06 §4.1.1): SIGKILL at each activation step, restart the same NodeId.

For every step of cold activation and of User Spot creation on a SQLite file and on
Redis (a fixed key prefix per scenario): a
node process ``n1`` (lease 1 s) runs the first operation with ``ZLINK_CRASH_AT=<step>``
and dies with SIGKILL at that step; then ``n1`` restarts on the same store while a
second node ``n2`` keeps sending the same Spot a request with Instance intent. The
restarted node's startup scan must leave no Creating record, run the first message's
handler (exactly once, or twice only when the kill fell between the handler's end and
its completion record), remove the recovery pointer and the root, and ``n2`` must
never create the Spot: while ``n1`` is down ``n2`` sees its authority and ends
Unavailable / DeadlineExceeded, and once ``n1`` serves again ``n2``'s messages reach the
recovered incarnation on ``n1`` over the mesh (they are handled there, never by ``n2``).

The scenarios of one backend run concurrently (at most four at once) in a module
fixture; each test then checks one scenario's outcome. Every process and wait is
bounded by a timeout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

HERE = Path(__file__).parent
WORKER = HERE / "crash_worker.py"
PROCESS_TIMEOUT = 40
PARALLEL = 4

#: SQLite and Redis hold both stores in one backend, so cold activation merges root +
#: Reserve, first record + CommitReady and the three cleanup writes into one transaction
#: each (``store.combined``); every cold crash point (``_crash.COLD_STEPS``) falls before
#: or after one of them. ``after_factory_before_commit`` falls before the first record
#: is appended.
COLD = ("after_reserve", "in_factory",
        "after_factory_before_commit", "after_ready_before_restore",
        "after_first_handler_before_completion")
CREATE = ("after_reserve", "in_factory", "after_factory_before_commit")
SCENARIOS = [("cold", s) for s in COLD] + [("create", s) for s in CREATE]
#: Redis runs every step too: the recovery paths are the same code, but each backend's
#: adopt/orphans transactions and inbox reads are its own.
REDIS_SCENARIOS = SCENARIOS


def _postgres_helpers() -> Any:
    spec = importlib.util.spec_from_file_location(
        "crash_recovery_postgres_helpers", HERE.parent / "store" / "postgres_helpers.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _redis_helpers() -> Any:
    spec = importlib.util.spec_from_file_location(
        "crash_recovery_redis_helpers", HERE.parent / "store" / "redis_helpers.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@attrs.define
class Outcome:
    first_rc: int
    restart: list[dict[str, Any]]
    other: dict[str, Any] | None
    side: list[list[str]]
    stderr: str


async def _run(mode: str, url: str, side: Path, crash: str | None = None,
               marker: Path | None = None) -> tuple[int, str, str]:
    env = dict(os.environ)
    env.pop("ZLINK_CRASH_AT", None)
    if crash is not None:
        env["ZLINK_CRASH_AT"] = crash
    with trio.fail_after(PROCESS_TIMEOUT):
        done = await trio.run_process(
            [sys.executable, str(WORKER), mode, url, str(side),
             *([] if marker is None else [str(marker)])], env=env, check=False,
            capture_stdout=True, capture_stderr=True)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def _scenario(flow: str, step: str, url: str, side: Path) -> Outcome:
    rc, _, err1 = await _run("first" if flow == "cold" else "create", url, side,
                             crash=f"{flow}:{step}")
    results: dict[str, tuple[int, str, str]] = {}

    with_other = flow == "cold"
    marker = side.with_suffix(".n2done") if with_other else None

    async def run(mode: str) -> None:
        results[mode] = await _run(mode, url, side, marker=marker)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "restart")
        if with_other:
            nursery.start_soon(run, "other")
    rc2, out2, err2 = results["restart"]
    assert rc2 == 0, err2
    other = None
    if "other" in results:
        rc3, out3, err3 = results["other"]
        assert rc3 == 0, err3
        other = json.loads(out3.strip().splitlines()[-1])
    path = trio.Path(side)
    lines = (await path.read_text()).splitlines() if await path.exists() else []
    return Outcome(first_rc=rc, restart=[json.loads(x) for x in out2.strip().splitlines()],
                   other=other, side=[x.split() for x in lines], stderr=err1 + err2)


def _run_all(url_of: Any, tmp: Path, scenarios: list[tuple[str, str]]
             ) -> dict[tuple[str, str], Outcome | BaseException]:
    outcomes: dict[tuple[str, str], Outcome | BaseException] = {}

    async def main() -> None:
        limiter = trio.CapacityLimiter(PARALLEL)

        async def one(flow: str, step: str) -> None:
            async with limiter:
                try:
                    outcomes[(flow, step)] = await _scenario(
                        flow, step, url_of(flow, step), tmp / f"{flow}-{step}.side")
                except Exception as exc:  # reported by the scenario's own test
                    outcomes[(flow, step)] = exc

        async with trio.open_nursery() as nursery:
            for flow, step in scenarios:
                nursery.start_soon(one, flow, step)

    trio.run(main)
    return outcomes


@pytest.fixture(scope="module")
def sqlite_outcomes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("crash-sqlite")
    return _run_all(lambda flow, step: f"sqlite://{tmp / f'{flow}-{step}.db'}?busy_timeout=5",
                    tmp, SCENARIOS)


@pytest.fixture(scope="module")
def redis_outcomes(tmp_path_factory):
    helpers = _redis_helpers()
    tmp = tmp_path_factory.mktemp("crash-redis")
    run = uuid.uuid4().hex[:8]
    prefixes = {(f, s): f"zlcrash-{run}-{f}-{s}" for f, s in REDIS_SCENARIOS}

    async def reachable() -> str:
        try:
            async with helpers.raw_client() as client:
                await client.command(["PING"])
        except Exception as exc:
            return str(exc)
        return ""

    problem = trio.run(reachable)
    if problem:
        helpers.unreachable(problem)
    try:
        yield _run_all(lambda flow, step: helpers.url_with(prefixes[(flow, step)]), tmp,
                       REDIS_SCENARIOS)
    finally:
        async def cleanup() -> None:
            for prefix in prefixes.values():
                await helpers.delete_prefix(prefix)
        trio.run(cleanup)


@pytest.fixture(scope="module")
def postgres_outcomes(tmp_path_factory):
    helpers = _postgres_helpers()
    tmp = tmp_path_factory.mktemp("crash-postgres")
    prefixes = {(f, s): helpers.fresh_prefix() for f, s in SCENARIOS}

    async def reachable() -> str:
        try:
            await trio.to_thread.run_sync(helpers.ping)
        except Exception as exc:
            return str(exc)
        return ""

    problem = trio.run(reachable)
    if problem:
        helpers.unreachable(problem)
    try:
        yield _run_all(lambda flow, step: helpers.url_with(prefixes[(flow, step)]), tmp,
                       SCENARIOS)
    finally:
        async def cleanup() -> None:
            for prefix in prefixes.values():
                await helpers.drop_prefix(prefix)
        trio.run(cleanup)


def _check(outcome: Outcome | BaseException, flow: str, step: str) -> None:
    if isinstance(outcome, BaseException):
        raise outcome
    assert outcome.first_rc == -signal.SIGKILL, outcome.stderr
    recovered, final = outcome.restart[0], outcome.restart[-1]
    assert recovered["creating"] == 0  # no Creating record is left behind
    side = outcome.side
    assert not [line for line in side if line[1] == "n2"], side  # n2 never created or ran it
    if flow == "create":
        # The caller died with the process: the creation is aborted with its fence.
        assert recovered["u1"] is None
        assert recovered["roots"] == 0
        created = [line for line in side if line[0] == "create"]
        assert len(created) == (1 if step == "after_factory_before_commit" else 0)
        return
    c1 = recovered["c1"]
    assert c1 is not None
    assert c1["state"] == "ready"
    assert not c1["pointer"]
    assert recovered["roots"] == 0  # the recovery root is deleted
    firsts = [line for line in side if line[0] == "handle" and line[4] == "1"]
    expected = 2 if step == "after_first_handler_before_completion" else 1
    assert len(firsts) == expected, side
    generations = {line[3] for line in side if line[0] in ("factory", "handle")}
    assert generations == {str(c1["generation"])}  # same reservation and generation
    assert c1["owner_generation"] == 2  # adopted once by the restarted lifecycle
    # The plain request after recovery reaches the recovered incarnation, after the
    # first record (the first message is never overtaken); n2's Add(100)s may reach it
    # too over the mesh, handled by n1's incarnation.
    assert final["reply"] >= 1 + 10
    assert (final["reply"] - 11) % 100 == 0
    handles = [line for line in side if line[0] == "handle" and line[4] != "100"]
    assert handles[-1][4] == "10"
    assert {line[1] for line in side if line[0] == "handle"} == {"n1"}
    assert outcome.other is not None
    assert set(outcome.other["outcomes"]) <= {"replied", "Unavailable", "DeadlineExceeded",
                                             "StaleRoute"}


@pytest.mark.parametrize(("flow", "step"), SCENARIOS, ids=[f"{f}-{s}" for f, s in SCENARIOS])
def test_crash_recovery_sqlite(sqlite_outcomes, flow, step):
    _check(sqlite_outcomes[(flow, step)], flow, step)


@pytest.mark.parametrize(("flow", "step"), REDIS_SCENARIOS,
                         ids=[f"{f}-{s}" for f, s in REDIS_SCENARIOS])
def test_crash_recovery_redis(redis_outcomes, flow, step):
    _check(redis_outcomes[(flow, step)], flow, step)


@pytest.mark.parametrize(("flow", "step"), SCENARIOS, ids=[f"{f}-{s}" for f, s in SCENARIOS])
def test_crash_recovery_postgres(postgres_outcomes, flow, step):
    _check(postgres_outcomes[(flow, step)], flow, step)


@pytest.mark.parametrize("backend", ["sqlite", "redis", "postgresql"])
def test_a_restarted_node_honours_the_deadline_recorded_in_the_envelope(tmp_path, backend):
    """The envelope's deadline is wall-clock time, read the same by the restarted process.

    ``n1`` dies right after Reserve of a cold activation whose call had a 0.25 s deadline;
    the restarted ``n1`` may adopt only once the dead lifecycle's lease (1 s) ran out, so
    the deadline recorded in the envelope has passed: the creation is aborted with the
    dead fence -- no factory, no handler, no record or root left -- instead of resumed.
    (The scenarios above, with a 20 s deadline, are resumed.)
    """
    side = tmp_path / "short.side"
    prefix = f"zlcrash-deadline-{uuid.uuid4().hex[:8]}"
    helpers = (_redis_helpers() if backend == "redis"
               else _postgres_helpers() if backend == "postgresql" else None)
    if backend == "postgresql":
        prefix = helpers.fresh_prefix()
    url = (helpers.url_with(prefix) if helpers is not None
           else f"sqlite://{tmp_path / 'short.db'}?busy_timeout=5")

    async def main() -> tuple[int, int, str, str]:
        rc, _, err1 = await _run("first-short", url, side, crash="cold:after_reserve")
        rc2, out2, err2 = await _run("restart", url, side)
        return rc, rc2, out2, err1 + err2

    try:
        rc, rc2, out, stderr = trio.run(main)
    finally:
        if backend == "postgresql":
            trio.run(helpers.drop_prefix, prefix)
        elif helpers is not None:
            trio.run(helpers.delete_prefix, prefix)
    assert rc == -signal.SIGKILL, stderr
    assert rc2 == 0, stderr
    recovered = json.loads(out.strip().splitlines()[0])
    assert recovered["c1"] is None  # aborted, not resumed
    assert recovered["creating"] == 0
    assert recovered["roots"] == 0
    lines = side.read_text().splitlines() if side.exists() else []
    assert not [line for line in lines if line.split()[0] in ("factory", "handle")], lines
    assert "past its deadline; its creation is aborted" in stderr

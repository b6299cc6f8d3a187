"""The smoke, end to end, on SQLite and on Redis: both markers and the evidence-row counts.

Each test runs ``python -m zlink_trio.samples.shoppingmall smoke`` as a
separate process (four node processes and a Client process under it) and
reads what it printed. It asserts the Client's ``shoppingmall=completed``,
the runner's ``shoppingmall-placement=completed``, exit code 0, each
evidence row's per-node counts, and that the runner prepared its four fixture
orders before the Client's first report (fixtures before the Client
starts, evidence after it finishes). The Redis test **fails** under CI when Redis is
unreachable (``tests/store/redis_helpers.py``) and deletes its run's keys.
A run takes a few seconds; the bound is :data:`BOUND`.
"""

from __future__ import annotations

import ast
import socket
import sys
import uuid
from urllib.parse import urlsplit

import trio
from store_backends import redis_helpers

#: Seconds one smoke run may take before the test fails.
BOUND = 120


async def _smoke(tmp_path, *args: str) -> tuple[int, list[str]]:
    with trio.fail_after(BOUND):
        done = await trio.run_process(
            [sys.executable, "-m", "zlink_trio.samples.shoppingmall", "smoke", "--work-dir",
             str(tmp_path / "run"), *args], capture_stdout=True, capture_stderr=True,
            check=False)
    return done.returncode, done.stdout.decode("utf-8", "replace").splitlines()


def _rows(lines: list[str]) -> dict[str, dict[str, int]]:
    """``row name -> {node: count}`` from the runner's ``shoppingmall-runner row=`` lines."""
    rows: dict[str, dict[str, int]] = {}
    for line in lines:
        if line.startswith("shoppingmall-runner row="):
            name, _, rest = line.removeprefix("shoppingmall-runner row=").partition(" counts=")
            rows[name] = ast.literal_eval(rest.rsplit(" ", 1)[0])
    return rows


def _assert_passed(code: int, lines: list[str]) -> None:
    tail = "\n".join(lines[-15:])
    assert "shoppingmall=completed" in lines, tail
    assert lines[-1] == "shoppingmall-placement=completed", tail
    assert code == 0, tail
    rows = _rows(lines)
    assert all(count >= 1 for count in rows["order-started"].values()), rows
    assert set(rows["order-started"]) == {"workflow-a", "workflow-b"}
    assert sum(rows["api-evidence"].values()) >= 1, rows
    assert sum(rows["order-replayed"].values()) == 1, rows
    assert sum(rows["external-effect-repeated"].values()) == 0, rows
    passed = {line.split()[2] for line in lines
              if line.startswith("shoppingmall-client passed ")}
    assert len(passed) == 15, sorted(passed)
    prepared = [i for i, line in enumerate(lines)
                if line.startswith("shoppingmall-runner prepared role=")]
    first_report = next(i for i, line in enumerate(lines)
                        if line.startswith("shoppingmall-client passed "))
    assert len(prepared) == 4, tail
    assert max(prepared) < first_report, tail
    completed = lines.index("shoppingmall=completed")
    assert all(i > completed for i, line in enumerate(lines)
               if line.startswith("shoppingmall-runner row=")), tail


async def test_smoke_on_sqlite(tmp_path):
    _assert_passed(*await _smoke(tmp_path))


def _redis_reachable(url: str) -> str:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), 2):
            return ""
    except OSError as error:
        return str(error)


async def test_smoke_on_redis(tmp_path):
    helpers = redis_helpers()
    problem = _redis_reachable(helpers.REDIS_URL)
    if problem:
        helpers.unreachable(problem)  # fails under CI, skips locally
    run_id = f"smtest-{uuid.uuid4().hex[:10]}"
    try:
        result = await _smoke(tmp_path, "--store", helpers.REDIS_URL.split("?")[0],
                              "--run-id", run_id)
    finally:
        for suffix in ("loc", "rel", "app"):
            await helpers.delete_prefix(f"{run_id}-{suffix}")
    _assert_passed(*result)

"""Run the mutation gate: apply each mutation of ``catalog.MUTATIONS`` to a copy of the
tree, run the tests that guard it, and fail unless at least one of them fails.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python tests/mutations/run.py            # every mutation
    .venv/bin/python tests/mutations/run.py M1 M4      # some, by name
    .venv/bin/python tests/mutations/run.py --list     # the catalog

Each copy is served by one ``guard_runner.py`` process, which imports pytest and the test
tools once and forks a fresh pytest run per mutation (the project's modules are imported
anew by each). A mutation is *killed* when pytest reports a failing test (exit status 1)
or the guard run outlives ``--timeout`` (or the mutation's own shorter ``timeout``); it *survives*
when every guard passes. Any other outcome (a ``find`` that no longer occurs exactly
once, a guard that is not collected, a usage error) is an *error*. The exit status is 0
only when every selected mutation was killed. The copy lives in a temporary directory;
the working tree is never modified.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from catalog import MUTATIONS, Mutation  # noqa: E402

#: What the copy leaves out: the virtualenv, git's data and caches.
_IGNORED = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.pyc", ".mypy_cache",
                                  ".ruff_cache", ".pytest_cache", "*.egg-info", ".hypothesis")


def _copy_tree(into: Path, index: int) -> Path:
    copy = into / f"tree-{index}"
    shutil.copytree(ROOT, copy, ignore=_IGNORED, symlinks=True)
    return copy


class _GuardRunner:
    """One ``guard_runner.py`` process serving one copy of the tree (see its docstring)."""

    def __init__(self, copy: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("guard_runner.py"))],
            cwd=copy, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, guards: tuple[str, ...], timeout: float) -> tuple[int | None, str]:
        """pytest's exit status on ``guards`` (``None`` past ``timeout``) and its last line."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps({"guards": guards, "timeout": timeout}) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the guard runner exited ({self.process.wait()}); "
                               "its error is printed above")
        reply = json.loads(answer)
        return reply["status"], reply["tail"]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()  # end of input ends it
        self.process.wait(timeout=30)


def _run_one(copy: Path, runner: _GuardRunner, mutation: Mutation,
             timeout: float) -> tuple[str, str]:
    """``(outcome, detail)``: ``killed``, ``survived`` or ``error``."""
    target = copy / mutation.path
    original = target.read_text()
    found = original.count(mutation.find)
    if found != 1:
        return "error", f"{mutation.path}: the text to mutate occurs {found} times, not once"
    target.write_text(original.replace(mutation.find, mutation.replace))
    try:
        status, tail = runner.run(mutation.guards, timeout)
    finally:
        target.write_text(original)
    if status is None:
        return "killed", f"the guards ran past {timeout:.0f} s"
    if status == 1:
        return "killed", tail
    if status == 0:
        return "survived", tail
    return "error", f"pytest exited {status}: {tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="mutations to run (default: all)")
    parser.add_argument("--list", action="store_true", help="print the catalog and exit")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds one mutation's guards may run (default 300)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="mutations run at once, each in a copy of its own "
                             "(default: the number of CPUs)")
    args = parser.parse_args(argv)
    names = {m.name for m in MUTATIONS}
    unknown = sorted(set(args.names) - names)
    if unknown:
        parser.error(f"no mutation named {', '.join(unknown)}; see --list")
    selected = [m for m in MUTATIONS if not args.names or m.name in args.names]
    if args.list:
        for m in selected:
            print(f"{m.name:40} {m.family:28} {m.path}")
        return 0
    counts = {"killed": 0, "survived": 0, "error": 0}
    started = time.monotonic()
    jobs = max(1, min(args.jobs, len(selected)))
    with tempfile.TemporaryDirectory(prefix="zlink-mutations-") as scratch:
        lock = threading.Lock()
        copies: queue.SimpleQueue[tuple[Path, _GuardRunner]] = queue.SimpleQueue()
        runners = []
        for index in range(jobs):
            copy = _copy_tree(Path(scratch), index)
            runners.append(_GuardRunner(copy))
            copies.put((copy, runners[-1]))

        def run(m: Mutation) -> None:
            copy, runner = copies.get()  # a copy no other mutation is using
            try:
                began = time.monotonic()
                limit = args.timeout if m.timeout is None else min(args.timeout, m.timeout)
                outcome, detail = _run_one(copy, runner, m, limit)
            finally:
                copies.put((copy, runner))
            with lock:
                counts[outcome] += 1
                print(f"{outcome.upper():8} {m.name:40} {time.monotonic() - began:6.1f} s  "
                      f"{detail}", flush=True)

        try:
            with ThreadPoolExecutor(jobs) as pool:
                for future in [pool.submit(run, m) for m in selected]:
                    future.result()
        finally:
            for runner in runners:
                runner.close()
    print(f"\nmutation gate: {counts['killed']} of {len(selected)} killed, "
          f"{counts['survived']} survived, {counts['error']} errors "
          f"({time.monotonic() - started:.0f} s)")
    return 0 if counts["killed"] == len(selected) else 1


if __name__ == "__main__":
    sys.exit(main())

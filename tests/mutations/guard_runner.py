"""The mutation gate's guard runner: a process that imports the test tools once and runs
each mutation's guards in a fork of itself.

Why: starting Python, pytest and its plugins (pytest-trio's imports hypothesis and trio)
is about half of each guard run on a small machine, and a gate of a few hundred mutations
paid it a few hundred times. The project's own modules are what a mutation changes, so
they must still be imported fresh by every run: this process never imports them. It runs
with its working directory and ``PYTHONPATH`` at one copy of the tree (``run.py`` starts
one per copy), imports the packages every guard run imports anyway (:data:`PRELOADED`),
and for each request forks a child that runs pytest on the guards against the copy as it
is on disk -- the gate has already written the mutated file.

Protocol, one JSON object per line: the gate writes ``{"guards": [node IDs], "timeout":
seconds}`` to this process's stdin and reads ``{"status": pytest's exit status, "tail":
the last line it printed}`` from its stdout; ``"status"`` is ``null`` when the guards ran
past the timeout (the child and every process it started are killed). End of input ends
the process.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import sys
import tempfile
import threading
import time

#: Imported by every guard run before it reaches the project's modules: pytest, the
#: plugins it loads from their entry points, and the project's unconditional dependencies.
#: Nothing here may start a thread (the runner forks).
PRELOADED = ("pytest", "pytest_trio.plugin", "_hypothesis_pytestplugin",
             "anyio.pytest_plugin", "hypothesis.stateful", "trio.testing", "attrs",
             "cattrs", "statemachine")

#: The arguments every guard run passes pytest ahead of its node IDs: stop at the first
#: failure, keep no cache in the copy, and do not warn (an error under the project's
#: ``filterwarnings``) that the plugins' packages, imported already, cannot have their
#: asserts rewritten -- a plugin's own asserts, not the tests'.
PYTEST_ARGS = ("-x", "-q", "-p", "no:cacheprovider",
               "-W", "ignore::pytest.PytestAssertRewriteWarning")


def _run_in_child(guards: list[str], log: int) -> None:
    """The forked child: pytest on ``guards``, its output into ``log``; never returns."""
    code = 3
    try:
        os.setsid()  # its own process group, so a timeout kills what its tests started
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        import pytest

        code = int(pytest.main([*PYTEST_ARGS, *guards]))
    except BaseException:  # anything at all: report it as pytest's internal error
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, timeout: float) -> int | None:
    """The child's exit status, or ``None`` once it ran past ``timeout`` (then killed)."""
    deadline = time.monotonic() + timeout
    if hasattr(os, "pidfd_open"):  # Linux: sleep until it exits or the deadline
        pidfd = os.pidfd_open(pid)
        try:
            select.select([pidfd], [], [], timeout)
        finally:
            os.close(pidfd)
    reaped, status = os.waitpid(pid, os.WNOHANG)
    while reaped == 0 and time.monotonic() < deadline:  # no pidfd: look every 50 ms
        time.sleep(0.05)
        reaped, status = os.waitpid(pid, os.WNOHANG)
    if reaped == 0:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return None
    return os.waitstatus_to_exitcode(status)


def serve() -> None:
    """Answer guard runs from stdin until it ends."""
    for name in PRELOADED:
        importlib.import_module(name)
    sys.dont_write_bytecode = True  # the copy's files change under it: never cache them
    for line in sys.stdin:
        request = json.loads(line)
        if threading.active_count() != 1:
            raise RuntimeError("the guard runner started a thread; it must not fork now")
        with tempfile.TemporaryFile() as log:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _run_in_child(list(request["guards"]), log.fileno())
            status = _wait(pid, float(request["timeout"]))
            log.seek(0)
            printed = log.read().decode(errors="replace").strip().splitlines()
        tail = printed[-1] if printed else ""
        if status not in (0, 1, None):  # not a pass or a failure: show what it said
            tail = " / ".join(printed[-6:])
        print(json.dumps({"status": status, "tail": tail}), flush=True)


if __name__ == "__main__":
    serve()

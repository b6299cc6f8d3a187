"""A benchmark program run in a fresh process, and the figures it prints.

Some figures must not share a process with the rest of the run: a million resident
Spots and their heap, the resident set a footprint is read from, a mock clock. Their
modules are programs (``python -m zlink_trio.bench.<name> --json``) that print their
figures as one JSON object on the last line of stdout (``output.print_figures``);
:func:`child_figures` runs one and reads that line back.
"""

from __future__ import annotations

import json
import sys

import trio

import zlink_trio as zl

__all__ = ("child_figures",)


async def child_figures(module: str, *args: str) -> dict[str, object]:
    """``python -m <module> <args>`` in a fresh process: the JSON object on the last line
    of its stdout (its stderr goes to ours). The caller bounds it (``trio.fail_after``).

    Raises :class:`~zlink_trio.Unavailable` if it exits with another status than 0.
    """
    done = await trio.run_process([sys.executable, "-m", module, *args],
                                  capture_stdout=True, check=False)
    if done.returncode != 0:
        raise zl.Unavailable(f"the benchmark process python -m {module} exited with status "
                             f"{done.returncode}; its error is on stderr above")
    found: dict[str, object] = json.loads(done.stdout.decode().splitlines()[-1])
    return found

"""``zlink-trio``: the argparse dispatcher of every subcommand.

Theory of operation
-------------------
An argparse parser with one subcommand each:

- ``demo`` and ``bench`` run the program that owns them, so ``zlink-trio
  demo`` is ``python -m zlink_trio.samples.demo`` and ``zlink-trio bench``
  is ``python -m zlink_trio.bench``: every argument after the subcommand is
  theirs (they are dispatched before argparse sees them). They run as a child
  process of this interpreter -- the samples sit above this layer, so the
  command line never imports them -- sharing this terminal: Ctrl-C reaches
  the child, which decides how it ends, and its exit status is this one;
- ``inspect`` (:mod:`.inspect`) reads authority records of a shared store;
- ``release`` (:mod:`.release`) is the operator's fenced release of a Ready
  Spot whose owner's lease expired;
- ``nodes`` (:mod:`.nodes`) lists the live nodes with their endpoint, lease and Spots
  (``--all``: also the dead lifecycles that still own Spots);
- ``relocate``, ``drain`` and ``undrain`` (:mod:`.operators`) act on running nodes
  through a client-only node that joins the Mesh;
- ``statecharts`` (:mod:`.charts`) lists the lifecycle charts or renders one;
- ``dashboard`` (:mod:`.dashboard`) serves a live web page of the nodes, moves, Spots
  and charts until Ctrl-C (the optional extra ``dashboard``).

Exit status: ``0`` success, ``1`` refused / Missing / not (all) moved / store or node
unavailable (the message says why and what to do), ``2`` usage error. Typed zlink_trio
errors become one readable line on stderr, never a traceback (:mod:`.store_command`);
``--json`` on every command prints one JSON document (docs/operations.md).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

from zlink_trio.cli import charts, dashboard, doctor, inspect, nodes, operators, release

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ("build_parser", "main")

#: The subcommands argparse parses (besides the forwarded ones).
_COMMANDS = ("inspect", "release", "nodes", "relocate", "drain", "undrain", "statecharts",
             "dashboard", "doctor")

#: Subcommands that own their arguments: name -> (the module run as a program, help).
_FORWARDED: dict[str, tuple[str, str]] = {
    "demo": ("zlink_trio.samples.demo", "run the demo story on one node"),
    "bench": ("zlink_trio.bench", "measure speed and memory beside raw Trio baselines"),
}


def _run_module(module: str, argv: list[str]) -> int:
    """``python -m module *argv`` in this terminal; its exit status (128 + N for signal N)."""
    with subprocess.Popen([sys.executable, "-m", module, *argv]) as child:
        # Ctrl-C reaches the child as well (same process group): let it end on its own.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            status = child.wait()
        finally:
            signal.signal(signal.SIGINT, previous)
    return status if status >= 0 else 128 - status


def build_parser() -> argparse.ArgumentParser:
    """The ``zlink-trio`` parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="zlink-trio", description="Tools that ship with the zlink_trio runtime.",
        epilog="Exit status: 0 success, 1 refused, Missing, not (all) moved, or a store or "
               "node unavailable (the message says why), 2 usage error. --json on every "
               "command prints one JSON document, a failure as {\"error\": {\"command\", "
               "\"status\", \"message\"}}. Reference: docs/operations.md.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_) in _FORWARDED.items():
        commands.add_parser(name, help=f"{help_} (arguments: see zlink-trio {name} --help)",
                            add_help=False)
    inspect.add_parser(commands)
    release.add_parser(commands)
    nodes.add_parser(commands)
    operators.add_parsers(commands)
    charts.add_parser(commands)
    dashboard.add_parser(commands)
    doctor.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in _FORWARDED:
        return _run_module(_FORWARDED[args[0]][0], args[1:])
    parser = build_parser()
    if not args:
        parser.print_help(sys.stderr)
        return 2
    if not args[0].startswith("-") and args[0] not in (*_FORWARDED, *_COMMANDS):
        print(f"zlink-trio: unknown command {args[0]!r}\n", file=sys.stderr)
        parser.print_usage(sys.stderr)
        return 2
    try:
        parsed = parser.parse_args(args)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return exit_.code if isinstance(exit_.code, int) else 2
    run: Callable[[argparse.Namespace], int] = parsed.run
    return run(parsed)

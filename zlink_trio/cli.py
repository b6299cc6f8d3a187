"""The ``zlink-trio`` command: one entry point for the tools that ship with the runtime.

Theory of operation
-------------------
An argparse parser with one subcommand each:

- ``demo`` and ``bench`` forward to the module that owns them, so
  ``zlink-trio demo`` is ``python -m zlink_trio.demo`` and ``zlink-trio
  bench`` is ``python -m zlink_trio.bench``: every argument after the
  subcommand is theirs (they are dispatched before argparse sees them);
- ``inspect`` (``_cli_inspect``) reads authority records of a shared store;
- ``release`` (``_cli_release``) is the operator's fenced release of a Ready
  Spot whose owner's lease expired.

Exit status: ``0`` success, ``1`` refused / Missing / store unavailable (the
message says why and what to do), ``2`` usage error. Typed zlink_trio errors
become one readable line on stderr, never a traceback (``_cli_store``).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from zlink_trio import _cli_inspect, _cli_release

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ("main",)


def _demo(argv: list[str]) -> int:
    from zlink_trio.demo import main

    return main(argv)


def _bench(argv: list[str]) -> int:
    from zlink_trio.bench import main

    return main(argv)


#: Subcommands that own their arguments: name -> (run, help).
_FORWARDED: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "demo": (_demo, "run the demo story on one node"),
    "bench": (_bench, "measure speed and memory beside raw Trio baselines"),
}


def build_parser() -> argparse.ArgumentParser:
    """The ``zlink-trio`` parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="zlink-trio", description="Tools that ship with the zlink_trio runtime.",
        epilog="Exit status: 0 success, 1 refused or Missing (the message says why), "
               "2 usage error.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_) in _FORWARDED.items():
        commands.add_parser(name, help=f"{help_} (arguments: see zlink-trio {name} --help)",
                            add_help=False)
    _cli_inspect.add_parser(commands)
    _cli_release.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in _FORWARDED:
        return _FORWARDED[args[0]][0](args[1:])
    parser = build_parser()
    if not args:
        parser.print_help(sys.stderr)
        return 2
    if not args[0].startswith("-") and args[0] not in (*_FORWARDED, "inspect", "release"):
        print(f"zlink-trio: unknown command {args[0]!r}\n", file=sys.stderr)
        parser.print_usage(sys.stderr)
        return 2
    try:
        parsed = parser.parse_args(args)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return exit_.code if isinstance(exit_.code, int) else 2
    run: Callable[[argparse.Namespace], int] = parsed.run
    return run(parsed)


if __name__ == "__main__":
    sys.exit(main())

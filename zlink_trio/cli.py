"""The ``zlink-trio`` command: one entry point for the tools that ship with the runtime.

Subcommands forward to the module that owns them, so ``zlink-trio demo`` is
``python -m zlink_trio.demo`` and ``zlink-trio bench`` is
``python -m zlink_trio.bench`` (arguments after the subcommand are theirs).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ("main",)


def _demo(argv: list[str]) -> int:
    from zlink_trio.demo import main

    return main(argv)


def _bench(argv: list[str]) -> int:
    from zlink_trio.bench import main

    return main(argv)


_COMMANDS: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "demo": (_demo, "run the demo story on one node"),
    "bench": (_bench, "measure speed and memory beside raw Trio baselines"),
}


def _usage() -> str:
    lines = ["usage: zlink-trio COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<8} {help_}" for name, (_, help_) in _COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``argv`` (default ``sys.argv[1:]``) to a subcommand; returns the exit status."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    command = _COMMANDS.get(args[0])
    if command is None:
        print(f"zlink-trio: unknown command {args[0]!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    return command[0](args[1:])


if __name__ == "__main__":
    sys.exit(main())

"""Command line: ``python -m statecharts render DIR`` and ``python -m statecharts check DIR``.

``render`` writes one Markdown page per chart plus ``index.md`` into DIR, and the
generated package of typed chart names, :mod:`statecharts.names`, into this package.
``check`` renders both in memory and exits with status 1, listing every file that is
missing, extra or changed, when DIR or the module differs from a fresh render (CI
runs it on ``docs/statecharts``).  Both are deterministic; see
:mod:`statecharts.render` and :mod:`statecharts.codegen`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from statecharts import codegen, render

__all__ = ("main",)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the process exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m statecharts", description="Render or check the statechart pages."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    render_cmd = commands.add_parser("render", help="write the Markdown pages into DIR")
    render_cmd.add_argument("directory", type=Path, metavar="DIR")
    check_cmd = commands.add_parser("check", help="exit 1 if DIR differs from a fresh render")
    check_cmd.add_argument("directory", type=Path, metavar="DIR")
    args = parser.parse_args(argv)
    directory: Path = args.directory

    if args.command == "render":
        written = render.write(directory)
        names = codegen.write_names()
        print(f"wrote {len(written)} pages into {directory} and the {names.name} package")
        return 0
    problems = render.check(directory) + codegen.check_names()
    if not problems:
        print(f"{directory}: statechart pages are up to date")
        return 0
    print(f"{directory}: statechart pages differ from a fresh render:", file=sys.stderr)
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    print(f"run `{render.RENDER_COMMAND}` to update them", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

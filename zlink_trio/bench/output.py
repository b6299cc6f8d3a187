"""How the benchmark programs print their figures: a table, or ``--json``'s one line.

Every ``python -m zlink_trio.bench...`` program prints through
:func:`print_figures`, so they agree: a table of ``name value`` lines for a
reader, or -- with ``--json`` -- the whole object as compact JSON on one line,
the last line of stdout (a script reads it with ``tail -n 1``, whatever was
printed before it).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ("print_figures",)


def print_figures(figures: Mapping[str, object], *, as_json: bool, width: int = 34,
                  out: TextIO | None = None) -> None:
    """Print ``figures`` to ``out`` (default stdout): a table, or one line of JSON."""
    out = sys.stdout if out is None else out
    if as_json:
        out.write(json.dumps(figures, separators=(",", ":")) + "\n")
    else:
        for name, value in figures.items():
            out.write(f"{name:<{width}} {value}\n")
    out.flush()

"""How the benchmark programs print their figures: a table, or ``--json``'s one line.

:func:`merge_figures` joins the figures of two measurements (their ``unavailable``
reasons into one dict).

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

__all__ = ("merge_figures", "print_figures")


def merge_figures(figures: dict[str, object], more: dict[str, object]) -> None:
    """Add ``more`` to ``figures``; their ``unavailable`` reasons go into one dict, last."""
    reasons: dict[str, object] = {}
    for part in (figures, more):
        found = part.pop("unavailable", None)
        if isinstance(found, dict):
            reasons.update(found)
    figures.update(more)
    if reasons:
        figures["unavailable"] = reasons


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

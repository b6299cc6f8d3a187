"""The evidence rows, verbatim, and how one node log's lines are counted against them.

A row is a template exactly as ``docs/shoppingmall.md`` ("Evidence rows") prints
it, with ``<Name>`` placeholders.
:func:`line_pattern` turns it into a whole-line regular expression: a
placeholder given a value matches that value literally, one left open matches
one non-blank token. :func:`count_lines` counts the lines of *one* log that
match; the runner calls it per node log and never joins two logs into one
text (two logs are never passed to one search).

=====================  ===========================================================
constant               evidence row
=====================  ===========================================================
``READY_HTTP``         the HTTP edge is open (each API node)
``READY_ROUTE``        RouteMesh object capability (each API node, once per Workflow node)
``ORDER_STARTED``      a Workflow node started an order (>= 1 in each Workflow log)
``API_EVIDENCE``       CommerceApi left its evidence (>= 1)
``ORDER_REPLAYED``     replay after a planned relocation kept the generation (exactly 1)
``EFFECT_REPEATED``    an already-completed external effect was repeated (exactly 0)
=====================  ===========================================================
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ("API_EVIDENCE", "EFFECT_REPEATED", "ORDER_REPLAYED", "ORDER_STARTED",
           "READY_HTTP", "READY_ROUTE", "count_lines", "line_pattern", "placeholders",
           "render")

READY_HTTP: Final = "shoppingmall-ready kind=http node=<NodeId>"
READY_ROUTE: Final = ("shoppingmall-ready kind=object-route node=<NodeId> "
                      "target=<WorkflowNodeId>")
ORDER_STARTED: Final = "shoppingmall-order started order=<OrderId> spot=<SpotId>"
API_EVIDENCE: Final = "shoppingmall-evidence order=<OrderId> events=<N>"
ORDER_REPLAYED: Final = "shoppingmall-order replayed order=<OrderId> generation=<N>"
EFFECT_REPEATED: Final = "shoppingmall-order external-effect-repeated order=<OrderId>"

_PLACEHOLDER: Final = re.compile(r"<([A-Za-z]+)>")


def line_pattern(template: str, **values: str) -> re.Pattern[str]:
    """A whole-line pattern for ``template``; ``values`` fill placeholders by name.

    ``ValueError`` when ``values`` names a placeholder the template lacks.
    """
    names = set(_PLACEHOLDER.findall(template))
    unknown = set(values) - names
    if unknown:
        raise ValueError(f"{template!r} has no placeholder {sorted(unknown)}")
    parts: list[str] = []
    last = 0
    for match in _PLACEHOLDER.finditer(template):
        parts.append(re.escape(template[last:match.start()]))
        name = match.group(1)
        parts.append(re.escape(values[name]) if name in values else r"\S+")
        last = match.end()
    parts.append(re.escape(template[last:]))
    return re.compile("".join(parts))


def placeholders(template: str) -> list[str]:
    """The placeholder names of ``template``, in order."""
    return _PLACEHOLDER.findall(template)


def render(template: str, **values: str) -> str:
    """``template`` with every placeholder filled (``KeyError`` for a missing one)."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def count_lines(log_text: str, template: str, **values: str) -> int:
    """How many lines of one log are exactly ``template`` (filled with ``values``)."""
    pattern = line_pattern(template, **values)
    return sum(1 for line in log_text.splitlines() if pattern.fullmatch(line.rstrip("\r")))

"""One chart's diagram, with a recorded trace highlighted: mermaid text and Graphviz DOT.

Theory of operation
-------------------
``zlink-trio statecharts CHART [--trace FILE]`` shows one chart so a user can follow
the path one operation took.  Both renderings start from the chart class and the
trace records of that chart (:func:`statecharts.trace.check_trace` has already held
them to the chart):

- :func:`mermaid` is python-statemachine's ``format(Chart, "mermaid")`` (the same
  ``stateDiagram-v2`` the docs pages show) plus, for a trace, two ``classDef`` lines
  and one ``state:::class`` line per state the trace visited -- ``visited`` for the
  path, ``reached`` for where it ended.  Mermaid's state diagrams cannot style one
  edge, so the transitions taken are listed by :func:`path_lines`, numbered in order.
- :func:`dot` is Graphviz DOT source of the same chart, written here rather than
  through python-statemachine's pydot renderer so it needs no pydot: states are
  rounded boxes labelled with their display names (finals doubled), and a trace
  fills the visited states and draws each transition taken bold and red, labelled
  with its step numbers, for anyone who draws with Graphviz (``--format dot``); the
  command line's own SVG is laid out without it (:mod:`statecharts.svg`).

Deterministic: declaration order, no timestamps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from statecharts._compile import compile

if TYPE_CHECKING:
    from collections.abc import Sequence

    from statecharts._base import StrictChart
    from statecharts.trace import TraceRecord

__all__ = ("REACHED_FILL", "VISITED_FILL", "display_names", "dot", "mermaid", "path_lines",
           "visited_states")

#: Fill of a state the trace passed through.
VISITED_FILL = "#40E0D0"
#: Fill of the state the trace ended in.
REACHED_FILL = "#FFD700"


def visited_states(records: Sequence[TraceRecord]) -> list[str]:
    """The states the trace was in, first visit order (the start included)."""
    seen: dict[str, None] = {}
    for record in records:
        seen.setdefault(record.state)
        seen.setdefault(record.target)
    return list(seen)


def path_lines(records: Sequence[TraceRecord]) -> list[str]:
    """``N. `state` --`event`--> `target``` for each record, numbered from 1."""
    return [f"{n}. `{r.state}` --`{r.event}`--> `{r.target}`"
            for n, r in enumerate(records, start=1)]


def mermaid(chart: type[StrictChart], records: Sequence[TraceRecord] = ()) -> str:
    """The chart's mermaid ``stateDiagram-v2``; with ``records``, the visited states styled."""
    lines = format(chart, "mermaid").rstrip("\n").split("\n")
    if records:
        reached = records[-1].target
        lines.append(f"    classDef visited fill:{VISITED_FILL},stroke:#333")
        lines.append(f"    classDef reached fill:{REACHED_FILL},stroke:#333,stroke-width:2px")
        for state in visited_states(records):
            lines.append(f"    {state}:::{'reached' if state == reached else 'visited'}")
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def display_names(chart: type[StrictChart]) -> dict[str, str]:
    """State id -> the name the chart displays for it."""
    states = cast("list[Any]", chart.states)
    return {state.id: str(state.name) for state in states}


def dot(chart: type[StrictChart], records: Sequence[TraceRecord] = ()) -> str:
    """Graphviz DOT source of the chart; with ``records``, the path drawn over it."""
    table = compile(chart)
    names = display_names(chart)
    visited = set(visited_states(records))
    reached = records[-1].target if records else None
    steps: dict[tuple[str, str], list[int]] = {}
    for number, record in enumerate(records, start=1):
        steps.setdefault((record.state, record.event), []).append(number)
    lines = [
        f"digraph {_quote(table.name)} {{",
        f"    label={_quote(table.name)}; labelloc=t; rankdir=LR; fontname=Helvetica;",
        '    node [shape=box, style="rounded,filled", fillcolor=white, fontname=Helvetica, '
        "fontsize=11];",
        "    edge [fontname=Helvetica, fontsize=9];",
        '    "__initial" [shape=point, width=0.15, label=""];',
        f'    "__initial" -> {_quote(table.initial)};',
    ]
    for state in table.state_order:
        attributes = [f"label={_quote(names.get(state, state))}"]
        if table.is_final(state):
            attributes.append("peripheries=2")
        if state == reached:
            attributes.append(f"fillcolor={_quote(REACHED_FILL)}, penwidth=2")
        elif state in visited:
            attributes.append(f"fillcolor={_quote(VISITED_FILL)}")
        lines.append(f"    {_quote(state)} [{', '.join(attributes)}];")
    for state in table.state_order:
        for event in table.events_from(state):
            target = table.step(state, event)
            taken = steps.get((state, event))
            label = event if taken is None else f"{event} ({', '.join(map(str, taken))})"
            extra = "" if taken is None else ', color="#d62728", fontcolor="#d62728", penwidth=2'
            lines.append(f"    {_quote(state)} -> {_quote(target)} [label={_quote(label)}{extra}];")
    lines.append("}")
    return "\n".join(lines) + "\n"

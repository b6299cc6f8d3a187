"""One chart's diagram as SVG, laid out in pure Python (no Graphviz).

Theory of operation
-------------------
``zlink-trio statecharts CHART --format svg`` must work on a fresh machine, so the
drawing is made here from the compiled chart (:func:`statecharts._compile.compile`),
with nothing outside the install:

1. **Columns.** Each state's column is its distance from the initial state along the
   transitions (breadth first); a state no transition reaches goes in the last column.
   So the picture reads left to right as the lifecycle does.
2. **Rows.** Within a column, states start in declaration order, then two sweeps move
   each to the mean row of the states it comes from (the barycenter heuristic), which
   removes most crossings of charts this size.
3. **Edges.** A transition to a later column is a curve from the right side of its
   source to the left side of its target; one to the same or an earlier column (a step
   back, a retry) is a curve that bows below; a self-transition is a loop above its box.
   Each carries its event's name at its middle; transitions between the same two states
   are spread apart.

A trace (``records``, held to the chart by :func:`statecharts.trace.check_trace`) is
drawn as :func:`statecharts.diagram.dot` draws it: visited states filled, the state it
ended in gold and outlined, each transition taken red and bold with its step numbers.
Deterministic: declaration order, no timestamps, no randomness.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from statecharts._compile import compile
from statecharts.diagram import REACHED_FILL, VISITED_FILL, display_names, visited_states

if TYPE_CHECKING:
    from collections.abc import Sequence

    from statecharts._base import StrictChart
    from statecharts.trace import TraceRecord

__all__ = ("svg",)

_FONT = 11
_CHAR = 6.6  # average width of one character at _FONT px (Helvetica-like)
_BOX_H = 30
_COL_GAP = 110
_ROW_GAP = 44
_MARGIN = 30
_TAKEN = "#d62728"


def _columns(order: list[str], initial: str,
             edges: list[tuple[str, str, str]]) -> dict[str, int]:
    column = {initial: 0}
    queue = deque([initial])
    while queue:
        state = queue.popleft()
        for source, _, target in edges:
            if source == state and target not in column:
                column[target] = column[state] + 1
                queue.append(target)
    last = max(column.values(), default=0) + 1
    return {state: column.get(state, last) for state in order}


def _rows(order: list[str], column: dict[str, int],
          edges: list[tuple[str, str, str]]) -> dict[str, float]:
    by_column: dict[int, list[str]] = {}
    for state in order:
        by_column.setdefault(column[state], []).append(state)
    row = {state: float(i) for states in by_column.values() for i, state in enumerate(states)}
    for _ in range(2):  # barycenter sweeps, left to right
        for col in sorted(by_column)[1:]:
            def weight(state: str, col: int = col) -> float:
                sources = [row[s] for s, _, t in edges if t == state and column[s] < col]
                return sum(sources) / len(sources) if sources else row[state]
            ordered = sorted(by_column[col], key=lambda s: (weight(s), row[s]))
            by_column[col] = ordered
            for i, state in enumerate(ordered):
                row[state] = float(i)
    return row


def svg(chart: type[StrictChart], records: Sequence[TraceRecord] = ()) -> str:
    """The chart as an SVG document; with ``records``, the path drawn over it."""
    table = compile(chart)
    names = display_names(chart)
    order = list(table.state_order)
    edges = [(state, event, table.step(state, event))
             for state in order for event in table.events_from(state)]
    visited = set(visited_states(records))
    reached = records[-1].target if records else None
    steps: dict[tuple[str, str], list[int]] = {}
    for number, record in enumerate(records, start=1):
        steps.setdefault((record.state, record.event), []).append(number)

    column = _columns(order, table.initial, edges)
    row = _rows(order, column, edges)
    label = {state: names.get(state, state) for state in order}
    width = {state: max(70.0, len(label[state]) * _CHAR + 24) for state in order}
    col_width = {c: max(width[s] for s in order if column[s] == c) for c in set(column.values())}
    col_x: dict[int, float] = {}
    x = _MARGIN + 24.0  # room for the initial dot
    for c in sorted(col_width):
        col_x[c] = x
        x += col_width[c] + _COL_GAP
    top = _MARGIN + 40.0  # room for the title and self-loops
    box = {state: (col_x[column[state]] + (col_width[column[state]] - width[state]) / 2,
                   top + row[state] * (_BOX_H + _ROW_GAP), width[state]) for state in order}
    total_w = x - _COL_GAP + _MARGIN
    reach = max((abs(column[a] - column[b]) for a, _, b in edges), default=0)
    total_h = top + (max(row.values(), default=0) + 1) * (_BOX_H + _ROW_GAP) + 40 + 18 * reach

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" '
           f'height="{total_h:.0f}" viewBox="0 0 {total_w:.0f} {total_h:.0f}" '
           f'font-family="Helvetica, Arial, sans-serif" font-size="{_FONT}">',
           "<defs>",
           '<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
           'fill="#333"/></marker>',
           f'<marker id="arrow-taken" viewBox="0 0 10 10" refX="10" refY="5" '
           f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
           f'<path d="M0,0 L10,5 L0,10 z" fill="{_TAKEN}"/></marker>',
           "</defs>",
           f'<text x="{total_w / 2:.0f}" y="{_MARGIN:.0f}" text-anchor="middle" '
           f'font-size="14" font-weight="bold">{escape(table.name)}</text>']

    # The initial dot and its arrow.
    ix, iy, _ = box[table.initial]
    out.append(f'<circle class="initial" cx="{ix - 22:.1f}" cy="{iy + _BOX_H / 2:.1f}" r="5" '
               'fill="#333"/>')
    out.append(f'<path d="M{ix - 17:.1f},{iy + _BOX_H / 2:.1f} L{ix:.1f},{iy + _BOX_H / 2:.1f}" '
               'stroke="#333" fill="none" marker-end="url(#arrow)"/>')

    pair_count: dict[frozenset[str], int] = {}
    for source, event, target in edges:
        taken = steps.get((source, event))
        text = event if taken is None else f"{event} ({', '.join(map(str, taken))})"
        color, stroke, marker = ((_TAKEN, 2.0, "arrow-taken") if taken is not None
                                 else ("#555", 1.0, "arrow"))
        sx, sy, sw = box[source]
        tx, ty, tw = box[target]
        nth = pair_count.get(frozenset((source, target)), 0)
        pair_count[frozenset((source, target))] = nth + 1
        spread = nth * 14.0
        shift = (1 if nth % 2 else -1) * ((nth + 1) // 2) * 12.0  # 0, -12, +12, -24, ...
        if source == target:
            cx = sx + sw / 2
            d = (f"M{cx - 12:.1f},{sy:.1f} C{cx - 30:.1f},{sy - 34 - spread:.1f} "
                 f"{cx + 30:.1f},{sy - 34 - spread:.1f} {cx + 12:.1f},{sy:.1f}")
            lx, ly = cx, sy - 30 - spread
        elif column[target] > column[source]:
            x1, y1 = sx + sw, sy + _BOX_H / 2 + shift / 2
            x2, y2 = tx, ty + _BOX_H / 2 + shift / 2
            mid = (x1 + x2) / 2
            bend = shift * 1.5  # parallel edges part in the middle, where the labels are
            d = (f"M{x1:.1f},{y1:.1f} C{mid:.1f},{y1 + bend:.1f} {mid:.1f},"
                 f"{y2 + bend:.1f} {x2:.1f},{y2:.1f}")
            lx, ly = mid, (y1 + y2) / 2 + bend - 3
        else:  # to the same or an earlier column: bow below both boxes, deeper the
            # farther back it goes, so the long ones pass under the short ones
            x1, y1 = sx + sw / 2 + shift, sy + _BOX_H
            x2, y2 = tx + tw / 2 - shift, ty + _BOX_H
            low = max(y1, y2) + 26 + 18 * abs(column[source] - column[target]) + spread
            d = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{low:.1f} {x2:.1f},{low:.1f} {x2:.1f},{y2:.1f}"
            lx, ly = (x1 + x2) / 2, low * 0.75 + max(y1, y2) * 0.25 + 3
        out.append(f'<g class="transition" data-source="{escape(source)}" '
                   f'data-event="{escape(event)}" data-target="{escape(target)}">'
                   f'<path d="{d}" stroke="{color}" stroke-width="{stroke}" fill="none" '
                   f'marker-end="url(#{marker})"/>'
                   f'<text x="{lx:.1f}" y="{ly:.1f}" text-anchor="middle" font-size="9" '
                   f'fill="{color}">{escape(text)}</text></g>')

    for state in order:
        x0, y0, w = box[state]
        fill = (REACHED_FILL if state == reached else VISITED_FILL if state in visited
                else "#ffffff")
        edge = 2.0 if state == reached else 1.0
        parts = [f'<g class="state" data-state="{escape(state)}">',
                 f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{w:.1f}" height="{_BOX_H}" rx="8" '
                 f'fill="{fill}" stroke="#333" stroke-width="{edge}"/>']
        if table.is_final(state):
            parts.append(f'<rect x="{x0 + 3:.1f}" y="{y0 + 3:.1f}" width="{w - 6:.1f}" '
                         f'height="{_BOX_H - 6}" rx="6" fill="none" stroke="#333"/>')
        parts.append(f'<text x="{x0 + w / 2:.1f}" y="{y0 + _BOX_H / 2 + 4:.1f}" '
                     f'text-anchor="middle">{escape(label[state])}</text></g>')
        out.append("".join(parts))
    out.append("</svg>")
    return "\n".join(out) + "\n"

"""The chart trace file: JSON lines of the transitions a run took, written and read.

Theory of operation
-------------------
The runtime tells the observers in ``zlink_trio.runtime.charts.TRACE`` about every
transition it takes, as ``(chart, state, event, target)``: the chart's class name and
three ids of that chart.  A *trace file* keeps those calls, one JSON object per line
in the order they happened::

    {"chart": "Incarnation", "state": "serving", "event": "begin_close", "target": "closing"}

Keys are exactly ``chart``, ``state``, ``event`` and ``target`` (strings); blank
lines are skipped.  A file may mix charts (one operation steps several) and, when
operations overlap, interleave instances of one chart; a reader picks the chart it
wants, and whoever records a single operation keeps the file to that operation.

- :class:`TraceWriter` is a TRACE observer that appends each call to an open text
  stream (``charts.TRACE.append(TraceWriter(file))``); the test kit's recorder and
  users' own tests write traces with it.
- :func:`trace_line` encodes one record; :func:`read_trace` decodes a file's lines
  and raises :class:`TraceFormatError` naming the line that is wrong.
- :func:`check_trace` holds records against a chart's compiled table: every record
  must be a transition the chart defines.

``zlink-trio statecharts CHART --trace FILE`` reads such a file and highlights the
path (:func:`statecharts.diagram.mermaid`, :func:`~statecharts.diagram.dot`).  Pure:
the writer only calls ``write`` on the stream it is given, and nothing here imports
trio or ``zlink_trio``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable

    from statecharts._compile import TransitionTable

__all__ = ("TraceFormatError", "TraceRecord", "TraceWriter", "check_trace", "read_trace",
           "trace_line")

_KEYS = ("chart", "state", "event", "target")


class TraceFormatError(ValueError):
    """A trace file line is not a record, or a record is not a transition of its chart."""


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One transition the runtime took: ``event`` moved ``chart`` from ``state`` to ``target``."""

    chart: str
    state: str
    event: str
    target: str

    def to_json(self) -> dict[str, str]:
        """The record as the JSON object of a trace line."""
        return {"chart": self.chart, "state": self.state, "event": self.event,
                "target": self.target}


def trace_line(chart: str, state: str, event: str, target: str) -> str:
    """One trace-file line (with its ``\\n``) for a TRACE call."""
    return json.dumps(TraceRecord(chart, state, event, target).to_json()) + "\n"


class _Writable(Protocol):
    def write(self, text: str, /) -> object: ...


class TraceWriter:
    """A ``charts.TRACE`` observer writing one JSON line per transition to ``stream``.

    ``charts`` (chart class names) keeps only those charts; by default every chart.
    The stream is the caller's: open it before appending the writer to TRACE, remove
    the writer, then close it.  ``flush`` after each line when the file is read while
    the run goes on.
    """

    def __init__(self, stream: _Writable, *, charts: Iterable[str] | None = None) -> None:
        self._stream = stream
        self._charts = None if charts is None else frozenset(charts)

    def __call__(self, chart: str, state: str, event: str, target: str) -> None:
        """Record one transition (the TRACE observer signature)."""
        if self._charts is None or chart in self._charts:
            self._stream.write(trace_line(chart, state, event, target))


def read_trace(lines: Iterable[str]) -> list[TraceRecord]:
    """Decode trace-file ``lines`` in order; :class:`TraceFormatError` names a bad line."""
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            raise TraceFormatError(f"line {number}: not JSON: {line.strip()[:80]!r}") from None
        if (not isinstance(value, dict) or sorted(value) != sorted(_KEYS)
                or not all(isinstance(value[key], str) for key in _KEYS)):
            raise TraceFormatError(
                f"line {number}: a trace record is a JSON object with exactly the string "
                f"keys {', '.join(_KEYS)}, got {line.strip()[:80]!r}")
        records.append(TraceRecord(value["chart"], value["state"], value["event"],
                                   value["target"]))
    return records


def check_trace(table: TransitionTable, records: Iterable[TraceRecord]) -> list[TraceRecord]:
    """The records of ``table``'s chart, in order; each must be one of its transitions.

    Records of other charts are left out. Raises :class:`TraceFormatError` for a record
    of this chart whose transition the chart does not define (a trace of another
    version of the chart, or an edited file).
    """
    mine = [r for r in records if r.chart == table.name]
    for number, record in enumerate(mine, start=1):
        if not table.allows(record.state, record.event) or table.step(
                record.state, record.event) != record.target:
            raise TraceFormatError(
                f"step {number} of {table.name}: {record.state} --{record.event}--> "
                f"{record.target} is not a transition of the chart; was the trace recorded "
                "with another version of zlink_trio?")
    return mine

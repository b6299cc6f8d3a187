"""``zlink-trio statecharts [--format md|svg|dot] [--trace FILE] [CHART]``: explore the charts.

Theory of operation
-------------------
Without ``CHART`` it lists the charts (``statecharts.ALL_CHARTS``): the name to pass,
the class, the number of states and transitions and the summary.  With ``CHART`` (the
page name ``cold_activation`` or the class name ``ColdActivation``, any case) it
renders that chart:

- ``--format md`` (the default): a Markdown page -- summary, a mermaid
  ``stateDiagram-v2`` (GitHub and most Markdown viewers draw it; no dependency), the
  runtime modules that drive the chart and the tests that cover it
  (``statecharts.links``);
- ``--format svg``: an SVG drawing, laid out in pure Python (:mod:`statecharts.svg`):
  nothing outside the install is needed;
- ``--format dot``: Graphviz DOT source of the same drawing
  (:func:`statecharts.diagram.dot`), for anyone who lays it out with Graphviz.

``--trace FILE`` highlights a recorded run: a JSON-lines trace
(:mod:`statecharts.trace`, written by ``statecharts.trace.TraceWriter`` from the
runtime's ``charts.TRACE``).  The records of this chart are checked against it, the
states visited are filled (the last one in gold) and the transitions taken are listed
in order below the diagram (md) or drawn bold red with their step numbers (svg, dot).

``--output FILE`` writes the rendering there instead of standard output.  ``--json``
prints one JSON document instead: the list ``{"charts": [...]}``, or one chart
``{"chart", "name", "format", "initial", "finals", "states", "transitions",
"drivers", "tests", "trace", "diagram"}`` where ``diagram`` is the mermaid source (md),
the SVG text (svg) or the DOT source (dot) and each transition carries the ``steps`` of
the trace that took it.

Exit status: 0 rendered; 1 the trace file does not fit the chart; 2 usage error
(unknown chart, unreadable trace file).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from statecharts import ALL_CHARTS, compile
from statecharts.diagram import dot, mermaid, path_lines, visited_states
from statecharts.links import CHART_LINKS
from statecharts.render import page_name
from statecharts.svg import svg
from statecharts.trace import TraceFormatError, TraceRecord, check_trace, read_trace
from zlink_trio.cli.store_command import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, UsageError

if TYPE_CHECKING:
    import argparse

    from statecharts import StrictChart

__all__ = ("add_parser", "chart_named", "chart_rows", "run")

_FORMATS = ("md", "svg", "dot")


def _key(chart: type[StrictChart]) -> str:
    return page_name(chart)[:-3]


def chart_named(name: str) -> type[StrictChart]:
    """The chart called ``name`` (page or class name, any case); UsageError naming the charts."""
    wanted = name.lower().replace("-", "_")
    for chart in ALL_CHARTS:
        if wanted in (_key(chart), chart.__name__.lower()):
            return chart
    raise UsageError(f"no chart {name!r}; the charts are "
                     + ", ".join(_key(chart) for chart in ALL_CHARTS))


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``statecharts``."""
    parser = commands.add_parser(
        "statecharts", help="list the lifecycle charts, or render one (md, svg or dot), "
                            "optionally with a recorded trace highlighted",
        description="Without CHART: list the charts. With CHART: render it as Markdown with "
                    "a mermaid diagram (--format md, the default), as SVG laid out here "
                    "(--format svg: nothing to install) or as Graphviz DOT source "
                    "(--format dot), highlighting the path of a recorded --trace. "
                    "Exit 0 rendered, 1 the trace does not fit the chart, 2 usage error.")
    parser.add_argument("chart", nargs="?", metavar="CHART",
                        help="a chart's page or class name (cold_activation, ColdActivation)")
    parser.add_argument("--format", choices=_FORMATS, default=None,
                        help="md: Markdown + mermaid (default); svg: an SVG drawing; dot: "
                             "Graphviz DOT source")
    parser.add_argument("--trace", metavar="FILE", type=Path,
                        help="JSON-lines trace of {chart, state, event, target} records to "
                             "highlight (statecharts.trace)")
    parser.add_argument("--output", "-o", metavar="FILE", type=Path,
                        help="write the rendering to FILE instead of standard output")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``statecharts`` with parsed ``args``; returns the exit status."""
    try:
        return _run(args)
    except UsageError as error:
        print(f"zlink-trio statecharts: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except TraceFormatError as error:
        print(f"zlink-trio statecharts: {error}", file=sys.stderr)
        return EXIT_REFUSED


def _run(args: argparse.Namespace) -> int:
    if args.chart is None:
        if args.format is not None or args.trace is not None:
            raise UsageError("--format and --trace render one chart; name CHART (see "
                             "zlink-trio statecharts)")
        _emit(args, _listing(args.json))
        return EXIT_OK
    chart = chart_named(args.chart)
    fmt: str = args.format or "md"
    records = _trace(chart, args.trace) if args.trace is not None else []
    diagram = {"svg": svg, "dot": dot}.get(fmt, mermaid)(chart, records)
    if args.json:
        text = json.dumps(_chart_json(chart, fmt, records, diagram), indent=2) + "\n"
    elif fmt != "md":
        text = diagram
    else:
        text = _markdown(chart, records, diagram)
    _emit(args, text)
    return EXIT_OK


def _emit(args: argparse.Namespace, text: str) -> None:
    if args.output is None:
        sys.stdout.write(text)
        return
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"cannot write --output {str(args.output)!r}: "
                         f"{error.strerror or error}") from None


def _trace(chart: type[StrictChart], path: Path) -> list[TraceRecord]:
    try:
        with path.open(encoding="utf-8") as file:
            records = read_trace(file)
    except OSError as error:
        raise UsageError(f"cannot read --trace {str(path)!r}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise TraceFormatError(f"--trace {str(path)!r} is not UTF-8 text") from None
    mine = check_trace(compile(chart), records)
    if not mine:
        charts = sorted({record.chart for record in records})
        raise TraceFormatError(
            f"--trace {str(path)!r} has no records of {chart.__name__} "
            f"({'it has: ' + ', '.join(charts) if charts else 'it is empty'}); name the chart "
            "the trace followed")
    return mine


def chart_rows() -> list[dict[str, object]]:
    """Every chart of ``ALL_CHARTS`` as the listing shows it: ``{"name"`` (what
    :func:`chart_named` takes), ``"chart"`` (the class name), ``"states"``,
    ``"transitions"``, ``"summary"}``."""
    rows: list[dict[str, object]] = []
    for chart in ALL_CHARTS:
        table = compile(chart)
        summary = (sys.modules[chart.__module__].__doc__ or "").strip().split("\n")[0]
        rows.append({"name": _key(chart), "chart": chart.__name__,
                     "states": len(table.states), "transitions": len(table.transitions),
                     "summary": summary})
    return rows


def _listing(as_json: bool) -> str:
    rows = chart_rows()
    if as_json:
        return json.dumps({"charts": rows}, indent=2) + "\n"
    width = max(len(str(row["name"])) for row in rows)
    cls = max(len(str(row["chart"])) for row in rows)
    lines = [f"{'NAME':<{width}}  {'CHART':<{cls}}  STATES  TRANSITIONS  SUMMARY"]
    lines += [f"{row['name']:<{width}}  {row['chart']:<{cls}}  {row['states']:>6}  "
              f"{row['transitions']:>11}  {row['summary']}" for row in rows]
    lines.append("Render one: zlink-trio statecharts NAME [--format md|svg|dot] [--trace FILE]")
    return "\n".join(lines) + "\n"


def _chart_json(chart: type[StrictChart], fmt: str, records: list[TraceRecord],
                diagram: str) -> dict[str, object]:
    table = compile(chart)
    links = CHART_LINKS[chart.__name__]
    visited = set(visited_states(records))
    steps: dict[tuple[str, str], list[int]] = {}
    for number, record in enumerate(records, start=1):
        steps.setdefault((record.state, record.event), []).append(number)
    return {
        "chart": chart.__name__, "name": _key(chart), "format": fmt,
        "initial": table.initial,
        "finals": [s for s in table.state_order if table.is_final(s)],
        "states": [{"id": s, "final": table.is_final(s), "visited": s in visited}
                   for s in table.state_order],
        "transitions": [{"from": s, "event": e, "to": table.step(s, e),
                         "steps": steps.get((s, e), [])}
                        for s in table.state_order for e in table.events_from(s)],
        "drivers": list(links.drivers), "tests": list(links.tests),
        "trace": [record.to_json() for record in records],
        "diagram": diagram,
    }


def _markdown(chart: type[StrictChart], records: list[TraceRecord], diagram: str) -> str:
    table = compile(chart)
    links = CHART_LINKS[chart.__name__]
    summary = (sys.modules[chart.__module__].__doc__ or chart.__name__).strip().split("\n")[0]
    lines = [f"# {chart.__name__}", "", summary, "",
             f"Initial state `{table.initial}`; {len(table.states)} states, "
             f"{len(table.transitions)} transitions. Source: `statecharts/{_key(chart)}.py`; "
             f"full page: `docs/statecharts/{page_name(chart)}`.", "",
             "```mermaid", diagram.rstrip("\n"), "```", ""]
    if records:
        lines += [f"## Trace: {len(records)} step(s), ending in `{records[-1].target}`", "",
                  *path_lines(records), ""]
    lines += ["## Code", "", "Driven by:", *(f"- `{p}`" for p in links.drivers), "",
              "Covered by:", *(f"- `{p}`" for p in links.tests)]
    return "\n".join(lines) + "\n"

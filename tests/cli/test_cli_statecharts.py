"""``zlink-trio statecharts``: list the charts, render one as Markdown or SVG, highlight a trace.

The commands run in-process through ``cli.main``. The trace is recorded from a real
node (one cold activation on a memory store) with ``statecharts.trace.TraceWriter``
on the runtime's ``charts.TRACE``. The SVG is laid out in pure Python: it is parsed as
XML and read back (states, transitions, the trace's colours), with an empty ``PATH`` so
nothing outside the install can draw it; ``--format dot`` is the Graphviz source.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from xml.etree import ElementTree

import attrs
import pytest
import trio

import zlink_trio as zl
from statecharts import ALL_CHARTS, ColdActivation, Incarnation, compile
from statecharts.diagram import REACHED_FILL, display_names, visited_states
from statecharts.links import CHART_LINKS
from statecharts.trace import TraceWriter, read_trace
from zlink_trio import cli
from zlink_trio.cli.charts import chart_named
from zlink_trio.runtime import charts
from zlink_trio.testing import Recorder

if TYPE_CHECKING:
    from pathlib import Path


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Total:
    value: int


@zl.instance_spot("trace-counter", relocation=zl.RecreateOnRelocation())
class Counter:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.total = 0

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


async def _record(path: Path) -> None:
    with trio.fail_after(10), path.open("w", encoding="utf-8") as file:
        writer = TraceWriter(file, charts=["ColdActivation"])
        async with zl.open_node("trace-a", spots=[Counter], listen=None) as node:
            charts.TRACE.append(writer)
            try:
                await node.client.request("c-1", Add(2), reply=Total).instance_spot(
                    "trace-counter").timeout(5)
            finally:
                charts.TRACE.remove(writer)


@pytest.fixture
def trace_file(tmp_path) -> Path:
    path = tmp_path / "trace.jsonl"
    trio.run(_record, path)
    return path


def test_lists_every_chart_with_aligned_columns(capsys):
    status, out, _ = run(capsys, "statecharts")
    assert status == 0
    header, *rows, hint = out.splitlines()
    assert header.split()[:4] == ["NAME", "CHART", "STATES", "TRANSITIONS"]
    assert [row.split()[1] for row in rows] == [c.__name__ for c in ALL_CHARTS]
    assert len({row.index(row.split()[1]) for row in rows}) == 1  # CHART column aligned
    assert hint.startswith("Render one: zlink-trio statecharts NAME")
    status, out, _ = run(capsys, "statecharts", "--json")
    assert status == 0
    listed = json.loads(out)["charts"]
    assert [c["chart"] for c in listed] == [c.__name__ for c in ALL_CHARTS]
    assert listed[3] == {"name": "incarnation", "chart": "Incarnation", "states": 6,
                         "transitions": len(compile(Incarnation).transitions),
                         "summary": listed[3]["summary"]}


@pytest.mark.parametrize("name", ["incarnation", "Incarnation", "INCARNATION"])
def test_md_renders_the_mermaid_diagram_and_the_code_links(capsys, name):
    status, out, _ = run(capsys, "statecharts", name)
    assert status == 0
    assert out.startswith("# Incarnation\n")
    assert "```mermaid\n" + format(Incarnation, "mermaid") + "```" in out
    for path in (*CHART_LINKS["Incarnation"].drivers, *CHART_LINKS["Incarnation"].tests):
        assert f"- `{path}`" in out
    assert "classDef" not in out
    assert "## Trace" not in out


def test_md_highlights_a_recorded_trace(capsys, trace_file):
    records = read_trace(trace_file.read_text("utf-8").splitlines())
    assert records[0].state == "resolving"  # a real run was recorded
    status, out, _ = run(capsys, "statecharts", "cold_activation", "--trace", str(trace_file))
    assert status == 0
    reached = records[-1].target
    assert "    classDef visited fill:" in out
    assert "    classDef reached fill:" in out
    assert f"    {reached}:::reached\n" in out
    for record in records:
        assert f"    {record.state}:::visited\n" in out
    assert "    deadline_exceeded:::" not in out  # a state the run never was in
    numbered = [line for line in out.splitlines() if line[:1].isdigit()]
    assert numbered == [f"{n}. `{r.state}` --`{r.event}`--> `{r.target}`"
                        for n, r in enumerate(records, start=1)]
    assert f"## Trace: {len(records)} step(s), ending in `{reached}`" in out


def test_json_carries_states_transitions_steps_and_links(capsys, trace_file):
    records = read_trace(trace_file.read_text("utf-8").splitlines())
    status, out, _ = run(capsys, "statecharts", "ColdActivation", "--trace", str(trace_file),
                         "--json")
    assert status == 0
    shown = json.loads(out)
    table = compile(ColdActivation)
    assert (shown["chart"], shown["name"], shown["format"]) == (
        "ColdActivation", "cold_activation", "md")
    assert shown["initial"] == table.initial
    assert [s["id"] for s in shown["states"]] == list(table.state_order)
    assert {s["id"] for s in shown["states"] if s["visited"]} == (
        {r.state for r in records} | {r.target for r in records})
    taken = {(t["from"], t["event"]): t["steps"] for t in shown["transitions"] if t["steps"]}
    assert taken == {(r.state, r.event): [n] for n, r in enumerate(records, start=1)}
    assert len(shown["transitions"]) == len(table.transitions)
    assert shown["trace"] == [r.to_json() for r in records]
    assert shown["drivers"] == list(CHART_LINKS["ColdActivation"].drivers)
    assert shown["diagram"].startswith("stateDiagram-v2\n")


def test_output_writes_the_file(capsys, tmp_path):
    target = tmp_path / "chart.md"
    status, out, _ = run(capsys, "statecharts", "close", "--output", str(target))
    assert (status, out) == (0, "")
    assert target.read_text("utf-8").startswith("# CloseOperation\n")


_SVG = "{http://www.w3.org/2000/svg}"


def test_svg_needs_nothing_outside_the_install(capsys, monkeypatch, tmp_path, trace_file):
    """``--format svg`` on a machine without Graphviz (an empty PATH): every state is a
    box with its name, every transition a path with its event, the trace's path drawn
    over it -- the visited states filled, the last gold, the steps red with numbers."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot, no anything
    status, out, err = run(capsys, "statecharts", "cold_activation", "--format", "svg",
                           "--trace", str(trace_file))
    assert status == 0, err
    root = ElementTree.fromstring(out)
    assert root.tag == f"{_SVG}svg"
    table = compile(chart_named("cold_activation"))
    states = {g.get("data-state"): g for g in root.iter(f"{_SVG}g")
              if g.get("class") == "state"}
    assert set(states) == set(table.state_order)
    names = display_names(chart_named("cold_activation"))
    for state, group in states.items():
        assert group.find(f"{_SVG}text").text == names[state]
    edges = {(g.get("data-source"), g.get("data-event")): g for g in root.iter(f"{_SVG}g")
             if g.get("class") == "transition"}
    assert set(edges) == {(s, e) for s in table.state_order for e in table.events_from(s)}
    for (state, event), group in edges.items():
        assert group.get("data-target") == table.step(state, event)
    records = read_trace(trace_file.read_text("utf-8").splitlines())
    first = edges[records[0].state, records[0].event]
    assert first.find(f"{_SVG}path").get("stroke") == "#d62728"
    assert first.find(f"{_SVG}text").text == f"{records[0].event} (1)"
    last = states[records[-1].target].find(f"{_SVG}rect")
    assert (last.get("fill"), last.get("stroke-width")) == (REACHED_FILL, "2.0")
    untouched = [s for s in table.state_order if s not in visited_states(records)]
    assert untouched
    assert states[untouched[0]].find(f"{_SVG}rect").get("fill") == "#ffffff"
    # Boxes do not overlap.
    boxes = [tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))
             for r in (g.find(f"{_SVG}rect") for g in states.values())]
    for i, (x1, y1, w1, h1) in enumerate(boxes):
        for x2, y2, w2, h2 in boxes[i + 1:]:
            assert x1 + w1 <= x2 or x2 + w2 <= x1 or y1 + h1 <= y2 or y2 + h2 <= y1
    status, out, _ = run(capsys, "statecharts", "cold_activation", "--format", "svg", "--json")
    assert status == 0
    assert json.loads(out)["diagram"].startswith("<svg")


def test_every_chart_draws_as_svg(capsys):
    for chart in ALL_CHARTS:
        status, out, err = run(capsys, "statecharts", chart.__name__, "--format", "svg")
        assert status == 0, err
        assert ElementTree.fromstring(out).tag == f"{_SVG}svg"


def test_dot_is_the_graphviz_source_with_the_trace(capsys, trace_file):
    status, out, err = run(capsys, "statecharts", "cold_activation", "--format", "dot",
                           "--trace", str(trace_file))
    assert status == 0, err
    records = read_trace(trace_file.read_text("utf-8").splitlines())
    first = records[0]
    assert out.startswith('digraph "ColdActivation" {')
    assert (f'"{first.state}" -> "{first.target}" [label="{first.event} (1)", '
            'color="#d62728"') in out
    assert f'"{records[-1].target}" [label=' in out
    assert '"deadline_exceeded" [label="Deadline exceeded", peripheries=2];' in out


def test_a_trace_that_does_not_fit_the_chart_exits_1(capsys, tmp_path, trace_file):
    status, _, err = run(capsys, "statecharts", "incarnation", "--trace", str(trace_file))
    assert status == 1
    assert "has no records of Incarnation (it has: ColdActivation)" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"chart": "Incarnation", "state": "serving", "event": "dispose", '
                   '"target": "disposed"}\n', encoding="utf-8")
    status, _, err = run(capsys, "statecharts", "incarnation", "--trace", str(bad))
    assert status == 1
    assert "serving --dispose--> disposed is not a transition of the chart" in err
    bad.write_text("not json\n", encoding="utf-8")
    status, _, err = run(capsys, "statecharts", "incarnation", "--trace", str(bad))
    assert status == 1
    assert "line 1: not JSON" in err


@pytest.mark.parametrize(("argv", "says"), [
    (["statecharts", "nope"], "no chart 'nope'; the charts are spot_authority"),
    (["statecharts", "--format", "md"], "name CHART"),
    (["statecharts", "close", "--trace", "/no/such/trace.jsonl"], "cannot read --trace"),
    (["statecharts", "close", "--format", "png"], "invalid choice: 'png'"),
])
def test_usage_errors_exit_2(capsys, argv, says):
    status, _, err = run(capsys, *argv)
    assert status == 2
    assert says in err


async def _record_with_the_kit(path: Path) -> int:
    with trio.fail_after(10), Recorder() as recorder:
        async with zl.open_node("trace-b", spots=[Counter], listen=None) as node:
            with recorder.operation("first-call"):
                await node.client.request("c-2", Add(1), reply=Total).instance_spot(
                    "trace-counter").timeout(5)
        return recorder.write_trace(path, "first-call")


def test_the_kits_recorder_writes_a_trace_the_command_highlights(capsys, tmp_path):
    path = tmp_path / "kit-trace.jsonl"
    written = trio.run(_record_with_the_kit, path)
    records = read_trace(path.read_text("utf-8").splitlines())
    assert len(records) == written > 0
    cold = [r for r in records if r.chart == "ColdActivation"]
    assert cold, records  # the operation's cold activation was recorded
    status, out, _ = run(capsys, "statecharts", "cold_activation", "--trace", str(path))
    assert status == 0
    assert f"## Trace: {len(cold)} step(s), ending in `{cold[-1].target}`" in out

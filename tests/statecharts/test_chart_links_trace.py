"""``statecharts.links`` names real files, and every module stepping a chart; the trace format."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from statecharts import ALL_CHARTS, Incarnation, compile
from statecharts.diagram import dot, mermaid
from statecharts.links import CHART_LINKS
from statecharts.render import page_name, render_pages
from statecharts.trace import (
    TraceFormatError,
    TraceRecord,
    TraceWriter,
    check_trace,
    read_trace,
    trace_line,
)

ROOT = Path(__file__).resolve().parents[2]

#: The typed chart constants runtime modules step (runtime/charts.py and statecharts.names).
_CONSTANTS = {
    "ColdActivation": ("COLD", "COLD_ACTIVATION"), "UserCreate": ("CREATE", "USER_CREATE"),
    "CloseOperation": ("CLOSE", "CLOSE_OPERATION"), "NodeLifecycle": ("NODE", "NODE_LIFECYCLE"),
    "PlannedRelocation": ("RELOCATION", "PLANNED_RELOCATION"), "Incarnation": ("INCARNATION",),
    "ActorMembership": ("MEMBERSHIP", "ACTOR_MEMBERSHIP"),
}


def test_every_chart_has_drivers_and_tests_that_exist():
    assert list(CHART_LINKS) == [chart.__name__ for chart in ALL_CHARTS]
    for name, links in CHART_LINKS.items():
        assert links.drivers, name
        assert links.tests, name
        for path in (*links.drivers, *links.tests):
            assert (ROOT / path).is_file(), f"{name}: {path} does not exist"


@pytest.mark.parametrize("chart", sorted(_CONSTANTS))
def test_every_module_that_steps_a_chart_is_a_driver(chart):
    names = "|".join(_CONSTANTS[chart])
    pattern = re.compile(rf"\bstep\(({names}),|\b({names})\.(ev|st)\.")
    stepping = sorted(
        str(path.relative_to(ROOT)) for path in (ROOT / "zlink_trio").rglob("*.py")
        if path.name != "charts.py" and pattern.search(path.read_text("utf-8")))
    assert stepping
    assert set(stepping) <= set(CHART_LINKS[chart].drivers)


def test_pages_link_the_drivers_and_tests():
    pages = render_pages()
    for chart in ALL_CHARTS:
        page = pages[page_name(chart)]
        for path in (*CHART_LINKS[chart.__name__].drivers, *CHART_LINKS[chart.__name__].tests):
            assert f"[`{path}`](../../{path})" in page


def test_writer_writes_lines_the_reader_reads_back():
    stream = io.StringIO()
    writer = TraceWriter(stream, charts=["Incarnation"])
    writer("Incarnation", "activating", "commit_ready", "barrier_closed")
    writer("ColdActivation", "resolving", "found_missing_with_intent", "selecting_mesh")
    writer("Incarnation", "barrier_closed", "open_barrier", "serving")
    text = stream.getvalue()
    assert text == (trace_line("Incarnation", "activating", "commit_ready", "barrier_closed")
                    + trace_line("Incarnation", "barrier_closed", "open_barrier", "serving"))
    records = read_trace(["", *text.splitlines(), "  "])
    assert records == [TraceRecord("Incarnation", "activating", "commit_ready", "barrier_closed"),
                       TraceRecord("Incarnation", "barrier_closed", "open_barrier", "serving")]
    assert check_trace(compile(Incarnation), records) == records


@pytest.mark.parametrize("line", [
    "[1, 2]", '{"chart": "Incarnation"}', '{"chart": 1, "state": "a", "event": "b", "target": "c"}',
    '{"chart": "I", "state": "a", "event": "b", "target": "c", "extra": "d"}',
])
def test_reader_refuses_what_is_not_a_record(line):
    with pytest.raises(TraceFormatError, match="line 2: a trace record is a JSON object"):
        read_trace(['{"chart": "I", "state": "a", "event": "b", "target": "c"}', line])


def test_check_refuses_a_transition_the_chart_does_not_define():
    records = [TraceRecord("Incarnation", "activating", "commit_ready", "serving")]
    with pytest.raises(TraceFormatError, match="step 1 of Incarnation"):
        check_trace(compile(Incarnation), records)


def test_diagrams_mark_only_the_visited_states():
    records = [TraceRecord("Incarnation", "activating", "commit_ready", "barrier_closed"),
               TraceRecord("Incarnation", "barrier_closed", "open_barrier", "serving")]
    text = mermaid(Incarnation, records)
    assert text.startswith(format(Incarnation, "mermaid").rstrip("\n"))
    assert text.endswith("    activating:::visited\n    barrier_closed:::visited\n"
                         "    serving:::reached\n")
    source = dot(Incarnation, records)
    assert '"activating" -> "barrier_closed" [label="commit_ready (1)", color=' in source
    assert '"serving" -> "sealed" [label="seal_for_relocation"];' in source
    assert '"disposed" [label="Disposed", peripheries=2];' in source
    assert dot(Incarnation) == dot(Incarnation)

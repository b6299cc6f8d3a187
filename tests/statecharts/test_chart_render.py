"""The rendered pages: deterministic, committed, and checked for drift."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from statecharts import ALL_CHARTS, SpotAuthority, compile
from statecharts.__main__ import main
from statecharts.render import RENDER_COMMAND, check, page_name, render_pages, write

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "statecharts"


def test_committed_pages_match_a_fresh_render(tmp_path):
    write(tmp_path)
    fresh = {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir())}
    committed = {p.name: p.read_bytes() for p in sorted(DOCS.glob("*"))} if DOCS.is_dir() else {}
    differing = sorted(
        name for name in set(fresh) | set(committed) if fresh.get(name) != committed.get(name)
    )
    assert not differing, (
        f"docs/statecharts is out of date ({', '.join(differing)}); run `{RENDER_COMMAND}`"
    )


def test_render_is_deterministic():
    assert render_pages() == render_pages()


def test_render_is_deterministic_across_processes():
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    result = subprocess.run(
        [sys.executable, "-m", "statecharts", "check", str(DOCS)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_one_page_per_chart_plus_an_index_linking_them_all():
    pages = render_pages()
    assert set(pages) == {page_name(c) for c in ALL_CHARTS} | {"index.md"}
    for chart in ALL_CHARTS:
        assert f"]({page_name(chart)})" in pages["index.md"]


@pytest.mark.parametrize("chart", ALL_CHARTS, ids=lambda c: c.__name__)
def test_page_has_title_docstring_diagram_and_every_transition(chart):
    page = render_pages()[page_name(chart)]
    assert f"\n# {chart.__name__}\n" in page
    assert "Theory of operation" in page
    assert "```mermaid\n" + format(chart, "mermaid").rstrip("\n") + "\n```" in page
    table = compile(chart)
    for (state, event), target in table.transitions.items():
        assert f"| `{state}` | `{event}` | `{target}` |" in page


def test_check_passes_on_a_fresh_render(tmp_path, capsys):
    write(tmp_path)
    assert check(tmp_path) == []
    assert main(["check", str(tmp_path)]) == 0


def test_check_fails_on_a_changed_page(tmp_path, capsys):
    write(tmp_path)
    page = tmp_path / page_name(SpotAuthority)
    page.write_text(page.read_text(encoding="utf-8") + "hand edit\n", encoding="utf-8")
    assert main(["check", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert f"changed: {page.name}" in err
    assert RENDER_COMMAND in err


def test_check_fails_on_missing_and_extra_pages(tmp_path, capsys):
    write(tmp_path)
    (tmp_path / "index.md").unlink()
    (tmp_path / "old_chart.md").write_text("stale\n", encoding="utf-8")
    assert check(tmp_path) == ["missing: index.md", "extra: old_chart.md"]
    assert main(["check", str(tmp_path)]) == 1
    assert main(["check", str(tmp_path / "absent")]) == 1


def test_render_replaces_stale_generated_pages_and_keeps_other_files(tmp_path, capsys):
    write(tmp_path)
    stale = tmp_path / "renamed_chart.md"
    stale.write_bytes((tmp_path / "index.md").read_bytes())
    keep = tmp_path / "notes.md"
    keep.write_text("hand written\n", encoding="utf-8")
    assert main(["render", str(tmp_path)]) == 0
    assert not stale.exists()
    assert keep.read_text(encoding="utf-8") == "hand written\n"

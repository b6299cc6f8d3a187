"""The README's main command, ``python -m zlink_trio.demo``, runs and tells its story."""

from __future__ import annotations

from typing import TYPE_CHECKING

from statecharts import ALL_CHARTS
from zlink_trio import demo

if TYPE_CHECKING:
    from pathlib import Path


def test_demo_exits_zero_and_renders_every_chart(tmp_path: Path, capsys):
    assert demo.main(["--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "refused:" in out
    assert "re-created with a larger generation" in out
    pages = sorted(p.name for p in tmp_path.glob("*.md"))
    assert len(pages) == len(ALL_CHARTS) + 1
    assert "index.md" in pages

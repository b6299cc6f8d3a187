"""The README's Quickstart commands are exactly what CI runs.

CI (``.ci/run``) must install and test the way a newcomer following the
README would; this test fails when the two drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bash_blocks(markdown: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", markdown, re.DOTALL)]


def _ci_section(name: str) -> str:
    text = (ROOT / ".ci" / "run").read_text()
    match = re.search(rf"# README-{name}-BEGIN\n(.*?)# README-{name}-END", text, re.DOTALL)
    assert match, f".ci/run lost its README-{name} markers"
    return match.group(1).strip()


def test_ci_installs_and_runs_the_demo_with_the_readme_command():
    blocks = _bash_blocks((ROOT / "README.md").read_text())
    assert blocks[0] == _ci_section("INSTALL")


def test_ci_runs_the_tests_with_the_readme_command():
    blocks = _bash_blocks((ROOT / "README.md").read_text())
    assert blocks[1] == _ci_section("TEST")


def test_quickstart_is_one_install_and_demo_command_and_one_test_command():
    blocks = _bash_blocks((ROOT / "README.md").read_text())
    assert len(blocks) == 2
    assert all("\n" not in block for block in blocks)
    assert blocks[0].endswith(".venv/bin/python -m zlink_trio.samples.demo")

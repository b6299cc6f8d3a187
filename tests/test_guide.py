"""Every code block of ``docs/guide.md`` runs, so the guide cannot rot.

The guide's convention (its "How to read this guide" section says the same):

- a ```` ```python ```` block is a complete program: it is run with this interpreter
  (from a script file kept outside it) in a fresh, empty working directory and must exit 0 within
  :data:`BLOCK_TIMEOUT`; ``assert`` statements in it are the checks;
- a ```` ```sh ```` block is shell commands, run with ``bash -euo pipefail`` the same
  way, with this interpreter's ``bin`` directory (``zlink-trio``) first on ``PATH``;
- a ```` ```text ```` block is output or pseudo-text and never runs;
- ``<!-- guide: after the previous block -->`` on the line before a block makes it run
  right after the block before it, in the same working directory (so it sees the
  SQLite file that block left); such a chain is one test, named after its first line;
- a block whose text names ``redis://`` needs Redis: the test points ``REDIS_URL`` at
  ``ZLINK_TEST_REDIS`` with a fresh ``?prefix=`` (deleted afterwards). Without a Redis
  the test fails under CI and is skipped locally (``tests/store/redis_helpers.py``).

Any other fence language is refused, so a block can never silently stop running.
A failure names the block's line in the guide, with its output.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import attrs
import pytest
import trio

# tests/ is on sys.path (pytest's rootdir-relative import of this file), so the Redis
# helpers of the store tests are ``store.redis_helpers`` from here.
from store.redis_helpers import REDIS_URL, delete_prefix, fresh_prefix, unreachable, url_with

import zlink_trio as zl

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "guide.md"

#: Seconds one block may run (the slowest waits out a 2 s lease on a loaded machine).
BLOCK_TIMEOUT = 30
#: The marker that joins a block to the one before it.
AFTER_PREVIOUS = "<!-- guide: after the previous block -->"
RUNS = ("python", "sh")
LANGUAGES = (*RUNS, "text")

_FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


@attrs.frozen
class Block:
    """One fenced block of the guide."""

    line: int  # the line of its opening fence, 1-based
    language: str
    source: str
    after_previous: bool


def guide_blocks(text: str) -> list[Block]:
    """Every fenced block of ``text`` in order, with its line and marker."""
    blocks = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        blocks.append(Block(line=line, language=match.group(1), source=match.group(2),
                            after_previous=before == AFTER_PREVIOUS))
    return blocks


def chains(blocks: list[Block]) -> list[list[Block]]:
    """The runnable blocks grouped into chains: a block and the blocks marked after it."""
    groups: list[list[Block]] = []
    for block in blocks:
        if block.language not in RUNS:
            continue
        if block.after_previous:
            assert groups, f"docs/guide.md:{block.line}: nothing before it to run after"
            groups[-1].append(block)
        else:
            groups.append([block])
    return groups


BLOCKS = guide_blocks(GUIDE.read_text())
CHAINS = chains(BLOCKS)


def _redis_reachable() -> str | None:
    """``None`` when the test Redis accepts a connection, else why not."""
    parts = urlsplit(REDIS_URL)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379),
                                      timeout=2):
            return None
    except OSError as error:
        return str(error)


def _run(block: Block, scripts: Path, cwd: Path, env: dict[str, str]) -> None:
    # The script is a file (outside the working directory) so that a traceback shows
    # the failing line; its line N is line ``block.line + N`` of the guide.
    script = scripts / f"guide_line{block.line}.{'py' if block.language == 'python' else 'sh'}"
    script.write_text(block.source)
    command = ([sys.executable, str(script)] if block.language == "python"
               else ["bash", "-euo", "pipefail", str(script)])
    where = f"docs/guide.md:{block.line} (script line N is guide line {block.line} + N)"
    try:
        done = subprocess.run(command, cwd=cwd, env=env, text=True, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=BLOCK_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"{where}: the {block.language} block did not finish within "
                    f"{BLOCK_TIMEOUT} s\n--- stdout\n{expired.stdout}\n--- stderr\n"
                    f"{expired.stderr}", pytrace=False)
    if done.returncode != 0:
        pytest.fail(f"{where}: the {block.language} block exited {done.returncode}\n"
                    f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}", pytrace=False)


@pytest.mark.parametrize("chain", CHAINS, ids=[f"line{chain[0].line}" for chain in CHAINS])
def test_guide_block_runs(chain: list[Block], tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    prefix = None
    if any("redis://" in block.source for block in chain):
        problem = _redis_reachable()
        if problem is not None:
            unreachable(problem)
        prefix = fresh_prefix()
        env["REDIS_URL"] = url_with(prefix)
    scripts, cwd = tmp_path / "scripts", tmp_path / "cwd"
    scripts.mkdir()
    cwd.mkdir()
    try:
        for block in chain:
            _run(block, scripts, cwd, env)
    finally:
        if prefix is not None:
            trio.run(delete_prefix, prefix)


def test_every_block_is_python_sh_or_text() -> None:
    # A ```py or ```bash block would silently never run.
    odd = [f"docs/guide.md:{b.line}: ```{b.language}" for b in BLOCKS
           if b.language not in LANGUAGES]
    assert not odd, f"use ```python, ```sh or ```text: {odd}"


def test_most_blocks_run() -> None:
    # ```text is for output and the odd sketch; the guide teaches with programs.
    texts = [b for b in BLOCKS if b.language == "text"]
    assert len(CHAINS) >= 8
    assert len(texts) <= len(BLOCKS) // 3, [b.line for b in texts]


def test_every_marker_precedes_a_block() -> None:
    lines = GUIDE.read_text().splitlines()
    markers = sum(line.strip() == AFTER_PREVIOUS for line in lines)
    assert markers == sum(b.after_previous for b in BLOCKS)


def test_every_zl_name_the_guide_mentions_exists() -> None:
    # Prose and ```text blocks are not run; a renamed API must still fail here.
    names = set(re.findall(r"\bzl\.([A-Za-z_]\w*)", GUIDE.read_text()))
    missing = sorted(name for name in names if not hasattr(zl, name))
    assert not missing, f"docs/guide.md names zl.{missing}, which zlink_trio does not export"


def test_readme_links_the_guide() -> None:
    assert "](docs/guide.md)" in (ROOT / "README.md").read_text()


def _github_anchor(heading: str) -> str:
    # GitHub's slugs: lowercase, punctuation other than - and _ dropped, spaces to -.
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_inside_the_guide_and_to_other_docs_resolve() -> None:
    text = GUIDE.read_text()
    anchors = {_github_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE)}
    broken = [a for a in re.findall(r"\]\(#([^)]+)\)", text) if a not in anchors]
    broken += [p for p in re.findall(r"\]\(([\w/]+\.md)[#)]", text)
               if not (GUIDE.parent / p).exists()]
    assert not broken, broken

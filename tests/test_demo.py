"""The README's main command, ``python -m zlink_trio.samples.demo``, runs and tells its story."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from trio.testing import MockClock

from statecharts import ALL_CHARTS
from zlink_trio.samples import demo

if TYPE_CHECKING:
    from pathlib import Path


def test_demo_tells_every_step_and_exits_zero(tmp_path: Path, capsys):
    assert demo.main(["--render", str(tmp_path)], clock=MockClock(autojump_threshold=0)) == 0
    out = capsys.readouterr().out
    for step in ("== 1. cold activation", "== 2. a plain call never creates",
                 "== 3. 100 concurrent get_or_create", "== 4. close the room",
                 "== 5. idle eviction", "on_close(IDLE_EVICTED)", "demo finished"):
        assert step in out
    assert "factory runs: 1; CREATED: 1" in out
    assert "EXISTING: 99" in out
    pages = sorted(p.name for p in tmp_path.glob("*.md"))
    assert len(pages) == len(ALL_CHARTS) + 1


def test_demo_can_run_twice_in_one_process(capsys):
    # The story keeps per-run counters; a second run must start from zero.
    clock = MockClock(autojump_threshold=0)
    assert demo.main([], clock=clock) == 0
    assert demo.main([], clock=MockClock(autojump_threshold=0)) == 0
    assert capsys.readouterr().out.count("factory runs: 1;") == 2


def test_demo_tells_the_story_across_three_node_processes(capsys):
    """Issue #5 item 9: ``python -m zlink_trio.samples.demo --nodes 3`` -- the same story over three
    node processes on one SQLite file, calls crossing processes; it checks every step,
    exits 0 and leaves neither processes nor its temporary directory behind."""
    assert demo.main(["--nodes", "3"]) == 0
    out = capsys.readouterr().out
    for step in ("3 node processes share sqlite://", "== 1. cold activation",
                 "placement put it on node-", "== 2. a plain call never creates",
                 "== 3. 100 concurrent get_or_create", "factory runs (all processes): 1",
                 "EXISTING: 99", "== 4. node-", "close again -> False", "== 5. idle eviction",
                 "on_close(IDLE_EVICTED)", "from a new incarnation", "all nodes closed",
                 "demo finished"):
        assert step in out, step
    workdir = out.split("share sqlite://", 1)[1].split(" ", 1)[0].rsplit("/", 1)[0]
    assert not os.path.exists(workdir)  # the temporary SQLite file is cleaned up

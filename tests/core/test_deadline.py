"""Deadline: one moment on the local Trio clock and on the shared wall clock."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from zlink_trio.core.deadline import MAX_WALL_MS, Deadline


def test_after_places_the_same_moment_on_both_clocks():
    deadline = Deadline.after(2.5, now=100.0, wall_now=1_700_000_000.25)
    assert deadline.at == 102.5
    assert deadline.wall_ms == 1_700_000_002_750
    assert isinstance(deadline, Deadline)
    assert deadline == Deadline(102.5, 1_700_000_002_750)


def test_from_wall_ms_keeps_the_milliseconds_it_received():
    deadline = Deadline.from_wall_ms(1_700_000_005_000, now=50.0, wall_now=1_700_000_000.0)
    assert deadline.wall_ms == 1_700_000_005_000  # relayed or recorded unchanged
    assert deadline.at == 55.0


def test_a_deadline_from_another_process_means_the_same_moment_here():
    # Written by a process whose Trio clock read 10.0, read back by one whose read 9000.0:
    # the Trio times differ, the wall-clock moment and the time left do not.
    written = Deadline.after(3.0, now=10.0, wall_now=1_000.0)
    read = Deadline.from_wall_ms(written.wall_ms, now=9_000.0, wall_now=1_001.0)
    assert read.wall_ms == written.wall_ms
    assert read.remaining(9_000.0) == 2.0
    assert not read.passed(9_001.9)
    assert read.passed(9_002.0)


def test_far_off_and_infinite_deadlines_are_clamped_to_the_wire_bound():
    assert Deadline.after(math.inf, now=0.0, wall_now=0.0).wall_ms == MAX_WALL_MS
    assert Deadline.after(1e30, now=0.0, wall_now=0.0).wall_ms == MAX_WALL_MS
    assert Deadline.from_wall_ms(MAX_WALL_MS, now=0.0, wall_now=0.0).at == math.inf
    assert Deadline.after(-5.0, now=0.0, wall_now=0.0).wall_ms == 1  # never 0 on the wire


@given(seconds=st.floats(0.001, 10_000), now=st.floats(-1e6, 1e6),
       wall_now=st.floats(1e9, 2e9))
def test_wall_ms_is_always_on_the_wire_range(seconds, now, wall_now):
    deadline = Deadline.after(seconds, now=now, wall_now=wall_now)
    assert 1 <= deadline.wall_ms <= MAX_WALL_MS
    assert abs(deadline.wall_ms / 1000 - (wall_now + seconds)) < 0.002

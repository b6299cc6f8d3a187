"""The per-Spot timer schedule: due order, cancel, periodic ticks without bursts, the bound.

Plain synchronous tests: the schedule is sans-IO and time is an argument.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zlink_trio.core.errors import CapacityExceeded, InvalidConfiguration, InvalidOperation
from zlink_trio.core.timers import DEFAULT_MAX_TIMERS, TimerId, TimerSchedule


def test_one_shot_fires_at_its_deadline_once():
    timers = TimerSchedule()
    tid = timers.add(5, now=10)
    assert timers.next_deadline() == 15
    assert timers.due(14.999) == []
    assert timers.due(15) == [tid]
    assert timers.due(100) == []
    assert tid not in timers
    assert timers.next_deadline() is None


def test_zero_delay_and_past_absolute_deadline_fire_at_the_next_due():
    timers = TimerSchedule()
    a = timers.add(0, now=3)
    b = timers.add_at(1)
    assert timers.due(3) == [b, a]


def test_due_returns_timers_in_deadline_order_ties_in_add_order():
    timers = TimerSchedule()
    late = timers.add(3, now=0)
    first_tie = timers.add(1, now=0)
    early = timers.add_at(0.5)
    second_tie = timers.add_at(1)
    assert timers.due(10) == [early, first_tie, second_tie, late]


def test_cancel_is_idempotent_and_reports_whether_it_removed_something():
    timers = TimerSchedule()
    tid = timers.add(1, now=0)
    assert timers.cancel(tid) is True
    assert timers.cancel(tid) is False
    assert timers.cancel(TimerId(999)) is False
    assert timers.due(5) == []
    fired = timers.add(1, now=0)
    assert timers.due(1) == [fired]
    assert timers.cancel(fired) is False


def test_cancel_all_clears_the_schedule_and_counts():
    timers = TimerSchedule()
    timers.add(1, now=0)
    timers.add(2, now=0, period=1)
    assert timers.cancel_all() == 2
    assert len(timers) == 0
    assert timers.next_deadline() is None
    assert timers.due(100) == []


def test_periodic_timer_fires_every_period_on_a_fixed_grid():
    timers = TimerSchedule()
    tid = timers.add(2, now=0, period=3)
    assert timers.due(2.5) == [tid]
    assert timers.next_deadline() == 5
    assert timers.due(5.1) == [tid]  # a late wake-up does not shift the grid
    assert timers.next_deadline() == 8


def test_periodic_timer_skips_missed_ticks_instead_of_bursting():
    timers = TimerSchedule()
    tid = timers.add(1, now=0, period=1)
    assert timers.due(4.5) == [tid]  # deadlines 1, 2, 3, 4 passed: one tick only
    assert timers.next_deadline() == 5
    assert timers.statistics().skipped == 3
    assert timers.statistics().fired == 1


def test_ids_are_never_reused():
    timers = TimerSchedule()
    first = timers.add(0, now=0)
    timers.cancel(first)
    assert timers.add(0, now=0) != first


@pytest.mark.parametrize("period", [0, -1, math.inf, math.nan, True, "1"])
def test_period_must_be_finite_and_positive(period):
    timers = TimerSchedule()
    with pytest.raises(InvalidOperation, match="period"):
        timers.add(1, now=0, period=period)
    assert len(timers) == 0


@pytest.mark.parametrize("delay", [-0.1, math.inf, math.nan, None])
def test_delay_must_be_finite_and_not_negative(delay):
    with pytest.raises(InvalidOperation, match="delay"):
        TimerSchedule().add(delay, now=0)


def test_now_must_be_finite():
    timers = TimerSchedule()
    with pytest.raises(InvalidOperation, match="now"):
        timers.add(1, now=math.nan)
    with pytest.raises(InvalidOperation, match="now"):
        timers.due(math.inf)


def test_timers_per_spot_are_bounded():
    assert TimerSchedule().statistics().max_timers == DEFAULT_MAX_TIMERS == 1024
    timers = TimerSchedule(max_timers=2)
    a = timers.add(1, now=0)
    timers.add(1, now=0, period=1)
    with pytest.raises(CapacityExceeded, match="bound of 2") as caught:
        timers.add(1, now=0)
    assert caught.value.lane is None
    assert len(timers) == 2
    timers.cancel(a)
    timers.add(1, now=0)
    assert len(timers) == 2


def test_full_default_bound_is_enforced():
    timers = TimerSchedule()
    for index in range(DEFAULT_MAX_TIMERS):
        timers.add(index, now=0)
    with pytest.raises(CapacityExceeded):
        timers.add_at(0)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None])
def test_max_timers_must_be_a_positive_int(bad):
    with pytest.raises(InvalidConfiguration, match="max_timers"):
        TimerSchedule(max_timers=bad)


def test_statistics_and_listing_show_the_registered_timers():
    timers = TimerSchedule()
    periodic = timers.add(5, now=0, period=2)
    one_shot = timers.add(1, now=0)
    stats = timers.statistics()
    assert (stats.active, stats.periodic, stats.next_deadline) == (2, 1, 1)
    listing = timers.timers()
    assert [info.timer_id for info in listing] == [one_shot, periodic]
    assert [info.period for info in listing] == [None, 2]


def test_many_cancellations_keep_the_schedule_correct():
    timers = TimerSchedule()
    ids = [timers.add(i, now=0) for i in range(500)]
    for tid in ids[:-1]:
        timers.cancel(tid)
    assert timers.next_deadline() == 499
    assert timers.due(1000) == [ids[-1]]


# --------------------------------------------------------------------------- properties

_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"), st.integers(0, 50), st.one_of(st.none(), st.integers(1, 20))
        ),
        st.tuples(st.just("cancel"), st.integers(0, 40)),
        st.tuples(st.just("advance"), st.integers(0, 60)),
    ),
    max_size=60,
)


@given(_ops)
def test_schedule_matches_a_naive_model(ops):
    """Integer times keep the arithmetic exact, so the model can be compared exactly."""
    timers = TimerSchedule(max_timers=10_000)
    model: dict[TimerId, list[int | None]] = {}  # id -> [deadline, period]
    issued: list[TimerId] = []
    now = 0
    for op in ops:
        if op[0] == "add":
            tid = timers.add(op[1], now=now, period=op[2])
            issued.append(tid)
            model[tid] = [now + op[1], op[2]]
        elif op[0] == "cancel":
            if issued:
                tid = issued[op[1] % len(issued)]
                assert timers.cancel(tid) is (model.pop(tid, None) is not None)
        else:
            now += op[1]
            expected = sorted(
                (tid for tid, (deadline, _) in model.items() if deadline <= now),
                key=lambda tid: (model[tid][0], tid.value),
            )
            fired = timers.due(now)
            assert fired == expected
            assert len(set(fired)) == len(fired)  # no burst: each timer at most once
            for tid in fired:
                deadline, period = model[tid]
                if period is None:
                    del model[tid]
                else:
                    while deadline <= now:
                        deadline += period
                    model[tid][0] = deadline
        assert len(timers) == len(model)
        deadlines = [deadline for deadline, _ in model.values()]
        assert timers.next_deadline() == (min(deadlines) if deadlines else None)


@given(
    delay=st.floats(0, 1e6),
    period=st.floats(1e-3, 1e6),
    late=st.floats(0, 1e7),
)
def test_periodic_timer_fires_once_and_lands_strictly_after_now(delay, period, late):
    timers = TimerSchedule()
    tid = timers.add(delay, now=0.0, period=period)
    now = delay + late
    assert timers.due(now) == [tid]
    following = timers.next_deadline()
    assert following is not None
    assert now < following <= now + period * (1 + 1e-9) + 1e-9
    assert timers.due(now) == []

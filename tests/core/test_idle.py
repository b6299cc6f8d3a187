"""Idle cleanup (spec 09 §5): the idle predicate and the bounded, resuming sweep.

Plain synchronous tests: both are sans-IO and time is an argument.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zlink_trio.core.errors import InvalidConfiguration, InvalidOperation
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.idle import DEFAULT_SWEEP_BATCH, IdleRing, IdleSweep, is_idle

QUIET = {"pending": 0, "running": 0, "relocating": False, "last_work_finished_at": 0.0}


def test_idle_predicate_only_instance_spots_qualify():
    """09 §8: cleanup targets are limited to Instance Spot — Entry and User aren't cleaned up."""
    long_after = {**QUIET, "now": 10_000.0, "timeout": 60.0}
    assert is_idle(SpotKind.INSTANCE, **long_after) is True
    assert is_idle(SpotKind.ENTRY, **long_after) is False
    assert is_idle(SpotKind.USER, **long_after) is False
    assert is_idle(SpotKind.INVALID, **long_after) is False


@pytest.mark.parametrize(("pending", "running"), [(1, 0), (0, 1), (5, 1)])
def test_idle_predicate_work_in_progress_never_idle(pending, running):
    """09 §8: an Instance Spot with work in progress isn't cleaned up even after idle time."""
    state = {**QUIET, "pending": pending, "running": running}
    assert is_idle(SpotKind.INSTANCE, **state, now=1e9, timeout=1.0) is False


def test_relocating_spot_is_never_idle():
    state = {**QUIET, "relocating": True}
    assert is_idle(SpotKind.INSTANCE, **state, now=1e9, timeout=1.0) is False


def test_timeout_zero_disables_idle_cleanup():
    assert is_idle(SpotKind.INSTANCE, **QUIET, now=1e9, timeout=0) is False


def test_idle_once_the_timeout_has_elapsed_since_the_last_work_finished():
    state = {**QUIET, "last_work_finished_at": 100.0}
    assert is_idle(SpotKind.INSTANCE, **state, now=129.999, timeout=30) is False
    assert is_idle(SpotKind.INSTANCE, **state, now=130.0, timeout=30) is True


@pytest.mark.parametrize("timeout", [-1, math.nan, True, "5"])
def test_idle_timeout_must_be_a_non_negative_number(timeout):
    with pytest.raises(InvalidConfiguration, match="idle timeout"):
        is_idle(SpotKind.INSTANCE, **QUIET, now=1.0, timeout=timeout)


def test_idle_predicate_refuses_nonsense_counts_and_times():
    with pytest.raises(InvalidOperation, match="negative"):
        is_idle(SpotKind.INSTANCE, **{**QUIET, "pending": -1}, now=1.0, timeout=1)
    with pytest.raises(InvalidOperation, match="now"):
        is_idle(SpotKind.INSTANCE, **QUIET, now=math.nan, timeout=1)


# --------------------------------------------------------------------------- sweep


def test_sweep_examines_at_most_64_and_resumes_after_the_last_examined_key():
    keys = [f"s{i:03}" for i in range(150)]
    sweep = IdleSweep[str]()
    assert sweep.sweep(keys, now=0) == keys[:64]
    assert sweep.sweep(keys, now=1) == keys[64:128]
    assert sweep.sweep(keys, now=2) == keys[128:] + keys[:42]  # wraps around
    assert sweep.sweep(keys, now=3) == keys[42:106]


def test_sweep_of_a_small_catalog_returns_each_key_once():
    sweep = IdleSweep[int]()
    assert sweep.sweep([1, 2, 3], now=0) == [1, 2, 3]
    assert sweep.sweep([1, 2, 3], now=1) == [1, 2, 3]


def test_sweep_resumes_at_the_successor_when_the_last_key_disappeared():
    sweep = IdleSweep[int](batch_size=3)
    assert sweep.sweep(list(range(10)), now=0) == [0, 1, 2]
    assert sweep.sweep([0, 1, 3, 4, 5, 6], now=1) == [3, 4, 5]  # 2 was evicted


def test_sweep_finds_the_last_key_after_it_moved():
    sweep = IdleSweep[int](batch_size=2)
    assert sweep.sweep([10, 20, 30, 40], now=0) == [10, 20]
    assert sweep.sweep([5, 6, 10, 20, 30, 40], now=1) == [30, 40]


def test_empty_candidate_list_resets_the_position():
    sweep = IdleSweep[int](batch_size=2)
    sweep.sweep([1, 2, 3], now=0)
    assert sweep.sweep([], now=1) == []
    assert sweep.sweep([1, 2, 3], now=2) == [1, 2]


def test_next_deadline_and_statistics_follow_the_sweeps():
    sweep = IdleSweep[int](interval=5)
    assert sweep.next_deadline() is None
    sweep.sweep(list(range(100)), now=10)
    assert sweep.next_deadline() == 15
    stats = sweep.statistics()
    assert (stats.batch_size, stats.sweeps, stats.examined, stats.last_sweep_at) == (
        DEFAULT_SWEEP_BATCH,
        1,
        64,
        10,
    )


@pytest.mark.parametrize("batch_size", [0, -1, 1.5, True])
def test_batch_size_must_be_a_positive_int(batch_size):
    with pytest.raises(InvalidConfiguration, match="batch size"):
        IdleSweep(batch_size=batch_size)


@pytest.mark.parametrize("interval", [0, -1, math.inf, math.nan])
def test_interval_must_be_positive_and_finite(interval):
    with pytest.raises(InvalidConfiguration, match="interval"):
        IdleSweep(interval=interval)


@given(n=st.integers(0, 700), batch=st.integers(1, 100), warmup=st.integers(0, 20))
def test_every_candidate_is_examined_within_ceil_n_over_batch_sweeps(n, batch, warmup):
    keys = list(range(n))
    sweep = IdleSweep[int](batch_size=batch)
    for step in range(warmup):  # start from an arbitrary carried-over position
        sweep.sweep(keys, now=step)
    seen: set[int] = set()
    for step in range(math.ceil(n / batch)):
        chosen = sweep.sweep(keys, now=warmup + step)
        assert len(chosen) <= batch
        assert len(set(chosen)) == len(chosen)
        seen.update(chosen)
    assert seen == set(keys)


@given(st.lists(st.lists(st.integers(0, 300), unique=True, max_size=300), max_size=15))
def test_a_sweep_never_examines_more_than_64_or_a_key_twice(candidate_lists):
    sweep = IdleSweep[int]()
    for step, keys in enumerate(candidate_lists):
        chosen = sweep.sweep(keys, now=step)
        assert len(chosen) == min(64, len(keys))
        assert len(set(chosen)) == len(chosen)
        assert set(chosen) <= set(keys)


# -- IdleRing: the catalog's candidates, kept by the ring itself -------------------------


def test_ring_examines_at_most_a_batch_and_every_live_key_within_one_pass():
    ring = IdleRing[int](batch_size=4)
    for key in range(10):
        ring.add(key)
    alive = set(range(10)).__contains__
    seen = [ring.sweep(float(t), alive) for t in range(3)]
    assert [len(batch) for batch in seen] == [4, 4, 4]
    assert {k for batch in seen for k in batch} == set(range(10))
    assert seen[2] == [8, 9, 0, 1]  # resumes after the last key and wraps
    assert ring.statistics().examined == 12


def test_ring_skips_departed_keys_and_compacts_them_away():
    ring = IdleRing[int](batch_size=3)
    live = set(range(100))
    for key in sorted(live):
        ring.add(key)
    for key in range(0, 100, 2):  # half of them leave
        live.discard(key)
        ring.discard(live.__contains__)
    assert len(ring) <= 2 * len(live) + 1  # departed entries do not pile up
    batch = ring.sweep(0.0, live.__contains__)
    assert batch
    assert all(key in live for key in batch)
    for key in sorted(live):
        live.discard(key)
        ring.discard(live.__contains__)
    assert len(ring) <= 1
    assert ring.sweep(1.0, live.__contains__) == []


def test_ring_examines_a_re_added_key_once_per_sweep():
    ring = IdleRing[str](batch_size=8)
    ring.add("a")
    ring.add("b")
    ring.add("a")  # left and registered again before its old entry was compacted
    assert sorted(ring.sweep(0.0, {"a", "b"}.__contains__)) == ["a", "b"]


def test_ring_sweep_work_does_not_grow_with_the_number_of_keys():
    for size in (1_000, 100_000):
        ring = IdleRing[int](batch_size=64)
        for key in range(size):
            ring.add(key)
        calls = 0

        def alive(key: int) -> bool:
            nonlocal calls
            calls += 1
            return True

        ring.sweep(0.0, alive)
        assert calls == 64  # one look per examined key, whatever the size


def test_ring_reports_the_next_sweep_after_the_interval():
    ring = IdleRing[int](interval=5)
    assert ring.next_deadline() is None
    ring.sweep(10.0, lambda _: True)
    assert ring.next_deadline() == 15.0

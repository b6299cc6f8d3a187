"""``python -m zlink_trio.bench.growth``: the figures at each node size, on a tiny run.

No figure is asserted (they are measurements); only that every size reports every
figure, that the Spots it counts stay resident (the sweep runs but evicts nothing),
and that the command line prints the JSON line.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import trio

from zlink_trio.bench import growth


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(growth, "PROBE", 100)
    monkeypatch.setattr(growth, "SWEEP_TICKS", 20)


async def test_growth_reports_every_figure_at_every_size(small: None) -> None:
    with trio.fail_after(120):
        figures = await growth.measure_growth((300, 600))
    sizes = figures["growth"]
    assert isinstance(sizes, dict)
    assert list(sizes) == ["300", "600"]
    for size, at in sizes.items():
        assert at["cold_activations_per_s"] > 0
        assert 0 < at["warm_request_ms"]["p50"] <= at["warm_request_ms"]["p99"]
        assert at["idle_sweep_us_per_tick"] > 0
        assert at["full_gc_ms"] > 0
        assert at["longest_gc_pause_ms"] >= 0
        assert at["tracked_objects_per_spot"] > 0
        # the warm-up Spots, the filled ones and every probe so far, none evicted
        probes = 100 * (1 + list(sizes).index(size))
        assert at["resident_spots"] == 200 + int(size) + probes
    assert figures["growth_exit_s"] > 0


async def test_growth_exit_with_a_peer_drains_the_spots_to_it(small: None) -> None:
    with trio.fail_after(120):
        figures = await growth.measure_growth((300,), exit_peer=True)
    assert "growth_exit_s" not in figures
    assert figures["growth_exit_drain_s"] > 0
    # every resident Spot (warm-up, filled, probes) was re-created on the other node
    assert figures["growth_exit_moved"] == figures["growth"]["300"]["resident_spots"]


def test_growth_command_refuses_bad_sizes() -> None:
    done = subprocess.run([sys.executable, "-m", "zlink_trio.bench.growth", "--sizes", "ten"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--sizes takes comma-separated counts" in done.stderr


async def test_growth_in_a_fresh_process_reports_the_same_keys() -> None:
    with trio.fail_after(120):
        figures = await growth.measure_growth_process((150,))
    sizes = figures["growth"]
    assert isinstance(sizes, dict)
    assert set(sizes["150"]) >= {"cold_activations_per_s", "warm_request_ms",
                                 "idle_sweep_us_per_tick", "full_gc_ms", "rss_bytes_per_spot",
                                 "tracked_objects_per_spot", "longest_gc_pause_ms"}

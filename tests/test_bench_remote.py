"""``measure_remote(quick=True)``: a real two-process run returns every figure, all positive.

No timing is asserted (the machine is shared); only that the run completes, that the
keys are exactly the documented ones and that every figure is a positive number.
"""

from __future__ import annotations

import trio

from zlink_trio.bench_remote import measure_remote

KEYS = {
    "raw_ws_echo_per_s",
    "remote_requests_per_s",
    "remote_request_ratio",
    "raw_ws_echo_pipelined_per_s",
    "remote_pipelined_per_s",
    "remote_pipelined_ratio",
    "remote_cold_activation_ms",
}


async def test_measure_remote_quick_reports_every_figure() -> None:
    with trio.fail_after(120):
        figures = await measure_remote(quick=True)
    assert set(figures) == KEYS
    cold = figures.pop("remote_cold_activation_ms")
    assert isinstance(cold, dict)
    assert set(cold) == {"p50", "p99"}
    assert 0 < cold["p50"] <= cold["p99"]
    for name, value in figures.items():
        assert isinstance(value, int | float), name
        assert value > 0, name

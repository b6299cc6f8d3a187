"""``measure_remote(quick=True)``: a real two-process run returns every figure, all positive.

No timing is asserted (the machine is shared); only that the run completes, that the
keys are exactly the documented ones and that every figure is a positive number. The
raw websocket echo needs trio-websocket (the ``bench`` extra): without it the package
still imports, and the run reports the raw figures as ``null`` with the reason.
"""

from __future__ import annotations

import subprocess
import sys

import trio

from zlink_trio.bench.remote import RAW_WS_MISSING, measure_remote

KEYS = {
    "raw_ws_echo_per_s",
    "remote_requests_per_s",
    "remote_request_ratio",
    "raw_ws_echo_pipelined_per_s",
    "remote_pipelined_per_s",
    "remote_pipelined_ratio",
    "remote_cold_activation_ms",
    # The raw Trio TCP floor: no optional dependency, so measured in every run.
    "raw_tcp_echo_per_s",
    "raw_tcp_pipelined_per_s",
    "remote_sequential_tcp_ratio",
    "remote_pipelined_tcp_ratio",
}
RAW = {"raw_ws_echo_per_s", "raw_ws_echo_pipelined_per_s", "remote_request_ratio",
       "remote_pipelined_ratio"}


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


async def test_without_trio_websocket_the_raw_figures_are_null_with_the_reason(
        monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "trio_websocket", None)  # import refused, as if absent
    monkeypatch.delitem(sys.modules, "zlink_trio.bench.raw_ws", raising=False)
    with trio.fail_after(120):
        figures = await measure_remote(quick=True)
    assert set(figures) == KEYS | {"unavailable"}
    assert figures["unavailable"] == {"raw_ws_echo": RAW_WS_MISSING}
    assert "zlink-trio[bench]" in RAW_WS_MISSING
    for name in RAW:
        assert figures[name] is None, name
    for name in KEYS - RAW - {"remote_cold_activation_ms"}:
        assert figures[name] > 0, name  # type: ignore[operator]
    assert "zlink_trio.bench.raw_ws" not in sys.modules


def test_the_package_imports_without_trio_websocket() -> None:
    code = (
        "import sys\n"
        "sys.modules['trio_websocket'] = None\n"
        "import zlink_trio, zlink_trio.transport, zlink_trio.runtime, zlink_trio.cli\n"
        "import zlink_trio.bench.suite, zlink_trio.bench.peer\n"
        "from zlink_trio.bench.remote import raw_ws_unavailable\n"
        "assert raw_ws_unavailable() is not None\n"
        "assert 'zlink_trio.bench.raw_ws' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr

"""``python -m zlink_trio.bench.scale``: node processes sharing one store, on a tiny run.

No rate is asserted (a measurement); only that each process count reports a positive
aggregate figure on a shared backend, and that the command refuses a backend that
cannot be shared.
"""

from __future__ import annotations

import subprocess
import sys

import trio

from zlink_trio.bench.scale import measure_scale


async def test_scale_reports_an_aggregate_rate_per_process_count() -> None:
    with trio.fail_after(180):
        figures = await measure_scale(["sqlite"], processes=(1, 2), per_process=60)
    assert "unavailable" not in figures, figures
    rates = figures["scale_cold_activations_per_s"]
    assert isinstance(rates, dict)
    assert set(rates["sqlite"]) == {"1", "2"}
    assert all(rate > 0 for rate in rates["sqlite"].values())


def test_scale_command_refuses_the_memory_backend() -> None:
    done = subprocess.run([sys.executable, "-m", "zlink_trio.bench.scale", "--backends",
                           "memory"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--backends takes sqlite, redis" in done.stderr

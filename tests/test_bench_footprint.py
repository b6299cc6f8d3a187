"""``measure_footprint``: resident memory per idle Spot, measured in a fresh process.

No size is asserted (it is a measurement, not a promise here); only that the figure is a
positive number of bytes and that the Spots it counts are what the design says: Ready,
idle, each its own Trio task.
"""

from __future__ import annotations

import json
import subprocess
import sys

import trio

from zlink_trio.bench.footprint import measure_footprint


async def test_measure_footprint_reports_positive_bytes_per_idle_spot() -> None:
    with trio.fail_after(120):
        figures = await measure_footprint(1_000)
    assert set(figures) == {"idle_spot_rss_bytes"}
    value = figures["idle_spot_rss_bytes"]
    assert isinstance(value, int)
    assert value > 0


def test_the_footprint_process_counts_one_trio_task_per_idle_spot() -> None:
    done = subprocess.run([sys.executable, "-m", "zlink_trio.bench.footprint", "--count", "500"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["count"] == 500
    assert found["tasks_added"] >= 500
    assert found["idle_spot_rss_bytes"] > 0

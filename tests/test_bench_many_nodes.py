"""``python -m zlink_trio.bench.many_nodes``: nodes at rest, on a tiny run.

No figure is asserted as a speed; only what a node at rest must do whatever the Mesh's
size -- renew its lease, once per third of it -- and that every size reports every figure.
"""

from __future__ import annotations

import subprocess
import sys

import trio

from zlink_trio.bench import many_nodes


async def test_nodes_at_rest_report_every_figure_and_renew_their_lease() -> None:
    with trio.fail_after(120):
        figures = await many_nodes.measure_at_rest_process((2, 4), window=3.0)
    sizes = figures["many_nodes_at_rest"]
    assert isinstance(sizes, dict)
    assert list(sizes) == ["2", "4"]
    for at in sizes.values():
        # the default 10 s lease is renewed every third of it, by every node
        assert at["store_ops_by_method"]["location.renew"] == 0.333
        assert at["store_ops_per_node_per_s"] >= at["store_ops_by_method"]["location.renew"]
        assert at["cpu_ms_per_node_per_s"] > 0
        assert at["start_s"] >= 0


def test_many_nodes_command_refuses_bad_counts() -> None:
    done = subprocess.run([sys.executable, "-m", "zlink_trio.bench.many_nodes", "--nodes", "x"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--nodes takes comma-separated counts" in done.stderr

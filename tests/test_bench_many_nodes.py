"""``python -m zlink_trio.bench.many_nodes``: nodes at rest, and linked, on a tiny run.

No figure is asserted as a speed; only what must hold whatever the Mesh's size and the
machine's speed -- a node at rest renews its lease once per third of it; every cold
activation and warm call is answered, placement spreads the Spots over the nodes and a
warm call touches no store; every node sees a node join, then leave -- and that every size
reports every figure.
"""

from __future__ import annotations

import subprocess
import sys

import trio

from zlink_trio.bench import many_nodes

#: Cold activations, then warm calls, of the tiny run.
CALLS = 40


async def test_nodes_at_rest_report_every_figure_and_renew_their_lease() -> None:
    with trio.fail_after(120):
        figures = await many_nodes.measure_process((2, 4), window=3.0, calls=CALLS)
    sizes = figures["many_nodes_at_rest"]
    assert isinstance(sizes, dict)
    assert list(sizes) == ["2", "4"]
    for at in sizes.values():
        # the default 10 s lease is renewed every third of it, by every node
        assert at["store_ops_by_method"]["location.renew"] == 0.333
        assert at["store_ops_per_node_per_s"] >= at["store_ops_by_method"]["location.renew"]
        assert at["cpu_ms_per_node_per_s"] > 0
        assert at["start_s"] >= 0


async def test_linked_nodes_activate_call_and_see_a_node_join_and_leave() -> None:
    with trio.fail_after(120):
        figures = await many_nodes.measure_process((2, 4), window=1.0, calls=CALLS)
    sizes = figures["many_nodes_mesh"]
    assert isinstance(sizes, dict)
    assert list(sizes) == ["2", "4"]
    for size, mesh in sizes.items():
        n = int(size)
        assert set(mesh) == {"cold_activation", "warm_call", "join_leave"}

        cold = mesh["cold_activation"]
        assert cold["activations"] == cold["answered"] == CALLS
        assert cold["warmup_activations"] == many_nodes.WARMUP_PER_NODE * n
        # (a tiny warm-up may land on one node alone: rendezvous hashing of a few IDs)
        assert 1 <= cold["warmup_nodes_reached"] <= n
        assert 0 <= cold["links_open"] <= n - 1
        assert 1 < cold["nodes_placed_on"] <= n  # rendezvous placement spread them
        assert 0 <= cold["placed_on_caller"] < 1
        assert cold["cpu_us_per_activation"] > 0
        by_method = cold["store_calls_by_method"]
        assert by_method["combined.reserve_with_root"] == 1.0  # one Reserve each
        # a Spot placed on another node is placed on a fresh read of the claims
        assert by_method["location.descriptors"] > 0
        assert cold["store_calls_per_activation"] == round(sum(by_method.values()), 3)

        warm = mesh["warm_call"]
        assert warm["calls"] == warm["answered"] == CALLS
        assert 1 <= warm["nodes_called"] <= n - 1
        assert warm["cpu_us_per_call"] > 0
        # the Spots are active and their routes cached: no placement, no lookup
        assert warm["store_calls_per_call"] == 0
        assert warm["store_calls_by_method"] == {}

        seen = mesh["join_leave"]
        assert seen["join_seen_by"] == seen["leave_seen_by"] == n
        for key in ("join_seen_s", "leave_seen_s"):
            assert 0 <= seen[key] <= many_nodes.MEMBERSHIP_DEADLINE


def test_many_nodes_command_refuses_bad_counts() -> None:
    done = subprocess.run([sys.executable, "-m", "zlink_trio.bench.many_nodes", "--nodes", "x"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--nodes takes comma-separated counts" in done.stderr


def test_many_nodes_command_refuses_bad_calls() -> None:
    for calls in ("0", "many"):
        done = subprocess.run(
            [sys.executable, "-m", "zlink_trio.bench.many_nodes", "--calls", calls],
            capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2
        assert f"--calls takes a positive count, got {calls!r}" in done.stderr

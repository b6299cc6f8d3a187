"""The shipped tools run: ``zlink-trio`` dispatch and a small benchmark pass.

``zlink-trio demo`` and ``zlink-trio bench`` run ``python -m zlink_trio.samples.demo``
and ``python -m zlink_trio.bench`` as child processes; their exit status is the command's.

The benchmark is smoke-tested for its shape and its correctness figures only
(factory runs, states); no timing is asserted anywhere in the test suite.
"""

from __future__ import annotations

import json
import os

import pytest
import trio

from zlink_trio import cli
from zlink_trio.bench import suite


def test_cli_lists_commands_and_refuses_unknown_ones(capsys):
    assert cli.main(["--help"]) == 0
    assert "bench" in capsys.readouterr().out
    assert cli.main(["no-such-command"]) == 2
    assert "unknown command" in capsys.readouterr().err


def test_cli_demo_and_bench_run_their_programs(capfd):
    # Child processes write to the terminal itself: capture file descriptors, not sys.stdout.
    assert cli.main(["demo", "--help"]) == 0
    assert "usage: python -m zlink_trio.samples.demo" in capfd.readouterr().out
    assert cli.main(["bench", "--help"]) == 0
    assert "usage: python -m zlink_trio.bench" in capfd.readouterr().out
    assert cli.main(["demo", "--nodes", "0"]) == 2  # the program's own usage error
    assert "invalid choice" in capfd.readouterr().err


def test_bench_reports_every_figure_and_converges_on_one_factory_run():
    # The relocation figures have their own test (tests/test_bench_relocation.py).
    figures = trio.run(lambda: suite.run(requests=200, cold=10, idle=10, txn=20, idle_rss=1_000,
                                         remote=False, relocation=False, scale=False,
                                         growth=False, reminders=100))
    for name in ("local_request_ratio", "local_pipelined_ratio", "local_metrics_ratio",
                 "local_tracing_ratio",
                 "memory_per_idle_spot_bytes", "idle_spot_rss_bytes",
                 "raw_channel_round_trips_per_s", "raw_spawn_per_s",
                 "cold_activation_spawn_ratio"):
        assert figures[name] > 0, name
    # The ratio is the memory backend's activations over the raw spawns of the same run.
    assert figures["cold_activation_spawn_ratio"] == pytest.approx(
        figures["cold_activations_per_s"]["memory"] / figures["raw_spawn_per_s"], rel=0.01)
    convergence = figures["get_or_create_convergence"]
    assert convergence["factory_runs"] == 1
    assert convergence["created"] == 1
    # Every backend is measured (CI runs Redis; locally a missing Redis is reported).
    backends = ["memory", "sqlite", "redis"]
    if not os.environ.get("CI") and "redis" in figures.get("unavailable", {}):
        backends.remove("redis")
    for backend in backends:
        for name in ("cold_activations_per_s", "cold_activations_sequential_per_s"):
            assert figures[name][backend] > 0, (name, backend)
        calls = figures["store_calls_per_cold_activation"][backend]
        # One Reserve and one CommitReady, each alone or merged with its neighbour
        # (root + Reserve, first inbox record + CommitReady) on a combined store.
        def count(*names: str, calls: dict[str, int] = calls) -> int:
            return sum(calls.get(name, 0) for name in names)

        reserves = count("location.reserve", "combined.reserve_with_root")
        commits = count("location.commit_ready", "combined.commit_ready_with_first_record")
        assert reserves == commits == 1, calls
        # The durable inbox is included.
        assert count("relocation.inbox_append",
                     "combined.commit_ready_with_first_record") == 1, calls
        # Round trips are counted on the Redis backends: one per call on one Redis.
        trips = figures["store_round_trips_per_cold_activation"][backend]
        if backend == "redis":
            assert 4 <= trips["round_trips"] <= trips["commands"] < 4.5, trips
        else:
            assert trips is None, (backend, trips)
        for txn in ("reserve", "commit_ready"):
            assert set(figures["store_txn_ms"][backend][txn]) == {"p50", "p99"}
        assert set(figures["state_save_ms"][backend]) == {"p50", "p99"}
        # Reminders were delivered, and the lag is a time.
        assert figures["reminders_fired_per_s"][backend] > 0, backend
        lag = figures["reminder_lag_ms"][backend]
        assert set(lag) == {"p50", "p99"}
        assert 0 <= lag["p50"] <= lag["p99"], lag


def test_bench_json_is_one_compact_line_last_on_stdout(capsys):
    """``python -m zlink_trio.bench --json``: the whole object on the last line, nothing after."""
    assert suite.main(["--quick", "--json", "--no-remote", "--backends", "memory"]) == 0
    out = capsys.readouterr().out
    assert out.endswith("}\n")
    last = out.splitlines()[-1]
    figures = json.loads(last)
    assert ", " not in last  # compact separators
    assert figures["get_or_create_convergence"]["factory_runs"] == 1
    assert set(figures["cold_activations_per_s"]) == {"memory"}

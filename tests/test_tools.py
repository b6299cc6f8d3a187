"""The shipped tools run: ``zlink-trio`` dispatch and a small benchmark pass.

The benchmark is smoke-tested for its shape and its correctness figures only
(factory runs, states); no timing is asserted anywhere in the test suite.
"""

from __future__ import annotations

import trio

from zlink_trio import bench, cli


def test_cli_lists_commands_and_refuses_unknown_ones(capsys):
    assert cli.main(["--help"]) == 0
    assert "bench" in capsys.readouterr().out
    assert cli.main(["no-such-command"]) == 2
    assert "unknown command" in capsys.readouterr().err


def test_bench_reports_every_figure_and_converges_on_one_factory_run():
    figures = trio.run(lambda: bench.run(requests=200, cold=10, idle=10))
    for name in ("local_request_ratio", "local_pipelined_ratio", "cold_activations_per_s_memory",
                 "memory_per_idle_spot_bytes", "raw_channel_round_trips_per_s"):
        assert figures[name] > 0, name
    convergence = figures["get_or_create_convergence"]
    assert convergence["factory_runs"] == 1
    assert convergence["created"] == 1

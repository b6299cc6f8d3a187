"""The fault-matrix renderer on hand-made run records."""

from __future__ import annotations

from typing import Any

from report import render


def run(**changes: Any) -> dict[str, Any]:
    record = {"row": "link cut", "backend": "sqlite", "mode": "default", "promise": "it heals",
              "attempted": 100, "acknowledged": 90, "lost": 0, "duplicated_acked": 0,
              "duplicated_unacked": 0, "overlaps": 0, "late": 0, "untyped": 0,
              "unusable": [], "serve_again": 0.25, "broken_promises": [],
              "errors": {"Unavailable": 3}, "lease_losses": 0, "zombie_turns": 0,
              "zombie_acks": 0, "frozen_overlaps": 0, "max_overshoot": -1.5}
    record.update(changes)
    return record


def test_runs_of_one_row_add_up_and_the_slowest_recovery_is_shown():
    table = render([run(), run(attempted=50, acknowledged=40, serve_again=1.5)])
    row = next(line for line in table.splitlines() if line.startswith("| link cut"))
    assert row == ("| link cut | sqlite | default | 2 | 150 | 130 | 0 | 0 / 0 | 1.50 | 0 "
                   "| yes |")
    assert "- **link cut**: it heals." in table
    details = [line for line in table.splitlines() if line.startswith("| link cut")][1]
    assert details == ("| link cut | sqlite | default | Unavailable 6 | 0 | 0 / 0 / 0 | 0 "
                       "| -1.500 |")


def test_a_broken_promise_is_named_in_its_row():
    table = render([run(), run(lost=2, unusable=["chaos-1"], serve_again=None,
                                broken_promises=["a lease was lost"])])
    row = next(line for line in table.splitlines() if line.startswith("| link cut"))
    assert "| 2 |" in row  # lost
    assert "never, in 1 run(s) (1 Spots)" in row
    assert row.endswith("no: a lease was lost, lost, not usable again |")


def test_each_store_and_mode_is_its_own_row():
    table = render([run(), run(backend="redis"), run(mode="long")])
    assert sum(line.startswith("| link cut") for line in table.splitlines()) == 3 * 2  # 2 tables

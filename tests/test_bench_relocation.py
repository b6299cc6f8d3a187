"""The relocation figures of ``python -m zlink_trio.bench``: shape, and that the tally counts.

No timing is asserted (the machine is shared): only that ``--quick --json`` reports
every relocation key, per backend a number or ``null`` with the reason under
``unavailable``, and that the lost / duplicated counts see a record that lost or
doubled messages (the bench reports them; it never asserts them). The nodes run on
the real clock over loopback links; every run is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import json
import os
from array import array
from typing import Any

import pytest
import trio

from zlink_trio.bench import moving, suite
from zlink_trio.bench.relocation import measure_relocation

BACKENDS = ("memory", "sqlite", "redis")
PER_BACKEND = ("relocation_ms", "relocation_lost_messages", "relocation_duplicated_messages",
               "relocation_load")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def test_quick_json_reports_every_relocation_figure_or_why_not(capsys) -> None:
    assert suite.main(["--quick", "--json", "--no-remote", "--no-reminders"]) == 0
    figures = json.loads(capsys.readouterr().out.splitlines()[-1])
    reasons = figures.get("unavailable", {})
    measured = []
    for backend in BACKENDS:
        if figures["relocation_ms"][backend] is None:
            assert backend in reasons or f"relocation_{backend}" in reasons, backend
            assert all(figures[key][backend] is None for key in PER_BACKEND)
            continue
        measured.append(backend)
        for mode in ("idle", "loaded"):
            ms = figures["relocation_ms"][backend][mode]
            assert set(ms) == {"p50", "p99"}, (backend, mode)
            assert 0 < ms["p50"] <= ms["p99"], (backend, mode)
        for key in ("relocation_lost_messages", "relocation_duplicated_messages"):
            assert isinstance(figures[key][backend], int), (key, backend)
            assert figures[key][backend] >= 0, (key, backend)
        load = figures["relocation_load"][backend]
        assert set(load) == {"sent", "accepted", "failed", "per_s"}
        assert load["accepted"] + load["failed"] == load["sent"] > 0
        assert _number(load["per_s"])
    # CI runs Redis; locally a missing Redis is reported, never an error.
    expected = set(BACKENDS) if os.environ.get("CI") else {"memory", "sqlite"}
    assert expected <= set(measured)
    if figures["follow_relay_per_s"] is None:
        assert figures["follow_relay_ratio"] is None
        assert "follow_relay" in reasons
    else:
        assert figures["follow_relay_per_s"] > 0
        assert figures["follow_relay_ratio"] > 0


def test_tally_counts_accepted_messages_missing_from_the_record_and_repeats() -> None:
    moving.HANDLED.clear()
    for n in (1, 2, 3, 3):
        moving.HANDLED["s", n] += 1
    moving.HANDLED["t", 9] += 1
    found = moving.tally({"s": [1, 2, 3, 4, 4], "t": [9]},
                         [("s", 1), ("s", 2), ("s", 5), ("t", 8), ("t", 9)])
    assert found == moving.Tally(lost=2, duplicated=2)  # lost 5, 8; doubled 3 (runs), 4
    moving.HANDLED.clear()


@pytest.mark.parametrize(("restore", "key"), [
    (lambda data: array("q", data)[:-3], "relocation_lost_messages"),
    (lambda data: array("q", data) * 2, "relocation_duplicated_messages"),
])
async def test_a_record_that_lost_or_doubled_messages_on_a_move_is_counted(
        monkeypatch, restore: Any, key: str) -> None:
    def broken(self: moving.RecordAdapter, spot: Any, data: bytes) -> None:
        spot.seqs = restore(data)

    monkeypatch.setattr(moving.RecordAdapter, "restore", broken)
    with trio.fail_after(60):
        figures = await measure_relocation(["memory"], moves=2, redis_url="", quick=True)
    counts: Any = figures[key]
    assert counts["memory"] > 0


async def test_a_move_that_does_not_commit_is_reported_null_with_the_reason(monkeypatch) -> None:
    def refuse(self: moving.RecordAdapter, spot: Any) -> bytes:
        raise RuntimeError("capture refused")

    monkeypatch.setattr(moving.RecordAdapter, "capture", refuse)
    with trio.fail_after(60):
        figures = await measure_relocation(["memory"], moves=2, redis_url="", quick=True)
    for key in PER_BACKEND:
        assert figures[key] == {"memory": None}, key
    reasons: Any = figures["unavailable"]
    assert "ABORTED" in reasons["relocation_memory"]
    assert "capture refused" in reasons["relocation_memory"]
    assert figures["follow_relay_per_s"] is None  # its move is refused the same way
    assert "capture refused" in reasons["follow_relay"]

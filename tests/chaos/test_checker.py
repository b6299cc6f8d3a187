"""The chaos checker on hand-made logs: it finds each kind of broken promise.

Every test builds a small clean history (one caller, two Spots, one owner each), checks
that it passes, then breaks one thing -- a lost ack, a duplicate, overlapping owners,
a late call, an untyped error, a Spot never served again -- and checks that exactly
that is reported. No clock; only the log reader touches a file.
"""

from __future__ import annotations

from typing import Any

import pytest
from checker import check, count_regressions, overlapping_turns, read_lines, serve_again_after

SPOTS = ["a", "b"]
DEADLINE = 2.0
SLACK = 0.5


def call(rid: str, spot: str, start: float, end: float, outcome: str = "ok") -> dict[str, Any]:
    return {"caller": "c0", "rid": rid, "spot": spot, "start": start, "end": end,
            "deadline": DEADLINE, "outcome": outcome, "owner": "s0"}


def turn(rid: str, spot: str, start: float, end: float, node_rid: str = "rid-1",
         generation: int = 1) -> dict[str, Any]:
    return {"spot": spot, "rid": rid, "node": "s0", "node_rid": node_rid,
            "generation": generation, "start": start, "end": end}


def history() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Four calls; the fault (0.2 -> heal at 10) made call 2 fail; all others ran once."""
    calls = [call("c0-0-0", "a", 0.0, 0.1), call("c0-0-1", "b", 0.2, 2.2, "DeadlineExceeded"),
             call("c0-0-2", "a", 10.0, 10.1), call("c0-0-3", "b", 10.2, 10.4)]
    handlers = [turn("c0-0-0", "a", 0.01, 0.02), turn("c0-0-2", "a", 10.01, 10.02),
                turn("c0-0-3", "b", 10.21, 10.3, node_rid="rid-2")]
    return calls, handlers


def end_healthy(calls: list[dict[str, Any]], handlers: list[dict[str, Any]]) -> None:
    """One last ok call per Spot, as a run that ends under load after the heal has."""
    for spot in SPOTS:
        calls.append(call(f"end-{spot}", spot, 30.0, 30.1))
        handlers.append(turn(f"end-{spot}", spot, 30.01, 30.02, node_rid=f"rid-{spot}"))


def verdict(calls: list[dict[str, Any]], handlers: list[dict[str, Any]],
            heals: tuple[float, ...] = (10.0,)) -> Any:
    return check(calls, handlers, spots=SPOTS, heals=heals, slack=SLACK)


def test_a_clean_history_passes_with_its_counts():
    result = verdict(*history())
    assert result.ok, result.problems()
    assert (result.attempted, result.acknowledged) == (4, 3)
    assert result.errors == {"DeadlineExceeded": 1}
    assert result.serve_again == pytest.approx(0.4)  # "b" answered at 10.4
    assert result.duplicated == 0
    assert result.unlogged_handlers == 0


def test_an_acknowledged_request_without_a_handler_line_is_lost():
    calls, handlers = history()
    handlers = [h for h in handlers if h["rid"] != "c0-0-2"]
    result = verdict(calls, handlers)
    assert result.lost == ["c0-0-2"]
    assert not result.ok


def test_an_unacknowledged_request_without_a_handler_line_is_not_lost():
    calls, handlers = history()  # c0-0-1 failed and never ran: allowed
    assert verdict(calls, handlers).lost == []


def test_two_handler_lines_for_one_acknowledged_request_are_a_duplicate():
    calls, handlers = history()
    handlers.append(turn("c0-0-0", "a", 5.0, 5.01, node_rid="rid-9"))
    result = verdict(calls, handlers)
    assert result.duplicated_acked == ["c0-0-0"]
    assert result.duplicated_unacked == []
    assert not result.ok


def test_an_unacknowledged_request_that_ran_twice_is_reported_as_a_duplicate():
    calls, handlers = history()
    handlers += [turn("c0-0-1", "b", 0.3, 0.31), turn("c0-0-1", "b", 3.0, 3.01, "rid-2")]
    result = verdict(calls, handlers)
    assert result.duplicated_unacked == ["c0-0-1"]
    assert result.duplicated_acked == []
    assert not result.ok


def test_turns_of_two_owners_of_one_spot_at_overlapping_times_are_found():
    calls, handlers = history()
    calls.append(call("c0-0-4", "a", 10.0, 10.2, "Unavailable"))
    zombie = turn("c0-0-4", "a", 9.9, 10.015, node_rid="rid-old")  # ends after 10.01
    handlers.append(zombie)
    result = verdict(calls, handlers)
    assert len(result.overlaps) == 1
    first, second = result.overlaps[0]
    assert {first["node_rid"], second["node_rid"]} == {"rid-old", "rid-1"}
    assert not result.ok


def test_a_turn_frozen_past_its_lease_beside_the_new_owner_is_a_frozen_overlap():
    calls, handlers = history()
    calls.append(call("c0-0-4", "a", 9.0, 10.2, "Unavailable"))
    zombie = dict(turn("c0-0-4", "a", 9.0, 10.015, node_rid="rid-old"), lease_expires_at=9.5)
    handlers.append(zombie)  # began while valid, ended after the new owner's turn began
    result = verdict(calls, handlers)
    assert result.overlaps == []
    assert [(a["rid"], b["rid"]) for a, b in result.frozen_overlaps] == [("c0-0-4", "c0-0-2")]
    assert result.ok, result.problems()  # not acknowledged: reported, not failed
    calls[-1]["outcome"] = "ok"
    calls[-1]["owner"] = "s0"
    assert [z["rid"] for z in verdict(calls, handlers).zombie_acks] == ["c0-0-4"]


def test_a_new_owner_that_began_before_the_old_lease_ended_is_an_overlap():
    turns = [dict(turn("1", "a", 0.0, 5.0, "old"), lease_expires_at=4.0),
             dict(turn("2", "a", 3.0, 3.1, "new"), lease_expires_at=9.0)]
    result = check([], turns, spots=[], heals=[], slack=SLACK)
    assert len(result.overlaps) == 1  # two valid owners at 3.0
    assert result.frozen_overlaps == []


def test_turns_that_only_touch_or_are_on_other_spots_do_not_overlap():
    turns = [turn("1", "a", 0.0, 1.0), turn("2", "a", 1.0, 2.0, "rid-2"),
             turn("3", "b", 0.5, 1.5, "rid-3")]
    assert overlapping_turns(turns) == []


def test_a_long_turn_overlapping_a_later_one_is_found_past_a_short_one():
    turns = [turn("1", "a", 0.0, 5.0, "old"), turn("2", "a", 1.0, 1.1, "old"),
             turn("3", "a", 2.0, 2.1, "new")]
    pairs = overlapping_turns(turns)
    assert [(p[0]["rid"], p[1]["rid"]) for p in pairs] == [("1", "2"), ("1", "3")]


def test_a_call_that_ended_after_its_deadline_and_slack_is_late():
    calls, handlers = history()
    calls.append(call("c0-0-5", "b", 11.0, 11.0 + DEADLINE + SLACK + 0.01, "DeadlineExceeded"))
    result = verdict(calls, handlers)
    assert [c["rid"] for c in result.late] == ["c0-0-5"]
    assert not result.ok


def test_a_call_within_its_slack_is_not_late():
    calls, handlers = history()
    calls.append(call("c0-0-5", "b", 11.0, 11.0 + DEADLINE + SLACK - 0.01, "DeadlineExceeded"))
    end_healthy(calls, handlers)
    assert verdict(calls, handlers).ok


def test_an_error_that_is_not_a_zlink_error_is_untyped():
    calls, handlers = history()
    calls.append(call("c0-0-6", "a", 11.0, 11.1, "untyped:KeyError:KeyError('x')"))
    result = verdict(calls, handlers)
    assert [c["rid"] for c in result.untyped] == ["c0-0-6"]
    assert not result.ok


def test_a_spot_without_an_ok_reply_after_the_heal_is_unusable():
    calls, handlers = history()
    calls = [c for c in calls if c["rid"] != "c0-0-3"]
    calls.append(call("c0-0-3", "b", 10.2, 10.4, "Unavailable"))
    handlers = [h for h in handlers if h["rid"] != "c0-0-3"]
    result = verdict(calls, handlers)
    assert result.unusable == ["b"]
    assert result.serve_again is None
    assert not result.ok


def test_a_spot_that_served_after_the_heal_and_then_failed_to_the_end_is_unusable():
    calls, handlers = history()
    calls.append(call("c0-0-11", "b", 12.0, 12.1, "Unavailable"))
    result = verdict(calls, handlers)
    assert result.unusable == ["b"]
    assert not result.ok


def test_a_call_that_failed_before_the_spot_served_again_is_not_its_last_word():
    """Found by the Redis FLUSHALL row: a caller's call failed while the nodes rejoined,
    another caller's call started just after it was the Spot's first ok one, and the run
    ended before either called it again: the Spot served after the heal, it is usable."""
    calls, handlers = history()
    calls.append(call("c1-0-9", "b", 10.15, 10.16, "Unavailable"))  # before c0-0-3's ok
    assert verdict(calls, handlers).unusable == []
    calls.append(call("c1-0-10", "b", 10.3, 10.31, "Unavailable"))  # after it: broke
    assert verdict(calls, handlers).unusable == ["b"]


def test_an_ok_reply_to_a_call_started_before_the_heal_does_not_count_as_served():
    calls = [call("1", "a", 9.0, 10.5), call("2", "a", 10.6, 10.7)]
    assert serve_again_after(calls, ["a"], 10.0) == pytest.approx(0.7)
    assert serve_again_after(calls[:1], ["a"], 10.0) is None


def test_serve_again_is_the_slowest_heal_of_several():
    calls, handlers = history()
    calls += [call("c0-0-7", "a", 20.0, 20.1), call("c0-0-8", "b", 20.1, 21.5)]
    handlers += [turn("c0-0-7", "a", 20.01, 20.02), turn("c0-0-8", "b", 20.2, 20.3, "rid-2")]
    result = verdict(calls, handlers, heals=(10.0, 20.0))
    assert result.serve_again == pytest.approx(1.5)
    assert result.ok, result.problems()


def test_an_acked_turn_begun_past_its_own_lease_is_a_zombie_ack():
    calls, handlers = history()
    calls += [call("c0-0-9", "a", 11.0, 13.0), call("c0-0-10", "b", 11.0, 12.0, "Unavailable")]
    handlers += [dict(turn("c0-0-9", "a", 12.5, 12.9), lease_expires_at=12.0),
                 dict(turn("c0-0-10", "b", 11.0, 11.9), lease_expires_at=11.5)]
    end_healthy(calls, handlers)
    result = verdict(calls, handlers)
    assert [line["rid"] for line in result.zombie_turns] == ["c0-0-9", "c0-0-10"]
    assert [line["rid"] for line in result.zombie_acks] == ["c0-0-9"]
    assert not result.ok


def test_an_acked_turn_ended_past_its_lease_beside_another_owner_is_a_zombie_ack():
    calls, handlers = history()
    calls.append(call("c0-0-9", "a", 9.0, 10.5))  # frozen from 9.1; new owner at 10.01
    handlers.append(dict(turn("c0-0-9", "a", 9.0, 10.4, "rid-old"), lease_expires_at=9.5))
    end_healthy(calls, handlers)
    result = verdict(calls, handlers)
    assert [line["rid"] for line in result.zombie_acks] == ["c0-0-9"]
    assert result.late_acks == []
    assert not result.ok


def test_an_acked_turn_that_crossed_its_lease_deadline_alone_is_a_late_ack():
    calls, handlers = history()
    calls.append(call("c0-0-9", "a", 11.0, 11.2))
    handlers.append(dict(turn("c0-0-9", "a", 11.0, 11.1), lease_expires_at=11.05))
    end_healthy(calls, handlers)
    result = verdict(calls, handlers)
    assert result.zombie_acks == []
    assert [line["rid"] for line in result.late_acks] == ["c0-0-9"]
    assert result.ok, result.problems()  # reported, not failed


def test_a_turn_of_an_owner_that_renewed_meanwhile_is_no_zombie_turn():
    calls, handlers = history()
    calls.append(call("c0-0-9", "a", 11.0, 13.0))
    handlers.append(dict(turn("c0-0-9", "a", 11.0, 12.9), lease_expires_at=19.5))
    end_healthy(calls, handlers)
    result = verdict(calls, handlers)
    assert result.zombie_turns == []
    assert result.ok, result.problems()


def test_the_reader_skips_a_line_still_being_written(tmp_path):
    log = tmp_path / "calls-c0-1.jsonl"
    log.write_text('{"rid": "a"}\n{"rid": "b"}\n{"rid": "c", "spo')
    assert read_lines([log]) == [{"rid": "a"}, {"rid": "b"}]


def test_a_durable_count_that_goes_back_is_a_regression_a_jump_is_not():
    """Durable state: a count that does not grow from one acknowledged save to the next is
    a lost save or a stale one applied; a jump by two (a save whose line a kill cut off)
    is not."""
    lines = [dict(turn(f"r{i}", "a", float(i), i + 0.1), value=value)
             for i, value in enumerate([1, 2, 4, 5])]
    assert count_regressions(lines) == []
    lines.append(dict(turn("r9", "a", 9.0, 9.1, node_rid="rid-2"), value=5))
    lines.append(dict(turn("r8", "b", 8.0, 8.1), value=3))
    lines.append(dict(turn("r10", "b", 10.0, 10.1), value=1))
    assert count_regressions(lines) == [("a", 5, 5), ("b", 3, 1)]

"""The runner's evidence counter and bounded log waits (§10.1), without processes or real time.

Waits run on pytest-trio's ``autojump_clock`` or with a recording ``sleep``,
so nothing here sleeps for real.
"""

from __future__ import annotations

import pytest
import trio

from zlink_trio.samples.shoppingmall.runner import evidence as ev
from zlink_trio.samples.shoppingmall.runner.ask_desk import Facts, Relocation
from zlink_trio.samples.shoppingmall.runner.log_wait import (
    POLL_ATTEMPTS,
    POLL_INTERVAL,
    LogWaitTimeout,
    wait_for_count,
)
from zlink_trio.samples.shoppingmall.runner.verify import verify_rows

STARTED_A = "shoppingmall-order started order=o-1 spot=o-1"


def test_the_rows_are_the_spec_strings_verbatim():
    assert ev.READY_HTTP == "shoppingmall-ready kind=http node=<NodeId>"
    assert ev.READY_ROUTE == ("shoppingmall-ready kind=object-route node=<NodeId> "
                              "target=<WorkflowNodeId>")
    assert ev.ORDER_STARTED == "shoppingmall-order started order=<OrderId> spot=<SpotId>"
    assert ev.API_EVIDENCE == "shoppingmall-evidence order=<OrderId> events=<N>"
    assert ev.ORDER_REPLAYED == "shoppingmall-order replayed order=<OrderId> generation=<N>"
    assert ev.EFFECT_REPEATED == "shoppingmall-order external-effect-repeated order=<OrderId>"


def test_an_open_placeholder_matches_one_token():
    log = f"{STARTED_A}\nshoppingmall-order started order=o-2 spot=o-2\n"
    assert ev.count_lines(log, ev.ORDER_STARTED) == 2


def test_a_filled_placeholder_matches_only_its_value():
    log = "shoppingmall-ready kind=http node=api-a\nshoppingmall-ready kind=http node=api-b\n"
    assert ev.count_lines(log, ev.READY_HTTP, NodeId="api-a") == 1


def test_only_whole_lines_count():
    log = f"prefix {STARTED_A}\n{STARTED_A} trailing\n{STARTED_A}\r\n"
    assert ev.count_lines(log, ev.ORDER_STARTED) == 1


def test_a_value_is_matched_literally_not_as_a_pattern():
    log = "shoppingmall-order replayed order=oX1 generation=7\n"
    assert ev.count_lines(log, ev.ORDER_REPLAYED, OrderId="o.1", N="7") == 0


def test_a_placeholder_the_row_lacks_is_refused():
    with pytest.raises(ValueError, match="no placeholder"):
        ev.line_pattern(ev.READY_HTTP, OrderId="o-1")


def test_the_empty_log_counts_zero():
    assert ev.count_lines("", ev.EFFECT_REPEATED) == 0


class Recorder:
    """A ``sleep`` that records its delays and a log that grows on a schedule."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.reads = 0
        self.sleeps: list[float] = []

    def read(self) -> str:
        text = self.texts[min(self.reads, len(self.texts) - 1)]
        self.reads += 1
        return text

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


async def test_a_wait_returns_at_the_read_that_shows_the_line():
    log = Recorder(["", "", STARTED_A])
    seen = await wait_for_count(log.read, ev.ORDER_STARTED, sleep=log.sleep)
    assert (seen, log.reads, log.sleeps) == (1, 3, [POLL_INTERVAL, POLL_INTERVAL])


async def test_a_wait_polls_every_100_ms_at_most_300_times():
    log = Recorder([""])
    with pytest.raises(LogWaitTimeout) as caught:
        await wait_for_count(log.read, ev.ORDER_STARTED, sleep=log.sleep)
    assert (POLL_INTERVAL, POLL_ATTEMPTS) == (0.1, 300)
    assert log.reads == 300
    assert log.sleeps == [0.1] * 299
    assert caught.value.seen == 0


async def test_a_wait_reads_at_least_once_even_when_the_line_is_there():
    log = Recorder([STARTED_A])
    assert await wait_for_count(log.read, ev.ORDER_STARTED, sleep=log.sleep) == 1
    assert log.reads == 1


async def test_a_wait_for_two_lines_is_not_satisfied_by_one():
    log = Recorder([STARTED_A, STARTED_A, f"{STARTED_A}\n{STARTED_A}"])
    assert await wait_for_count(log.read, ev.ORDER_STARTED, at_least=2, sleep=log.sleep) == 2
    assert log.reads == 3


async def test_a_wait_ends_early_when_the_writer_exited():
    log = Recorder([""])
    with pytest.raises(LogWaitTimeout, match="has exited"):
        await wait_for_count(log.read, ev.READY_HTTP, sleep=log.sleep, alive=lambda: False,
                             values={"NodeId": "api-a"})
    assert log.reads == 1


async def test_a_wait_refuses_a_budget_of_no_reads():
    with pytest.raises(ValueError, match="at least once"):
        await wait_for_count(lambda: "", ev.READY_HTTP, attempts=0)


def _logs(**texts: str) -> dict[str, object]:
    base = {"api-a": "shoppingmall-evidence order=o-1 events=4", "api-b": "",
            "workflow-a": STARTED_A, "workflow-b": "shoppingmall-order started order=o-2 spot=o-2"}
    base.update(texts)
    return {node: (lambda t=text: t) for node, text in base.items()}


FACTS = Facts(relocation=Relocation(order_id="o-9", generation="14", source="workflow-a",
                                    target="workflow-b"))
REPLAYED = "shoppingmall-order replayed order=o-9 generation=14"


async def test_every_row_passes_on_good_logs(autojump_clock):
    lines: list[str] = []
    reads = _logs(**{"workflow-b": f"shoppingmall-order started order=o-2 spot=o-2\n{REPLAYED}"})
    assert await verify_rows(reads, FACTS, lines.append) == []
    assert len(lines) == 5


async def test_the_started_row_is_counted_in_each_workflow_log_separately(autojump_clock):
    both_in_a = f"{STARTED_A}\nshoppingmall-order started order=o-2 spot=o-2"
    reads = _logs(**{"workflow-a": both_in_a, "workflow-b": REPLAYED})
    start = trio.current_time()
    problems = await verify_rows(reads, FACTS, lambda line: None)
    assert [p for p in problems if "order-started" in p]
    assert trio.current_time() - start == pytest.approx(29.9)  # one full bounded wait


async def test_a_replay_of_another_generation_does_not_count(autojump_clock):
    reads = _logs(**{"workflow-b": "shoppingmall-order replayed order=o-9 generation=15\n"
                                   "shoppingmall-order started order=o-2 spot=o-2"})
    problems = await verify_rows(reads, FACTS, lambda line: None)
    assert problems == ["§10.1 row 'order-replayed': counts {'workflow-a': 0, 'workflow-b': 0}"]


async def test_two_replays_fail_the_exactly_once_row(autojump_clock):
    reads = _logs(**{"workflow-a": f"{STARTED_A}\n{REPLAYED}",
                     "workflow-b": f"shoppingmall-order started order=o-2 spot=o-2\n{REPLAYED}"})
    problems = await verify_rows(reads, FACTS, lambda line: None)
    assert [p for p in problems if "order-replayed" in p]


async def test_a_repeated_effect_fails_its_zero_row(autojump_clock):
    reads = _logs(**{"workflow-b": f"shoppingmall-order started order=o-2 spot=o-2\n{REPLAYED}\n"
                                   "shoppingmall-order external-effect-repeated order=o-3"})
    problems = await verify_rows(reads, FACTS, lambda line: None)
    assert problems == ["§10.1 row 'external-effect-repeated': counts "
                        "{'workflow-a': 0, 'workflow-b': 1}"]


async def test_without_a_relocation_the_replayed_row_cannot_pass(autojump_clock):
    problems = await verify_rows(_logs(), Facts(), lambda line: None)
    assert "no planned relocation ran" in " ".join(problems)


async def test_the_api_row_needs_one_line_in_either_api_log(autojump_clock):
    reads = _logs(**{"api-a": "", "api-b": "", "workflow-b":
                     f"shoppingmall-order started order=o-2 spot=o-2\n{REPLAYED}"})
    problems = await verify_rows(reads, FACTS, lambda line: None)
    assert problems == ["§10.1 row 'api-evidence': counts {'api-a': 0, 'api-b': 0}"]

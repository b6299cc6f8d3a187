"""The runner's evidence counter and bounded log waits, without processes or real time.

Waits run on pytest-trio's ``autojump_clock`` or with a recording ``sleep``,
so nothing here sleeps for real. Log waits poll every 100 ms, at most 300
times, and never settle on a single read (docs/shoppingmall.md, "Evidence
rows") -- for every row, the exact ones (0 and 1) included: those wait for each Workflow log's
mark line (``log_wait.MARK``) and count at that read.
"""

from __future__ import annotations

import attrs
import httpx
import pytest
import trio

from zlink_trio.samples.shoppingmall.runner import evidence as ev
from zlink_trio.samples.shoppingmall.runner.hooks_app import HookContext, build_hooks_app
from zlink_trio.samples.shoppingmall.runner.log_wait import (
    MARK,
    POLL_ATTEMPTS,
    POLL_INTERVAL,
    LogWaitTimeout,
    wait_for_count,
    wait_for_counts,
)
from zlink_trio.samples.shoppingmall.runner.prepare import Facts, Relocation
from zlink_trio.samples.shoppingmall.runner.verify import settle, verify_rows

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


MARKS = {"workflow-a": "t-a", "workflow-b": "t-b"}
MARK_A = "shoppingmall-runner mark node=workflow-a token=t-a"
MARK_B = "shoppingmall-runner mark node=workflow-b token=t-b"
STARTED_B = "shoppingmall-order started order=o-2 spot=o-2"


def _logs(**texts: str) -> dict[str, object]:
    base = {"api-a": "shoppingmall-evidence order=o-1 events=4", "api-b": "",
            "workflow-a": f"{STARTED_A}\n{MARK_A}", "workflow-b": f"{STARTED_B}\n{MARK_B}"}
    base.update(texts)
    return {node: (lambda t=text: t) for node, text in base.items()}


def _growing(*texts: str) -> Recorder:
    """A log that shows ``texts[i]`` at its i-th read (the last one from then on)."""
    return Recorder(list(texts))


FACTS = Facts(relocation=Relocation(order_id="o-9", generation="14", source="workflow-a",
                                    target="workflow-b"))
REPLAYED = "shoppingmall-order replayed order=o-9 generation=14"
REPEATED = "shoppingmall-order external-effect-repeated order=o-3"


async def test_every_row_passes_on_good_logs(autojump_clock):
    lines: list[str] = []
    reads = _logs(**{"workflow-b": f"{STARTED_B}\n{REPLAYED}\n{MARK_B}"})
    assert await verify_rows(reads, FACTS, lines.append, marks=MARKS) == []
    assert [line.split()[1] for line in lines] == [
        "row=order-started", "row=api-evidence", "row=order-replayed",
        "row=external-effect-repeated"]


async def test_the_started_row_is_counted_in_each_workflow_log_separately(autojump_clock):
    both_in_a = f"{STARTED_A}\n{STARTED_B}\n{MARK_A}"
    reads = _logs(**{"workflow-a": both_in_a, "workflow-b": f"{REPLAYED}\n{MARK_B}"})
    start = trio.current_time()
    problems = await verify_rows(reads, FACTS, lambda line: None, marks=MARKS)
    assert [p for p in problems if "order-started" in p]
    assert trio.current_time() - start == pytest.approx(29.9)  # one full bounded wait


async def test_a_replay_of_another_generation_does_not_count(autojump_clock):
    reads = _logs(**{"workflow-b": "shoppingmall-order replayed order=o-9 generation=15\n"
                                   f"{STARTED_B}\n{MARK_B}"})
    problems = await verify_rows(reads, FACTS, lambda line: None, marks=MARKS)
    assert problems == ["evidence row 'order-replayed': counts {'workflow-a': 0, 'workflow-b': 0}"]


async def test_two_replays_fail_the_exactly_once_row(autojump_clock):
    reads = _logs(**{"workflow-a": f"{STARTED_A}\n{REPLAYED}\n{MARK_A}",
                     "workflow-b": f"{STARTED_B}\n{REPLAYED}\n{MARK_B}"})
    problems = await verify_rows(reads, FACTS, lambda line: None, marks=MARKS)
    assert [p for p in problems if "order-replayed" in p]


async def test_a_repeated_effect_fails_its_zero_row(autojump_clock):
    reads = _logs(**{"workflow-b": f"{STARTED_B}\n{REPLAYED}\n{REPEATED}\n{MARK_B}"})
    problems = await verify_rows(reads, FACTS, lambda line: None, marks=MARKS)
    assert problems == ["evidence row 'external-effect-repeated': counts "
                        "{'workflow-a': 0, 'workflow-b': 1}"]


async def test_the_zero_row_waits_for_the_marks_and_sees_a_late_line(autojump_clock):
    """A repeated effect written after the first reads (before the mark) still fails the row:
    the row is not read once, it is counted at the read that shows every mark."""
    late_b = _growing(f"{STARTED_B}\n{REPLAYED}", f"{STARTED_B}\n{REPLAYED}",
                      f"{STARTED_B}\n{REPLAYED}\n{REPEATED}\n{MARK_B}")
    reads = {**_logs(), "workflow-b": late_b.read}
    problems = await verify_rows(reads, FACTS, lambda line: None, marks=MARKS)
    assert problems == ["evidence row 'external-effect-repeated': counts "
                        "{'workflow-a': 0, 'workflow-b': 1}"]


async def test_the_replayed_row_waits_for_a_late_line(autojump_clock):
    late_b = _growing(STARTED_B, STARTED_B, STARTED_B, f"{STARTED_B}\n{REPLAYED}\n{MARK_B}")
    reads = {**_logs(), "workflow-b": late_b.read}
    assert await verify_rows(reads, FACTS, lambda line: None, marks=MARKS) == []


async def test_an_exact_row_without_its_mark_fails_after_the_full_wait(autojump_clock):
    reads = _logs(**{"workflow-b": f"{STARTED_B}\n{REPLAYED}"})  # workflow-b never marked
    start = trio.current_time()
    problems = await verify_rows(reads, FACTS, lambda line: None, marks=MARKS)
    assert problems == [
        "evidence row 'order-replayed': counts {'workflow-a': 0, 'workflow-b': 1}",
        "evidence row 'external-effect-repeated': counts {'workflow-a': 0, 'workflow-b': 0}"]
    assert trio.current_time() - start == pytest.approx(2 * 29.9)


async def test_without_a_relocation_the_replayed_row_cannot_pass(autojump_clock):
    problems = await verify_rows(_logs(), Facts(), lambda line: None, marks=MARKS)
    assert "no planned relocation ran" in " ".join(problems)


async def test_the_api_row_needs_one_line_in_either_api_log(autojump_clock):
    reads = _logs(**{"api-a": "", "api-b": "", "workflow-b": f"{STARTED_B}\n{REPLAYED}\n{MARK_B}"})
    problems = await verify_rows(reads, FACTS, lambda line: None, marks=MARKS)
    assert problems == ["evidence row 'api-evidence': counts {'api-a': 0, 'api-b': 0}"]


async def test_the_api_row_polls_the_second_api_log_too(autojump_clock):
    """The line appears only in api-b, and only at its fourth read: the row still passes."""
    late = _growing("", "", "", "shoppingmall-evidence order=o-1 events=4")
    reads = _logs(**{"api-a": "", "workflow-b": f"{STARTED_B}\n{REPLAYED}\n{MARK_B}"})
    reads["api-b"] = late.read
    start = trio.current_time()
    assert await verify_rows(reads, FACTS, lambda line: None, marks=MARKS) == []
    assert late.reads == 4
    assert trio.current_time() - start == pytest.approx(3 * POLL_INTERVAL)  # both polled


async def test_a_multi_log_wait_reads_each_log_once_per_attempt():
    a, b = Recorder([""]), Recorder(["", "", STARTED_A])
    counts = await wait_for_counts({"a": a.read, "b": b.read}, ev.ORDER_STARTED,
                                   done=lambda c: sum(c.values()) >= 1, wanted="one",
                                   sleep=b.sleep)
    assert counts == {"a": 0, "b": 1}
    assert (a.reads, b.reads, b.sleeps) == (3, 3, [POLL_INTERVAL, POLL_INTERVAL])


async def test_a_multi_log_wait_gives_up_after_300_attempts_with_the_last_counts():
    a = Recorder([STARTED_A])
    with pytest.raises(LogWaitTimeout) as caught:
        await wait_for_counts({"a": a.read}, ev.ORDER_STARTED, done=lambda c: True,
                              wanted="the mark", marks={"a": "t"}, sleep=a.sleep)
    assert (a.reads, len(a.sleeps)) == (POLL_ATTEMPTS, POLL_ATTEMPTS - 1)
    assert caught.value.counts == {"a": 1}
    assert "no mark yet from ['a']" in str(caught.value)


async def test_a_mark_of_another_node_or_token_does_not_count():
    a = Recorder(["shoppingmall-runner mark node=workflow-b token=t-a\n"
                  "shoppingmall-runner mark node=workflow-a token=t-x"])
    with pytest.raises(LogWaitTimeout):
        await wait_for_counts({"workflow-a": a.read}, ev.EFFECT_REPEATED, done=lambda c: True,
                              wanted="the mark", marks={"workflow-a": "t-a"}, attempts=3,
                              sleep=a.sleep)


@attrs.define
class MarkingHooks:
    """Stand-in hooks: ``mark`` appends the mark line to that node's log."""

    logs: dict[str, list[str]]

    async def mark(self, node_id: str, token: str) -> None:
        self.logs[node_id].append(ev.render(MARK, NodeId=node_id, Token=token))


async def test_settle_marks_each_workflow_log_and_returns_the_logs_it_then_read(autojump_clock):
    logs = {"workflow-a": [STARTED_A], "workflow-b": [], "api-a": ["x"]}
    hooks = MarkingHooks(logs)
    reads = {node: (lambda n=node: "\n".join(logs[n])) for node in logs}
    said: list[str] = []
    marks, texts = await settle(hooks, reads, said.append)  # type: ignore[arg-type]
    assert set(marks) == {"workflow-a", "workflow-b"}
    assert texts["workflow-a"] == f"{STARTED_A}\n" + ev.render(
        MARK, NodeId="workflow-a", Token=marks["workflow-a"])
    assert texts["api-a"] == "x"
    assert said == ["shoppingmall-runner marked nodes=['workflow-a', 'workflow-b']"]


async def test_the_mark_hook_prints_one_mark_line_for_its_node():
    said: list[str] = []
    ctx = HookContext(node=None, node_id="workflow-a", fixtures=None, commerce_url="",  # type: ignore[arg-type]
                      events=None, read_models=None, inventory=None, payment=None,  # type: ignore[arg-type]
                      say=said.append)
    transport = httpx.ASGITransport(app=build_hooks_app(ctx))
    with trio.fail_after(10):
        async with httpx.AsyncClient(transport=transport, base_url="http://hooks") as http:
            ok = await http.post("/self-check/mark", json={"token": "abc"})
            bad = await http.post("/self-check/mark", json={"token": "a b"})
    assert ok.status_code == 200
    assert bad.status_code == 400
    assert said == ["shoppingmall-runner mark node=workflow-a token=abc"]

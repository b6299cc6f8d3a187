"""``lowlevel.outage.Outage``: one WARNING per episode, a bounded count, one INFO back."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio
import trio.testing

from zlink_trio.lowlevel.outage import REPORT_INTERVAL, Outage

if TYPE_CHECKING:
    import pytest

LOGGER = logging.getLogger("zlink_trio.test_outage")
#: Virtual seconds (the autojump clock) the Trio test may take.
LIMIT = 600


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOGGER.name]


def test_an_episode_is_one_warning_then_one_info_however_many_calls_fail(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER.name)
    clock = Clock()
    outage = Outage(LOGGER, "the link to node 'b'", clock=clock)
    outage.recovered()  # working: nothing to say
    assert lines(caplog) == []
    for n in range(30):
        outage.failed(f"refused #{n}")
        clock.now += 0.1  # 3 s in all: within one interval
    assert outage.down
    outage.recovered()
    assert not outage.down
    outage.recovered()  # a second success writes nothing more
    [(down_level, down), (back_level, back)] = lines(caplog)
    assert down_level == logging.WARNING
    assert down.startswith("the link to node 'b' is unavailable: refused #0; ")
    assert "at most one line every 30 s" in down
    assert back_level == logging.INFO
    assert back == "the link to node 'b' works again after 3.0 s (30 failed calls in all)"


def test_a_long_episode_writes_at_most_one_count_line_per_interval(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER.name)
    clock = Clock()
    outage = Outage(LOGGER, "the Redis store at redis://127.0.0.1:1/0", clock=clock,
                    interval=10.0)
    outage.failed("refused", 2)  # two calls failed together: the episode's first line
    for _ in range(100):  # a failure every second for 100 s
        clock.now += 1.0
        outage.failed("refused again")
    outage.recovered()
    found = lines(caplog)
    counts = [text for level, text in found[1:-1]]
    assert [level for level, _ in found] == [logging.WARNING] * 11 + [logging.INFO]
    assert len(counts) == 10  # 100 s of failures, one line per 10 s
    assert counts[0] == ("the Redis store at redis://127.0.0.1:1/0 is still unavailable "
                         "after 10 s: 10 more failed calls since the last line; the "
                         "latest: refused again")
    assert all(": 10 more failed calls since the last line" in text for text in counts)
    assert found[-1][1].endswith("works again after 100.0 s (102 failed calls in all)")


def test_a_failure_after_the_episode_ended_opens_a_new_one(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER.name)
    clock = Clock()
    outage = Outage(LOGGER, "the SQLite store '/x.db'", counted="failed writes",
                    clock=clock)
    outage.failed("locked")
    outage.recovered()
    clock.now += 1.0
    outage.failed("locked again")
    outage.recovered()
    levels = [level for level, _ in lines(caplog)]
    assert levels == [logging.WARNING, logging.INFO, logging.WARNING, logging.INFO]
    assert lines(caplog)[-1][1].endswith("(1 failed writes in all)")


async def test_by_default_it_reads_trios_clock(caplog, autojump_clock: trio.testing.MockClock):
    """In a Trio run the episode follows Trio's clock, so MockClock moves it too."""
    caplog.set_level(logging.DEBUG, logger=LOGGER.name)
    outage = Outage(LOGGER, "the link to node 'c'")
    with trio.fail_after(LIMIT):
        outage.failed("refused")
        await trio.sleep(REPORT_INTERVAL - 1)
        outage.failed("refused")  # not due yet
        await trio.sleep(1)
        outage.failed("refused")  # due: one count line for both
        await trio.sleep(5)
        outage.recovered()
    texts = [text for _, text in lines(caplog)]
    assert len(texts) == 3
    assert "still unavailable after 30 s: 2 more failed calls" in texts[1]
    assert texts[2] == "the link to node 'c' works again after 35.0 s (3 failed calls in all)"

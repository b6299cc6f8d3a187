"""Request deadlines kept by the node's deadline task (``runtime/calls/deadlines.py``).

A waiting request ends with DeadlineExceeded at its deadline, in deadline order
whatever the order the waits began; an answer that comes first wins; memory stays
bounded by the requests in flight; when the task stops, open waits fail with
Unavailable, and without the task a wait still bounds itself.
"""

from __future__ import annotations

import trio
import trio.testing

from zlink_trio.core.errors import DeadlineExceeded, Unavailable
from zlink_trio.runtime.calls.completion import Completion
from zlink_trio.runtime.calls.deadlines import COMPACT_AT, Deadlines, deadline_after


async def test_waits_end_at_their_deadlines_in_deadline_order(autojump_clock):
    deadlines = Deadlines()
    ended: list[tuple[str, float]] = []

    async def wait(name: str, after: float) -> None:
        try:
            await Completion().wait(deadline_after(after), name, deadlines)
        except DeadlineExceeded as error:
            ended.append((error.message.split(" did not")[0], trio.current_time()))

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(deadlines.run)
            await trio.testing.wait_all_tasks_blocked()
            start = trio.current_time()
            async with trio.open_nursery() as waits:
                for name, after in (("late", 5.0), ("early", 1.0), ("middle", 3.0)):
                    waits.start_soon(wait, name, after)
            nursery.cancel_scope.cancel()
    assert [(name, at - start) for name, at in ended] == [
        ("early", 1.0), ("middle", 3.0), ("late", 5.0)]


async def test_an_answer_before_the_deadline_wins_and_the_heap_stays_bounded(autojump_clock):
    deadlines = Deadlines()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(deadlines.run)
            await trio.testing.wait_all_tasks_blocked()
            for n in range(10 * COMPACT_AT):
                slot = Completion()
                slot.set_result(n)  # answered before its wait even began
                assert await slot.wait(deadline_after(30), "done", deadlines) == n
                answered = Completion()

                async def answer(slot: Completion = answered, n: int = n) -> None:
                    slot.set_result(n)

                nursery.start_soon(answer)
                assert await answered.wait(deadline_after(30), "wait", deadlines) == n
                assert len(deadlines._heap) <= 4 * COMPACT_AT
            nursery.cancel_scope.cancel()


async def test_stopping_the_deadline_task_fails_open_waits_as_unavailable(autojump_clock):
    deadlines = Deadlines()
    outcome: list[BaseException] = []

    async def wait() -> None:
        try:
            await Completion().wait(deadline_after(1_000), "the request", deadlines)
        except Unavailable as error:
            outcome.append(error)

    with trio.fail_after(60):
        async with trio.open_nursery() as waits, trio.open_nursery() as task:
            task.start_soon(deadlines.run)
            await trio.testing.wait_all_tasks_blocked()
            waits.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            task.cancel_scope.cancel()
    assert len(outcome) == 1
    assert "stopped" in str(outcome[0])
    assert not deadlines.running


async def test_without_the_deadline_task_a_wait_bounds_itself(autojump_clock):
    deadlines = Deadlines()  # never run
    with trio.fail_after(60):
        start = trio.current_time()
        try:
            await Completion().wait(deadline_after(2), "the request", deadlines)
        except DeadlineExceeded:
            assert trio.current_time() - start == 2
        else:
            raise AssertionError("the wait did not end at its deadline")

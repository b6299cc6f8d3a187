"""``lowlevel.parking.ParkingSlot``: one parked task, woken once, cancellable unless taken over."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from zlink_trio.lowlevel.parking import ParkingSlot

#: Virtual seconds (the autojump clock) any test here may take.
LIMIT = 10


async def test_wake_resumes_the_parked_task_once(autojump_clock: trio.abc.Clock) -> None:
    slot = ParkingSlot()
    resumed = []

    async def waiter() -> None:
        await slot.park()
        resumed.append(trio.current_time())

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert slot.occupied
            assert slot.wake()
            assert not slot.wake()  # a second wake finds nobody
    assert len(resumed) == 1
    assert not slot.occupied


async def test_a_cancelled_wait_leaves_the_slot_empty(autojump_clock: trio.abc.Clock) -> None:
    slot = ParkingSlot()
    with trio.fail_after(LIMIT):
        with trio.move_on_after(1):
            await slot.park()
        assert not slot.occupied
        assert not slot.wake()  # a late wake is harmless


async def test_a_second_waiter_is_refused() -> None:
    slot = ParkingSlot()

    async def waiter() -> None:
        await slot.park()

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(RuntimeError, match="one parked task"):
                await slot.park()
            slot.wake()


class _TakenOver(ParkingSlot):
    """A slot whose waker has taken the work over: a cancel waits for the wake."""

    def on_cancel(self) -> bool:
        return False


async def test_a_slot_taken_over_holds_its_task_through_a_cancel_until_woken(
        autojump_clock: trio.abc.Clock) -> None:
    slot = _TakenOver()
    events: list[str] = []

    async def waiter() -> None:
        with trio.CancelScope() as scope:
            scopes.append(scope)
            await slot.park()
            events.append("woken")
            await trio.lowlevel.checkpoint()  # the pending cancel arrives here
            events.append("not reached")

    scopes: list[trio.CancelScope] = []
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            scopes[0].cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert slot.occupied
            assert events == []
            slot.wake()
    assert events == ["woken"]

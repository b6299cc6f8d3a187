"""Delivering due reminders: the node's reminder task (docs/reminders.md).

Theory of operation
-------------------
Every node that serves as a host of its Mesh runs :func:`deliver_reminders` in its
lifecycle's nursery. The reminders of a Mesh are spread over ``REMINDER_PARTITIONS``
partitions by Spot ID, and the live hosts share the partitions out by rendezvous hashing
over the descriptors they read (``core.placement.reminder_partitions``, the descriptors
read again every ``placement_max_age``). A node scans only its share:

1. ``take_due_reminders`` (one store transaction, fenced by this lifecycle's own live
   claim) marks up to as many due reminders as it has delivery slots free as **taken** by
   this lifecycle for :func:`hold_of` seconds, and returns them;
2. each is delivered as a request of a :class:`Reminder` message to its Spot, with
   Instance intent for an Instance Spot (an idle-evicted or crashed Spot is activated for
   it, on whichever node placement chooses) and existing-only for a User Spot, bounded by
   ``default_timeout``;
3. a delivery that ended -- the handler returned, or raised (a handler error is the
   application's, logged; retrying it would repeat it forever) -- is ``reminder_done``:
   a one-shot reminder is deleted, a repeating one gets its next due. A delivery to a
   User Spot that is gone drops its reminders (``drop_reminders``). Any other failure
   (the Spot's node unreachable, a deadline, no host of the type right now) leaves the
   take to run out; the reminder is then due again, to whichever node scans its
   partition: **at least once**.

**Never twice at the same time.** A take holds the reminder for two call deadlines, so
no node takes it again while a delivery of it may still be on its way; a Spot runs one
turn at a time, and one incarnation serves it at a time; so two deliveries of one due
never run at once. Two nodes that read different live descriptors for a moment may
both scan a partition; the take, one transaction, gives each reminder to one of them.

**Lag.** With nothing waiting, a node looks every ``reminder_scan_interval`` (0.25 s);
while a take fills every free slot it looks again at once. A reminder is delivered
within that interval of its due plus its call, while its partition's scanner is alive.
When a node dies, its partitions pass to the others once its claim expires (one lease),
and a reminder it had taken is due again once the take runs out (:func:`hold_of`).
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.core.errors import HandlerError, NotFound, ZLinkError
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.placement import reminder_partitions
from zlink_trio.runtime.coordinators.placement import serving_candidates
from zlink_trio.runtime.declaration.reminder_message import Reminder
from zlink_trio.runtime.observe.logs import NODE as LOGGER

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.store.values import StoredReminder

__all__ = ("DELIVERY_SLOTS", "IN_REMINDER_TASK", "deliver_reminders", "hold_of")

#: Most reminder deliveries one node has in flight.
DELIVERY_SLOTS: Final = 256
#: True in the reminder task and the deliveries it starts: what counts a node's store
#: calls (``bench.stores.count_store_calls``) leaves out this background work.
IN_REMINDER_TASK: Final = contextvars.ContextVar("zlink_trio_in_reminder_task",
                                                 default=False)


def hold_of(rt: NodeRuntime) -> float:
    """How long a take holds its reminders: two call deadlines."""
    return 2 * rt.options.default_timeout


async def deliver_reminders(rt: NodeRuntime) -> None:
    """The node's reminder task (module docstring). Runs until cancelled; never raises
    a store or call error (each is logged, and the next scan tries again)."""
    IN_REMINDER_TASK.set(True)  # this task's own context, and its deliveries'
    slots = trio.Semaphore(DELIVERY_SLOTS)
    partitions: list[int] = []
    read_at = -float("inf")
    async with trio.open_nursery() as deliveries:
        while True:
            if trio.current_time() - read_at >= rt.options.placement_max_age:
                partitions = await _my_partitions(rt, partitions)
                read_at = trio.current_time()
            free = slots.value
            taken: list[StoredReminder] = []
            if partitions and free and rt.serving and not rt.lease_lost:
                taken = await _take(rt, partitions, free)
            for reminder in taken:
                await slots.acquire()  # free already: never waits
                deliveries.start_soon(_deliver, rt, reminder, slots)
            if not taken or len(taken) < free:
                await trio.sleep(rt.options.reminder_scan_interval)
            elif not slots.value:  # every slot busy: wait for one, at most an interval
                with trio.move_on_after(rt.options.reminder_scan_interval):
                    async with slots:
                        pass


async def _my_partitions(rt: NodeRuntime, last: list[int]) -> list[int]:
    with trio.move_on_after(rt.options.placement_max_age):
        try:
            live = await serving_candidates(rt)
        except ZLinkError as exc:
            LOGGER.debug("node %r: reading the descriptors for reminders failed (%s); it "
                         "keeps its partitions", rt.node_id, exc.message)
            return last
        me = next((c for c in live if c.node_rid == rt.node_rid), None)
        return reminder_partitions(live, rt.mesh, me)
    return last


async def _take(rt: NodeRuntime, partitions: list[int], limit: int) -> list[StoredReminder]:
    with trio.move_on_after(rt.options.default_timeout):
        try:
            return await rt.store.location.take_due_reminders(
                rt.mesh, partitions, rt.owner, now=rt.now(), hold=hold_of(rt),
                limit=min(limit, 1000))
        except ZLinkError as exc:
            LOGGER.debug("node %r: taking due reminders failed (%s); it looks again",
                         rt.node_id, exc.message)
    return []


async def _deliver(rt: NodeRuntime, reminder: StoredReminder, slots: trio.Semaphore) -> None:
    try:
        message = Reminder(name=reminder.name, due=reminder.due, period=reminder.period)
        call = rt.client.request(reminder.spot_id, message).timeout(
            rt.options.default_timeout)
        if reminder.kind is SpotKind.INSTANCE:
            call = call.instance_spot(reminder.stable_type).in_mesh(reminder.mesh)
        outcome = "delivered"
        try:
            await call
        except HandlerError as exc:
            outcome = "handler_error"
            LOGGER.warning("node %r: the reminder %r of %r raised in its handler (%s); it "
                           "counts as delivered", rt.node_id, reminder.name,
                           reminder.spot_id, exc.message)
        except ZLinkError as exc:
            gone = isinstance(exc, NotFound) and reminder.kind is SpotKind.USER
            _count(rt, reminder, "dropped" if gone else "retry")
            if gone:  # its User Spot no longer exists
                await _bounded(rt, lambda: rt.store.location.drop_reminders(reminder.spot_id))
                return
            LOGGER.info("node %r: the reminder %r of %r was not delivered (%s); it is due "
                        "again in %.1f s", rt.node_id, reminder.name, reminder.spot_id,
                        exc.message, hold_of(rt))
            return
        _count(rt, reminder, outcome)
        await _bounded(rt, lambda: rt.store.location.reminder_done(reminder, now=rt.now()))
    finally:
        slots.release()


def _count(rt: NodeRuntime, reminder: StoredReminder, outcome: str) -> None:
    if rt.metrics.enabled:
        rt.metrics.reminder(outcome, rt.now() - reminder.due)


async def _bounded(rt: NodeRuntime, step: Callable[[], Awaitable[object]]) -> None:
    with trio.move_on_after(rt.options.default_timeout):
        try:
            await step()
        except ZLinkError as exc:
            LOGGER.info("node %r: recording a reminder's delivery failed (%s); it is "
                        "delivered again once its take runs out", rt.node_id, exc.message)

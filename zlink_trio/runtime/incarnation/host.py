"""One Spot incarnation on this node: its instance, lanes, timers and task.

Theory of operation
-------------------
A :class:`Host` is created by a coordinator (cold activation or user create) once the
store granted a reservation.  It keeps the ``Incarnation`` chart's state id:

* ``activating`` -- the coordinator builds the instance (:meth:`Host.build`); not in
  the catalog yet, so nothing can reach it.  ``commit_ready`` -> ``barrier_closed`` ->
  ``open_barrier`` -> ``serving`` happen in the coordinator's continuation right after
  CommitReady, with the catalog registration and (cold activation) the restored first
  record: no message is admitted between the commit and the route (09 §3).
* ``serving`` -- :meth:`Host.run` (a task in the catalog's nursery) takes one turn at a
  time from the two lanes (lifecycle first, then application, ``core.lanes``);
  a reservation is returned when its turn ends, whatever the outcome.
* ``closing`` -- :meth:`Host.request_close` is called after the store's BeginClose
  succeeded; admission is sealed at once (new messages end ``StaleRoute``), the turns
  accepted before the seal still run, then ``on_close(reason)`` runs once, timers are
  cancelled, the authority is released with the Closing record's fence, and the
  catalog entry and cached route are dropped in the same continuation (06 §7, 09 §5).
  How a close begins (also ``ctx.close()``, and a lost lease: the local part of a close
  with no store write) is :mod:`.close_requests`'s; its last steps are :mod:`.closing`'s.
* ``sealed`` -- a planned relocation (:mod:`.moving`): admission goes to the hold, no
  turn runs; it ends ``serving`` again (abort) or ``disposed`` (the move committed:
  ``on_close(RELOCATED)``, no Release).  A target's host opens with the moved queue.

A handler's exception fails only its own turn: a request gets :class:`HandlerError`
(the exception chained as ``__cause__``), a send's failure is logged.  A queued request
whose deadline passed is completed with DeadlineExceeded without running, except the
restored first record of a cold activation, which is durable and always runs; its
cleanup after the turn is :mod:`.first_turn`'s, and timer ticks are queued by
:mod:`.timer_firing`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

import trio

from zlink_trio.core.errors import InvalidOperation, StaleRoute, Unavailable
from zlink_trio.core.lanes import Lanes
from zlink_trio.runtime.charts import INCARNATION, TRACE, step
from zlink_trio.runtime.incarnation.building import activation_failed, build
from zlink_trio.runtime.incarnation.close_requests import (
    begin_self_close,
    lose_ownership,
    request_close,
)
from zlink_trio.runtime.incarnation.closing import fail_queued, finish, moved_away
from zlink_trio.runtime.incarnation.context import SpotContext
from zlink_trio.runtime.incarnation.first_turn import (
    NO_WAITER,
    NoWaiter,
    first_handled,
    wait_first_record,
)
from zlink_trio.runtime.incarnation.handler_turn import lease_passed, run_handler
from zlink_trio.runtime.incarnation.timer_firing import fire_due_timers
from zlink_trio.runtime.incarnation.timers import HostTimers, TimerWork
from zlink_trio.runtime.observe.events import stale
from zlink_trio.runtime.observe.fields import StaleReason, spot_fields

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.core.lanes import Turn
    from zlink_trio.core.records import AuthorityFence
    from zlink_trio.core.timers import TimerId
    from zlink_trio.runtime.coordinators.first_record import FirstRecord
    from zlink_trio.runtime.declaration.policies import CloseReason
    from zlink_trio.runtime.declaration.spot_types import SpotType
    from zlink_trio.runtime.incarnation.moving import Move
    from zlink_trio.runtime.incarnation.work import MessageWork, Work
    from zlink_trio.runtime.state import NodeState

__all__ = ("Host", "Registration")

#: ``Host.route_expires_at`` before the catalog registers the incarnation.
_NO_ROUTE: Final = float("-inf")
#: ``Host._before_idle``: do not park, look at the lanes again.
_NO_WAIT: Final = -1.0
#: The chart's tags and states the task and the admission look at for every message.
_ADMISSION_SEALED: Final = INCARNATION.tags.admission_sealed
_RUNS_TURNS: Final = INCARNATION.tags.runs_turns
_CLOSING: Final = INCARNATION.st.closing
#: ``open``'s two steps from the initial state (once here; stepped while ``TRACE`` observes).
_OPENED: Final = step(INCARNATION, step(INCARNATION, INCARNATION.initial,
                                        INCARNATION.ev.commit_ready),
                      INCARNATION.ev.open_barrier)


class Registration(Protocol):
    """Where a Ready host is registered (the node's catalog): it leaves it when released."""

    def remove(self, host: Host) -> None:
        """Drop ``host`` if it is still the registered incarnation of its ID."""


class Host:
    """One local incarnation of a Spot; see the module docstring.

    Slotted, with its containers built on first use: 100,000 idle Spots are 100,000
    of these (docs/performance.md, "Where an idle Spot's bytes go").
    """

    __slots__ = (
        "_finished",
        "_is_finished",
        "_parked",
        "_woken",
        "cleanup_started",
        "close_fence",
        "close_reason",
        "ctx",
        "first_cleanup",
        "first_record",
        "generation",
        "instance",
        "lanes",
        "last_work_finished_at",
        "mesh",
        "move",
        "ownership_lost",
        "registration",
        "route_expires_at",
        "rt",
        "self_close",
        "spot_id",
        "spot_type",
        "state",
        "timers",
    )

    def __init__(self, rt: NodeState, spot_type: SpotType, spot_id: str, generation: int,
                 mesh: str) -> None:
        self.rt: Final = rt
        self.spot_type: Final = spot_type
        self.spot_id: Final = spot_id
        self.generation: Final = generation
        self.mesh: Final = mesh
        #: Incarnation chart state id.
        self.state = INCARNATION.initial
        self.instance: object | None = None
        self.ctx: Final = SpotContext(self)
        self.lanes: Final[Lanes[Work]] = Lanes(application=rt.options.application_lane,
                                               lifecycle=rt.options.lifecycle_lane)
        self.timers: Final = HostTimers()
        # The task parks itself (``_park``) rather than waiting on an Event: an idle
        # Spot then holds no Event, no ParkingLot and two fewer coroutine frames.
        self._parked: trio.lowlevel.Task | None = None
        self._woken = False
        self._finished: trio.Event | None = None  # built by the first ``finished`` reader
        self._is_finished = False
        self.close_reason: CloseReason | None = None
        self.close_fence: AuthorityFence | None = None
        #: ``ctx.close()`` was called and its close has not begun yet.
        self.self_close = False
        self.first_record: FirstRecord | None = None
        #: What to wake once the first record's cleanup ran (``None``: none pending).
        self.first_cleanup: trio.Event | NoWaiter | None = None
        #: The node lost its lease: finish without any store write.
        self.ownership_lost = False
        #: The catalog that registered this host (set by ``Catalog.register``).
        self.registration: Registration | None = None
        #: A planned relocation of this incarnation in progress (``incarnation.moving``).
        self.move: Move | None = None
        self.cleanup_started = False
        self.last_work_finished_at = trio.current_time()
        #: Until when this node admits to the incarnation without reading the store: the
        #: expiry a cached route would have (``RouteCache.local_expiry``, 06 §6), set when
        #: the catalog registers it and whenever a store read confirms it.
        self.route_expires_at = _NO_ROUTE

    @property
    def finished(self) -> trio.Event:
        """Set once the incarnation is released and gone from the catalog."""
        event = self._finished
        if event is None:
            event = self._finished = trio.Event()
            if self._is_finished:
                event.set()
        return event

    def set_finished(self) -> None:
        self._is_finished = True
        if self._finished is not None:
            self._finished.set()

    # ------------------------------------------------------------------ activation

    async def build(self, request: object | None = None, *,
                    relocated: bool = False) -> object | None:
        """Construct the instance and run ``on_activate`` (and ``on_create`` for User Spots).

        Returns what ``on_create`` returned (``None`` for Instance Spots, and for the
        target of a relocation, ``relocated``, which runs no ``on_create``: the Spot
        was created long ago). Application exceptions become :class:`HandlerError`;
        cancellation propagates. The caller runs :meth:`activation_failed` when this
        raises or the result is a Reject.
        """
        return await build(self, request, relocated=relocated)

    async def activation_failed(self) -> None:
        """``on_close(ACTIVATION_FAILED)`` once if constructed; the host is disposed.

        Runs shielded with a bound, so a failing attempt always gets to clean up.
        """
        await activation_failed(self)

    def open(self, first: MessageWork | None) -> None:
        """Commit -> registered -> (first record at the head) -> serving; synchronous.

        The caller registers the host in the catalog in the same continuation.
        """
        opened = self.state == INCARNATION.initial and not TRACE
        if not opened:
            self.state = step(INCARNATION, self.state, INCARNATION.ev.commit_ready)
        if first is not None:
            self.first_record = first.first
            self.first_cleanup = NO_WAITER  # an Event only once someone waits
            self.lanes.application.push_front(first, 0)
        self.state = (_OPENED if opened
                      else step(INCARNATION, self.state, INCARNATION.ev.open_barrier))
        self.last_work_finished_at = trio.current_time()

    def log_fields(self) -> dict[str, object]:
        """The structured fields of a record about this incarnation (``observe.fields``)."""
        return spot_fields(self.spot_id, node_id=self.rt.node_id, mesh=self.mesh,
                           generation=self.generation)

    @property
    def sealed(self) -> bool:
        """Whether admission is sealed (closing or gone)."""
        return self.state in _ADMISSION_SEALED

    def admit(self, work: MessageWork, payload_size: int, now: float | None = None) -> None:
        """Queue an application message. StaleRoute when sealed or the owner is invalid;
        CapacityExceeded (``lane="application"``) when a lane bound is hit; Unavailable
        on a node that lost its lease or is draining. ``now``: the store clock, if the
        caller just read it (the lease check needs no second reading)."""
        if self.state in _ADMISSION_SEALED:
            self.rt.check_usable()  # a lost lease explains a sealed host best
            stale(self.rt, StaleReason.CLOSING, self.spot_id, generation=self.generation,
                  mesh=self.mesh)
            raise StaleRoute(
                f"Spot {self.spot_id!r} generation {self.generation} is closing on this node "
                "and admits no new messages; the message was not run. Send a new call once "
                "it is closed (with Instance intent it is activated again)"
            )
        try:
            self.rt.check_admission(now)
        except StaleRoute:
            stale(self.rt, StaleReason.LEASE_EXPIRED, self.spot_id, generation=self.generation,
                  mesh=self.mesh)
            raise
        if self.move is not None and self.state == INCARNATION.st.sealed:
            refusal = self.move.refusal()
            if refusal is not None:
                raise refusal
            self.move.hold.append((work, payload_size))  # no bound of its own (09 §6)
            return
        self.lanes.application.admit(work, payload_size)
        self.wake()

    def pending_and_running(self) -> tuple[int, int]:
        """Queued and running work items over both lanes (idle check)."""
        return self.lanes.counts()

    def add_timer(self, delay: float, callback: Callable[[], Awaitable[object]],
                  period: float | None) -> TimerId:
        """Register a timer (see ``SpotContext.start_timer``)."""
        if self.sealed or self.self_close:
            raise InvalidOperation(
                f"Spot {self.spot_id!r} is closing; it cannot start new timers (start "
                "them while it serves, e.g. in on_activate or a handler)"
            )
        timer_id = self.timers.add(delay, callback, period=period, now=trio.current_time())
        self.wake()
        return timer_id

    def cancel_timer(self, timer_id: TimerId) -> bool:
        """Unregister a timer; ``True`` if it was registered."""
        return self.timers.cancel(timer_id)

    def has_timer(self, timer_id: TimerId) -> bool:
        """Whether ``timer_id`` is still registered (a fired one-shot is not)."""
        return timer_id in self.timers

    # ------------------------------------------------------------------ close

    def request_self_close(self) -> None:
        """``ctx.close()``: begin the close after the current turn."""
        if not self.sealed:
            self.self_close = True
            self.wake()

    def request_close(self, reason: CloseReason, fence: AuthorityFence) -> None:
        """Seal admission for a close whose BeginClose succeeded; merges with a running one."""
        request_close(self, reason, fence)

    def lose_ownership(self, error: Unavailable) -> None:
        """The node lost its lease: seal, fail queued work with ``error``, cancel timers
        (``close_requests.lose_ownership``). Synchronous; idempotent."""
        lose_ownership(self, error)

    @property
    def self_close_requested(self) -> bool:
        """Whether ``ctx.close()`` was called and its close has not begun yet."""
        return self.self_close

    def leave_catalog(self) -> None:
        """Leave the catalog and drop the cached route, in one continuation."""
        if self.registration is not None:
            self.registration.remove(self)
        self.rt.route_cache.invalidate(self.spot_id)

    async def moved_away(self) -> None:
        """After a committed relocation: ``on_close(RELOCATED)`` once, then ``finished``."""
        await moved_away(self)

    def wake(self) -> None:
        """Wake the task to look at its state and queue again (at once if it is parked)."""
        self._woken = True
        task = self._parked
        if task is not None:
            self._parked = None
            trio.lowlevel.reschedule(task)

    def _will_park(self, task: trio.lowlevel.Task) -> bool:
        """Whether the task (``task``, the current one) parks now: not when :meth:`wake`
        was called since ``_woken`` was last cleared (it looks again instead); else it is
        recorded as parked, and its caller awaits ``wait_task_rescheduled(self._unpark)``
        in the same continuation."""
        if self._woken:
            self._woken = False
            return False
        self._parked = task
        return True

    def _unpark(self, _: object) -> trio.lowlevel.Abort:
        """The parked task is cancelled (its timer deadline, or its nursery)."""
        self._parked = None
        return trio.lowlevel.Abort.SUCCEEDED

    @property
    def first_record_settled(self) -> bool:
        """Whether no first-record cleanup of a cold activation is pending (06 §4.1 step 12)."""
        return self.first_record is None or self.first_record.done

    async def wait_first_record(self) -> None:
        """Wait until the first record's cleanup ran (done or failed); the caller bounds it."""
        await wait_first_record(self)

    # ------------------------------------------------------------------ the task

    async def run(self) -> None:
        """The incarnation's task: one turn at a time until closed and released."""
        # Read once per task, not once per turn: this task, and the run's clock (what
        # ``trio.current_time`` reads, without its three calls).
        task = trio.lowlevel.current_task()
        now = trio.lowlevel.current_clock().current_time
        if self.rt.clock == now:  # (the store clock is the run's: handler_turn shares it)
            now = self.rt.clock
        lanes = self.lanes
        try:
            while True:
                if self.state not in _RUNS_TURNS:
                    if self.state == INCARNATION.st.disposed:
                        return  # moved to another node: its queue went with it
                    # Sealed for a relocation: no turn runs until it commits or aborts.
                    self._woken = False
                    if self._will_park(task):
                        await trio.lowlevel.wait_task_rescheduled(self._unpark)
                    continue
                turn = lanes.next_turn()
                if turn is None:
                    if self.state == _CLOSING:
                        break
                    if self.self_close:
                        await begin_self_close(self)
                        continue
                    # Parked in this very frame (not in a helper coroutine): each frame
                    # on an idle Spot's stack is ~220 B that 100,000 Spots all pay.
                    deadline = self._before_idle()
                    if deadline is not _NO_WAIT and self._will_park(task):
                        if deadline is None:  # no timer: only a wake or a cancel ends it
                            await trio.lowlevel.wait_task_rescheduled(self._unpark)
                        else:
                            with trio.move_on_at(deadline):
                                await trio.lowlevel.wait_task_rescheduled(self._unpark)
                    continue
                await self._run_turn(turn, now)
            with trio.CancelScope(shield=True):
                await finish(self)
        finally:
            fail_queued(self, Unavailable(
                f"Spot {self.spot_id!r} stopped on this node before the request ran; "
                "send a new call"
            ))

    def _before_idle(self) -> float | None:
        """Fire the due timers; the next timer's deadline, ``None`` without timers, or
        :data:`_NO_WAIT` when there is work (or the close) to look at at once."""
        self._woken = False  # what follows looks at everything a wake announces
        timers = self.timers
        deadline = timers.next_deadline()
        if deadline is not None:  # (most Spots have no timer: no clock read)
            fire_due_timers(self)
            deadline = timers.next_deadline()
        if self.lanes.application.queued or self.state == _CLOSING:
            return _NO_WAIT
        return deadline

    async def _run_turn(self, turn: Turn[Work], now: Callable[[], float]) -> None:
        """Run ``turn`` (``now`` reads the Trio clock) and return its reservation."""
        item = turn.item
        try:
            if isinstance(item, TimerWork):
                if not lease_passed(self.rt):  # (queued before the deadline passed)
                    await item.run(self.spot_id)
            else:
                ended: float | None = None
                try:
                    ended = await run_handler(self, item, now)
                finally:
                    self.last_work_finished_at = now() if ended is None else ended
                first = item.first
                if first is not None:
                    await first_handled(self, first)
        finally:
            self.lanes.complete(turn.ticket)
            if self.move is not None:
                self.move.turn_finished()
        if self.self_close and not self.sealed:
            await begin_self_close(self)

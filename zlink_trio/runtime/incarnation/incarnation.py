"""One Spot incarnation on this node: its instance, lanes, timers, turns, close and move.

Theory of operation
-------------------
An :class:`Incarnation` is created by a coordinator (cold activation, user create,
recovery, the target of a relocation) once the store granted it authority.  It keeps
the ``Incarnation`` chart's state id and asks the chart's tags every question about
it (``INCARNATION.tags``):

* ``activating`` -- the coordinator builds the instance (:meth:`Incarnation.build`:
  the factory, the ``in_factory`` crash point, ``on_activate`` and, for a User Spot
  that is created rather than relocated, ``on_create``; the timers registered so far
  are the activation's).  It is not in the catalog yet, so nothing can reach it.  When
  building raises or ``on_create`` rejects, the coordinator runs
  :meth:`Incarnation.activation_failed` (``on_close(ACTIVATION_FAILED)`` once if the
  instance was constructed).  ``commit_ready`` -> ``barrier_closed`` ->
  ``open_barrier`` -> ``serving`` happen in the coordinator's continuation right after
  CommitReady (:meth:`Incarnation.open`), with the catalog registration and (cold
  activation) the restored first record: no message is admitted between the commit
  and the route.  The target of a relocation opens with the moved queue
  instead (:meth:`Incarnation.open_moved`).
* ``serving`` -- :meth:`Incarnation.run` (a task in the catalog's nursery) takes one
  turn at a time from the two lanes (lifecycle first, then application,
  ``core.lanes``); a reservation is returned when its turn ends, whatever the outcome.
* ``closing`` -- a close began; admission is sealed at once (new messages end
  ``StaleRoute``), the turns accepted before the seal still run, then ``on_close``
  runs once, timers are cancelled, the authority is released with the Closing
  record's fence, and the catalog entry and cached route are dropped in the same
  continuation.  See "Closing" below.
* ``sealed`` -- a planned relocation sealed the incarnation: admission goes to the
  relocation hold, no application turn runs (lifecycle work does); it ends
  ``serving`` again (abort) or ``disposed`` (the move committed:
  ``on_close(RELOCATED)``, no Release).  See "Moving" below.

Admission
---------
:meth:`Incarnation.admit` is the one gate of a message on its way to a Spot, local or
from another node (the callers check no admission of their own), and
:meth:`Incarnation.admission` its one decision, which compares the lease once:
refused (the node lost its lease or drains: ``Unavailable``; its lease deadline
passed: ``StaleRoute``; admission sealed, closing or gone: ``StaleRoute``; a stranded
relocation: ``Unavailable``), held (sealed for a relocation), or queued
(``CapacityExceeded`` naming the lane when a bound is hit).  The lease is compared
again only around the turn: before it (the message waited in the queue) and after it
(the fencing rule on the reply, below).

A turn
------
A queued request whose caller already gave up (its completion is done) or whose deadline
passed while it was queued is not run (``DeadlineExceeded``) -- except the restored
first record of a cold activation, which is durable and always runs.  An owner past its
lease deadline starts no turn (it is no valid owner any more; a process paused with work
queued wakes up here and another lifecycle may own the Spot now): ``Unavailable``.  The
handler is called (through the runtime's observers when any are installed,
``runtime.observers``: the test kit holds and records turns there); its reply is checked
against the declared reply type; an exception fails only its own turn: a request gets
:class:`HandlerError` (the exception chained as ``__cause__``), a send's failure is
logged.  A turn that ended **after** the lease deadline does not reply: the caller gets
``Unavailable``, because another lifecycle may own the Spot by now and this
incarnation's state, with the handler's effect, is lost with it.  It is the fencing rule
on the reply (Kleppmann's fencing token, checked by whoever acts on the result);
``tests/chaos`` found the acknowledgement a paused owner gave without it.

After the restored first record's turn its completion is recorded (cursor, recovery
pointer, root: cold activation step 12,
:func:`~zlink_trio.runtime.incarnation.first_record.record_first_completion`) --
unless the node lost its lease, which leaves the records as evidence -- and whoever
waits for it is woken (:meth:`Incarnation.wait_first_record`: a relocation must not
move a Spot whose first record is not settled).  Most cold activations have nobody
waiting: the pending cleanup is then marked by :data:`_NO_WAITER`, and only the first
waiter builds an Event.

Timers
------
Before the task parks it queues the due timer ticks (``IncarnationTimers.due``) on the
application lane, so a callback runs as an ordinary turn, one at a time with the
handlers.  No tick is queued while the state fires no timers (closing, sealed) nor by an
owner past its lease deadline (no valid owner: a periodic timer comes due again); a tick
the lane refuses (its bound) is skipped and logged.

Closing
-------
A close begins for one of three reasons, each sealing admission at once:

* :meth:`Incarnation.request_close` -- a store BeginClose succeeded (an explicit
  close, idle eviction, node shutdown): the chart takes ``begin_close``
  (``begin_idle_eviction``), the reason and the Closing record's fence are kept for
  the Release, and a close already under way absorbs a second one;
* ``ctx.close()`` asked for it during a turn (:meth:`Incarnation.request_self_close`):
  lifecycle work (``work.LifecycleWork``, admitted under the lifecycle lane's own
  bounds, however full the application lane is): its turn, once that turn ended and
  ahead of the queued application work, runs the BeginClose (bounded by the node's
  ``default_timeout``; a refusal is logged and the Spot keeps serving);
* :meth:`Incarnation.lose_ownership` -- the node learned its lease is gone: the local
  part of a close without any store write; queued items end :class:`Unavailable`
  without running, timers are cancelled, a relocation in progress is unsealed.

Once all accepted work is done the task finishes it: ``on_close(reason)`` once,
then (with ownership) Release with the Closing record's fence, the catalog entry
dropped, ``disposed``, ``finished`` set, and the activation inbox and any leftover
first-record root deleted.  Without ownership nothing is written: the inbox and root
stay as evidence for the operator.  Every store call of that cleanup is bounded by
the node's ``default_timeout`` and logged when it fails or gets no answer: it runs
shielded, so a hung store must not hold the task forever.  Whatever ends the task,
the requests still queued end with an error without running (a one-way send is
dropped and logged): no caller waits for a turn that never comes.

Moving
------
A :class:`Move` is attached to the source's incarnation (``incarnation.move``) for
the length of one relocation, by the relocation coordinator
(:mod:`zlink_trio.runtime.coordinators.relocation`):

* **Relocating, waiting for the permit** -- the incarnation keeps ``serving``: messages
  and timers are admitted and run as usual (a Relocating Spot waiting for its permit is
  not sealed yet), but the idle sweep skips it (a moving Spot is never evicted).
* :meth:`Incarnation.seal_for_relocation` -> ``sealed``: from here no application turn
  runs and no timer fires; a message admitted now goes to the **relocation hold**
  (``Move.hold``: arrival order, no bound of its own) instead of the queue.
  The seal is lifecycle work, admitted under the lifecycle lane's own bounds: its turn
  comes once the turn running at the seal finished, and
  :meth:`Incarnation.wait_no_turn` waits for it, so the queue the coordinator then
  captures is exactly the not-yet-run work.
* :meth:`Incarnation.unseal` -- an explicit abort before relay-ready:
  ``abort_relocation`` -> ``serving``; the held ingress goes to the end of the queue
  in arrival order (behind the work that was queued at the seal) and the task runs
  again.
* :meth:`Incarnation.strand` -- past relay-ready the target did not commit in time:
  the held requests end with ``Unavailable`` and new ingress is refused with it; the
  incarnation stays ``sealed`` until the commit is seen.
* :meth:`Incarnation.finish_relocation` -- the relocation committed:
  ``commit_relocation`` -> ``disposed``.  The queued work left with the payload, so it
  is taken out of the lanes without being completed here (the target runs it and its
  replies come back through this node); timers are cancelled, the incarnation leaves
  the catalog and the route cache, and its task ends -- without a Release: the
  authority now belongs to the target.  The hold is returned to the coordinator,
  which relays it along the Message Follow route; then :meth:`Incarnation.moved_away`
  runs ``on_close(RELOCATED)`` once.
"""

from __future__ import annotations

import enum
import sys
from typing import TYPE_CHECKING, Any, Final

import trio

from zlink_trio.core.errors import (
    CapacityExceeded,
    DeadlineExceeded,
    InvalidOperation,
    StaleRoute,
    Unavailable,
    ZLinkError,
)
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.lanes import Lanes, Turn
from zlink_trio.lowlevel.parking import ParkingSlot
from zlink_trio.runtime import crash_points, observers
from zlink_trio.runtime.charts import INCARNATION, TRACE, step
from zlink_trio.runtime.collector import instance_outlived
from zlink_trio.runtime.declaration.policies import CloseReason
from zlink_trio.runtime.incarnation.app_calls import (
    activate,
    check_reply,
    construct,
    handler_error,
    run_on_close,
)
from zlink_trio.runtime.incarnation.context import SpotContext
from zlink_trio.runtime.incarnation.durable_state import DurableState
from zlink_trio.runtime.incarnation.first_record import (
    drop_recovery,
    record_first_completion,
)
from zlink_trio.runtime.incarnation.owner_writes import OwnerWrites
from zlink_trio.runtime.incarnation.timers import NO_TIMERS, IncarnationTimers, TimerWork
from zlink_trio.runtime.incarnation.work import LifecycleKind, LifecycleWork, MessageWork
from zlink_trio.runtime.observe.events import incarnation_closed, stale
from zlink_trio.runtime.observe.fields import StaleReason, spot_fields
from zlink_trio.runtime.observe.logs import SPOTS as LOGGER

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.core.records import AuthorityFence
    from zlink_trio.core.timers import TimerId
    from zlink_trio.runtime.declaration.spot_types import SpotType
    from zlink_trio.runtime.incarnation.arrival import Arrival
    from zlink_trio.runtime.incarnation.first_record import FirstRecord
    from zlink_trio.runtime.incarnation.work import Work
    from zlink_trio.runtime.state import NodeState

__all__ = ("Incarnation", "Move")

#: ``sys.getrefcount`` of an instance nothing refers to but a local name (and the call's
#: own argument).
_ONLY_HERE: Final = 2

#: ``Incarnation.route_expires_at`` before the catalog registers the incarnation.
_NO_ROUTE: Final = float("-inf")
#: ``Incarnation._before_idle``: do not park, look at the lanes again.
_NO_WAIT: Final = -1.0
#: The chart's tags the task and the admission look at for every message.
_ADMISSION_SEALED: Final = INCARNATION.tags.admission_sealed
_HOLDS_INGRESS: Final = INCARNATION.tags.holds_ingress
_RUNS_TURNS: Final = INCARNATION.tags.runs_turns
_TASK_RUNNING: Final = INCARNATION.tags.task_running
_CLOSES_WHEN_DRAINED: Final = INCARNATION.tags.closes_when_drained
_FIRES_TIMERS: Final = INCARNATION.tags.fires_timers
#: The compiled chart's transitions, ``(state, event) -> target``.
_TRANSITIONS: Final = INCARNATION.table.transitions
#: ``open``'s two steps from the initial state (once here; stepped while ``TRACE`` observes).
_OPENED: Final = step(INCARNATION, step(INCARNATION, INCARNATION.initial,
                                        INCARNATION.ev.commit_ready),
                      INCARNATION.ev.open_barrier)


class _Step(enum.Enum):
    """The rarer steps of an incarnation's task (``Incarnation._next_step``)."""

    #: Nothing to park for: look at the lanes and the state again.
    LOOK_AGAIN = "look again"
    #: Run ``ctx.close()``'s BeginClose (``Incarnation._begin_self_close``).
    SELF_CLOSE = "self close"
    #: Closing and all accepted work done: finish (``Incarnation._finish``), then end.
    DRAINED = "drained"
    #: Moved to another node: the task ends (its queue went with it).
    GONE = "gone"


_LOOK_AGAIN: Final = _Step.LOOK_AGAIN


class _NoWaiter:
    """``Incarnation.first_cleanup`` while the first record's cleanup is pending and
    nobody waits for it -- most cold activations: no Event is built, and ``set`` wakes
    nobody.  The first :meth:`Incarnation.wait_first_record` replaces it with an Event."""

    __slots__ = ()

    def set(self) -> None:
        """Nobody to wake."""


_NO_WAITER: Final = _NoWaiter()


def _lease_passed(rt: NodeState) -> bool:
    """Whether the owner's lease deadline passed (before a renewal moved it)."""
    return rt.clock() >= rt.lease_expires_at  # (``rt.now()``, one call less per turn)


class Move:
    """One relocation of an incarnation, on its source (see the module docstring, "Moving").

    Attached as ``incarnation.move`` by the relocation coordinator; the incarnation's
    relocation methods step it.
    """

    __slots__ = ("hold", "seal_turn", "stranded")

    def __init__(self) -> None:
        #: Ingress admitted after the seal, in arrival order: ``(work, payload size)``.
        self.hold: list[tuple[Any, int]] = []
        #: Set by ``Incarnation.strand``: why the Spot is unavailable here (admission refuses).
        self.stranded: str | None = None
        #: Set once the seal's lifecycle turn ran (or was dropped): no handler runs now.
        self.seal_turn = trio.Event()

    def refusal(self) -> Unavailable | None:
        """The error a new message gets once stranded (``None`` while it may be held)."""
        return None if self.stranded is None else Unavailable(self.stranded)


class Incarnation(ParkingSlot):
    """One local incarnation of a Spot; see the module docstring.

    Slotted, with its containers built on first use: 100,000 idle Spots are 100,000
    of these (docs/performance.md, "Where an idle Spot's bytes go"). Its task parks in
    the incarnation itself (a ``lowlevel.parking.ParkingSlot``) while it has nothing to
    do: an idle Spot then holds no Event, no ParkingLot and no extra coroutine frame.
    """

    __slots__ = (
        "_finished",
        "_timers",
        "_woken",
        "arrival",
        "cleanup_started",
        "close_fence",
        "close_reason",
        "durable",
        "first_cleanup",
        "first_record",
        "generation",
        "instance",
        "lanes",
        "last_work_finished_at",
        "mesh",
        "move",
        "ownership_lost",
        "route_expires_at",
        "rt",
        "self_close",
        "spot_id",
        "spot_type",
        "state",
        "task",
        "unregister",
        "writes",
    )

    def __init__(self, rt: NodeState, spot_type: SpotType, spot_id: str, generation: int,
                 mesh: str) -> None:
        super().__init__()
        self.rt: Final = rt
        self.spot_type: Final = spot_type
        self.spot_id: Final = spot_id
        self.generation: Final = generation
        self.mesh: Final = mesh
        #: Incarnation chart state id.
        self.state = INCARNATION.initial
        #: The Spot's instance, from its construction until the incarnation ends (then
        #: ``None``: the instance and its ``ctx`` refer to the incarnation, and that
        #: cycle must not outlive it, see :meth:`_drop_instance`).
        self.instance: object | None = None
        #: The incarnation's task while :meth:`run` runs (``None`` before and after): an
        #: operation that waits for this incarnation's turns to end must not run in it.
        self.task: trio.lowlevel.Task | None = None
        #: The fence of its durable writes, when its type has any (state, reminders).
        self.writes: Final = (OwnerWrites(self) if spot_type.state is not None
                              or spot_type.reminders else None)
        #: ``ctx.state``: the durable state, when the type declares one (docs/state.md).
        self.durable: Final = (None if self.writes is None or spot_type.state is None
                               else DurableState(self.writes, spot_type.state))
        self.lanes: Final[Lanes[Work]] = Lanes(application=rt.options.application_lane,
                                               lifecycle=rt.options.lifecycle_lane)
        #: Its timers once it registered one (:meth:`own_timers`); :attr:`timers` reads.
        self._timers: IncarnationTimers | None = None
        #: :meth:`wake` was called since the task last looked (``_will_park``).
        self._woken = False
        #: ``False`` until it finished, then ``True`` -- or the Event the first
        #: :attr:`finished` reader built, set once it finished (one slot for both).
        self._finished: trio.Event | bool = False
        self.close_reason: CloseReason | None = None
        self.close_fence: AuthorityFence | None = None
        #: ``ctx.close()`` was called and its close has not begun yet.
        self.self_close = False
        self.first_record: FirstRecord | None = None
        #: What to wake once the first record's cleanup ran (``None``: none pending).
        self.first_cleanup: trio.Event | _NoWaiter | None = None
        #: The node lost its lease: finish without any store write.
        self.ownership_lost = False
        #: Drops this incarnation from the catalog that registered it (the catalog's
        #: ``remove``, set by ``Catalog.register``).
        self.unregister: Callable[[Incarnation], None] | None = None
        #: A planned relocation of this incarnation in progress (see "Moving").
        self.move: Move | None = None
        #: How it arrived, when a relocation opened it here (:meth:`open_moved`).
        self.arrival: Arrival | None = None
        self.cleanup_started = False
        self.last_work_finished_at = trio.current_time()
        #: Until when this node admits to the incarnation without reading the store: the
        #: expiry a cached route would have (``RouteCache.local_expiry``), set when
        #: the catalog registers it and whenever a store read confirms it.
        self.route_expires_at = _NO_ROUTE

    @property
    def timers(self) -> IncarnationTimers:
        """Its timers, to read or cancel (:data:`~.timers.NO_TIMERS` until it registers
        one: most Spots never do, and an idle Spot should not hold an empty table)."""
        timers = self._timers
        return NO_TIMERS if timers is None else timers

    def own_timers(self) -> IncarnationTimers:
        """Its own timers, to register one in (built by the first call)."""
        timers = self._timers
        if timers is None:
            timers = self._timers = IncarnationTimers()
        return timers

    @property
    def finished(self) -> trio.Event:
        """Set once the incarnation is released and gone from the catalog."""
        event = self._finished
        if type(event) is bool:
            is_finished, event = event, trio.Event()
            self._finished = event
            if is_finished:
                event.set()
        assert isinstance(event, trio.Event)
        return event

    @property
    def ended(self) -> bool:
        """Whether it has ended here: closed, moved away, its activation failed, or
        released and gone (``ctx.ended``)."""
        finished = self._finished
        return (finished is True or (type(finished) is not bool and finished.is_set())
                or (self.writes is not None and self.writes.ended))

    def _set_finished(self) -> None:
        event = self._finished
        if type(event) is bool:
            self._finished = True
        else:
            event.set()
        self._drop_instance()

    def _drop_instance(self) -> None:
        """Forget the instance once the incarnation ended: the instance (through its
        ``ctx``) refers to the incarnation, so keeping it would leave a reference cycle
        that only the cyclic garbage collector frees -- and a node freezes its
        long-lived objects out of that collector's view (``runtime/collector.py``).
        Without the cycle an ended incarnation is freed at once, by reference counting.
        An instance that something else still refers to is counted: its own class may
        keep a cycle, which a frozen generation would never free."""
        instance, self.instance = self.instance, None
        if instance is not None and sys.getrefcount(instance) > _ONLY_HERE:
            instance_outlived()

    def log_fields(self) -> dict[str, object]:
        """The structured fields of a record about this incarnation (``observe.fields``)."""
        return spot_fields(self.spot_id, node_id=self.rt.node_id, mesh=self.mesh,
                           generation=self.generation)

    # ------------------------------------------------------------------ activation

    def _construct(self, request: object | None) -> object:
        instance = self.instance = construct(self.spot_type, SpotContext(self), request)
        if observers.OBSERVERS:
            for observer in observers.OBSERVERS:
                observer.factory_ran(self.rt.node_id, self.spot_id, self.generation,
                                     self.spot_type.stable_type)
        return instance

    async def build(self, request: object | None = None, *,
                    relocated: bool = False) -> object | None:
        """Construct the instance and run ``on_activate`` (and ``on_create`` for User Spots).

        Returns what ``on_create`` returned (``None`` for Instance Spots, and for the
        target of a relocation, ``relocated``, which runs no ``on_create``: the Spot
        was created long ago). Application exceptions become :class:`HandlerError`;
        cancellation propagates. The caller runs :meth:`activation_failed` when this
        raises or the result is a Reject.
        """
        if self.durable is not None:  # before the factory: ``ctx.state.load()`` answers
            await self.durable.fetch()
        instance = self._construct(request)
        if crash_points.ARMED:
            crash_points.point("create" if self.spot_type.kind is SpotKind.USER else "cold",
                               "in_factory", self.rt.node_id)
        result = await activate(self.spot_type, instance, request, create=not relocated)
        self.timers.mark_activation()
        return result

    async def activation_failed(self) -> None:
        """``on_close(ACTIVATION_FAILED)`` once if constructed; the incarnation is disposed.

        The caller runs it shielded: a failing attempt always gets to clean up
        (``on_close`` is bounded by ``app_calls.CLEANUP_TIMEOUT``).
        """
        self.state = step(INCARNATION, self.state, INCARNATION.ev.activation_failed)
        self.timers.cancel_all()
        if self.writes is not None:
            self.writes.end()
        await run_on_close(self.spot_type, self.instance, self.spot_id,
                           CloseReason.ACTIVATION_FAILED)
        self._drop_instance()

    def open(self, first: MessageWork | None) -> None:
        """Commit -> registered -> (first record at the head) -> serving; synchronous.

        The caller registers the incarnation in the catalog in the same continuation.
        """
        # From a state the chart lets commit (the initial one alone) the two steps end
        # in ``_OPENED``: stepped once at import, unless TRACE observes every step.
        opened = (self.state, INCARNATION.ev.commit_ready) in _TRANSITIONS and not TRACE
        if not opened:
            self.state = step(INCARNATION, self.state, INCARNATION.ev.commit_ready)
        if first is not None:
            self.first_record = first.first
            self.first_cleanup = _NO_WAITER  # an Event only once someone waits
            self.lanes.application.push_front(first, 0)
        self.state = (_OPENED if opened
                      else step(INCARNATION, self.state, INCARNATION.ev.open_barrier))
        self.last_work_finished_at = trio.current_time()
        if self.writes is not None:
            self.writes.serve()

    def open_moved(self, queue: list[tuple[MessageWork, int]], arrival: Arrival) -> None:
        """The target of a committed relocation: the moved queue first, then serving.

        ``commit_relocation`` -> ``barrier_closed``, the moved work queued in order (it
        was accepted at the source: never refused here; each operation ID recorded in
        ``arrival``, which followed messages are checked against from now on),
        ``open_barrier`` -> ``serving``. Synchronous, like :meth:`open`: the caller
        registers the incarnation in the catalog in the same continuation.

        Until the source says it relayed its hold (:meth:`end_relay_wait`), only the
        moved queue and followed messages run; a message admitted here otherwise -- a
        local caller, a node whose route names this one already -- waits in
        :attr:`relay_wait`, so it never overtakes a held message of the same sender.
        (That list is the arrival's, ``Arrival.waiting``: most incarnations never
        arrive by a move, and every resident Spot would pay for the slot.)
        """
        self.state = step(INCARNATION, self.state, INCARNATION.ev.commit_relocation)
        self.arrival = arrival
        arrival.waiting = []
        lane = self.lanes.application
        now = trio.current_time()
        for work, size in queue:
            if work.operation_id:
                arrival.first_delivery(work.operation_id, work.deadline.at, now)
            lane.append_unbounded(work, size)
        self.state = step(INCARNATION, self.state, INCARNATION.ev.open_barrier)
        if self.writes is not None:
            self.writes.serve()

    # ------------------------------------------------------------------ admission

    @property
    def admission_sealed(self) -> bool:
        """Whether admission is sealed: the incarnation is closing or gone (not the
        chart's ``sealed`` state, which holds admitted messages for a relocation)."""
        return self.state in _ADMISSION_SEALED

    def admission(self, now: float | None = None) -> Move | None:
        """Whether a message may come in now: the one admission decision of its hop.

        Returns ``None`` to queue it, or the :class:`Move` whose hold takes it. Raises,
        the node's state first (it explains a refusal best): Unavailable on a node that
        lost its lease or is draining; StaleRoute for an owner past its lease deadline;
        StaleRoute when admission is sealed (closing or gone); Unavailable for a
        relocation that stranded. ``now``: the store clock, if the caller just read it.
        """
        rt = self.rt
        try:
            rt.check_admission(now)
        except StaleRoute:
            stale(rt.node_id, rt.metrics, StaleReason.LEASE_EXPIRED, self.spot_id,
                  generation=self.generation, mesh=self.mesh)
            raise
        state = self.state
        if state in _ADMISSION_SEALED:
            stale(rt.node_id, rt.metrics, StaleReason.CLOSING, self.spot_id,
                  generation=self.generation, mesh=self.mesh)
            raise StaleRoute(
                f"Spot {self.spot_id!r} generation {self.generation} is closing on this node "
                "and admits no new messages; the message was not run. Send a new call once "
                "it is closed (with Instance intent it is activated again)"
            )
        move = self.move
        if move is not None and state in _HOLDS_INGRESS:
            refusal = move.refusal()
            if refusal is not None:
                raise refusal
            return move
        return None

    def admit(self, work: MessageWork, payload_size: int, now: float | None = None) -> None:
        """Queue an application message (or hold it for a relocation), if
        :meth:`admission` lets it in; CapacityExceeded (``lane="application"``) when a
        lane bound is hit. ``now``: the store clock, if the caller just read it."""
        move = self.admission(now)
        if move is not None:
            move.hold.append((work, payload_size))  # the hold has no bound of its own
            return
        arrival = self.arrival
        if arrival is not None and (waiting := arrival.waiting) is not None:
            # behind the source's relay (open_moved)
            bounds = self.lanes.application.bounds
            if len(waiting) + self.lanes.application.queued >= bounds.max_items:
                raise CapacityExceeded(
                    f"the application lane of Spot {self.spot_id!r} is full: "
                    f"{len(waiting)} messages wait for its move's relay and its count bound "
                    f"is {bounds.max_items}; retry after the Spot drains its backlog",
                    lane="application")
            waiting.append((work, payload_size))
            return
        self.lanes.application.admit(work, payload_size)
        self.wake()

    @property
    def relay_wait(self) -> list[tuple[Any, int]] | None:
        """Until the source relayed its hold (:meth:`end_relay_wait`): the messages
        admitted here meanwhile other than followed ones, in arrival order (``None``
        once relayed, and for an incarnation that did not arrive by a move)."""
        arrival = self.arrival
        return None if arrival is None else arrival.waiting

    def end_relay_wait(self) -> None:
        """The source relayed its hold (or will not: the wait's deadline, a seal, a close):
        what waited for it is queued now, in arrival order. Idempotent."""
        arrival = self.arrival
        if arrival is None:
            return
        waiting, arrival.waiting = arrival.waiting, None
        arrival.relayed.set()
        if waiting:
            lane = self.lanes.application
            for work, size in waiting:
                lane.append_unbounded(work, size)  # admitted already: never refused now
            self.wake()

    def admit_followed(self, work: MessageWork, payload_size: int) -> None:
        """Queue a message that followed this Spot along a Message Follow route, past the
        application lane's bounds (its reservation counts), if :meth:`admission` lets it in.

        The route's queue has no bound of its own and its messages were accepted
        by the Spot's previous owner -- a relocation's hold above all, whose one-way sends
        already returned -- so the new owner does not refuse them for capacity, as it
        does not refuse the moved queue (:meth:`open_moved`).
        """
        move = self.admission()
        if move is not None:
            move.hold.append((work, payload_size))
            return
        self.lanes.application.append_unbounded(work, payload_size)
        self.wake()

    def admit_lifecycle(self, work: LifecycleWork) -> None:
        """Queue lifecycle work on the lifecycle lane, under that lane's own bounds:
        however full the application lane is, a seal or a close is admitted, and its turn
        comes before any queued application work. CapacityExceeded (``lane="lifecycle"``)
        when the lifecycle lane's bound is hit; nothing is queued then."""
        self.lanes.lifecycle.admit(work, 0)
        self.wake()

    # ------------------------------------------------------------------ timers

    def add_timer(self, delay: float, callback: Callable[[], Awaitable[object]],
                  period: float | None) -> TimerId:
        """Register a timer (see ``SpotContext.start_timer``)."""
        if self.admission_sealed or self.self_close:
            raise InvalidOperation(
                f"Spot {self.spot_id!r} is closing; it cannot start new timers (start "
                "them while it serves, e.g. in on_activate or a handler)"
            )
        timer_id = self.own_timers().add(delay, callback, period=period,
                                         now=trio.current_time())
        self.wake()
        return timer_id

    def _fire_due_timers(self) -> None:
        """Queue the due ticks on the application lane (module docstring, "Timers")."""
        timers = self.timers
        if not timers or self.state not in _FIRES_TIMERS:
            return  # (most Spots have no timer: no clock read)
        due = timers.due(trio.current_time())
        if due and _lease_passed(self.rt):
            # An owner past its lease deadline is no valid owner: no tick runs,
            # as no message is admitted (a periodic timer comes due again).
            LOGGER.warning("Spot %r: %d timer tick(s) skipped: this node's lease deadline "
                           "passed before a renewal", self.spot_id, len(due),
                           extra=self.log_fields())
            return
        for tick in due:
            try:
                self.lanes.application.admit(tick, 0)
            except ZLinkError as exc:
                LOGGER.warning("Spot %r: timer tick skipped: %s", self.spot_id, exc,
                               extra=self.log_fields())

    # ------------------------------------------------------------------ the task

    def wake(self) -> bool:
        """Wake the task to look at its state and queue again (at once if it is parked;
        ``True`` then)."""
        self._woken = True
        return super().wake()

    def _will_park(self) -> bool:
        """Whether the task parks now (in this incarnation, its parking slot): not when
        :meth:`wake` was called since ``_woken`` was last cleared (it looks again
        instead)."""
        if self._woken:
            self._woken = False
            return False
        return True

    async def run(self) -> None:
        """The incarnation's task: one turn at a time until closed and released.

        Kept this small on purpose: an idle Spot parks in this very frame, and every
        local or stack slot of it costs each resident Spot 16 bytes (its coroutine and
        the frame object Trio reads from it hold one each; docs/performance.md). The
        decisions are :meth:`_next_step`'s; the rare steps are :meth:`_step_aside`'s.
        """
        self.task = trio.lowlevel.current_task()
        try:
            while True:
                step = self._next_step()
                if step is None:
                    await self.park()
                elif isinstance(step, Turn):
                    await self._run_turn(step)
                elif step is not _LOOK_AGAIN and not await self._step_aside(step):
                    return
        finally:
            self._task_ended()

    def _next_step(self) -> Turn[Work] | _Step | float | None:
        """What the task does next: run a turn; park (``None``) until woken; park until
        a timer's deadline (a float) or woken; or one of the rarer :class:`_Step`."""
        state = self.state
        if state not in _RUNS_TURNS:
            if state not in _TASK_RUNNING:
                return _Step.GONE  # moved to another node: its queue went with it
            # Sealed for a relocation: only lifecycle work runs until it commits or aborts.
            turn = self.lanes.next_lifecycle_turn()
            if turn is None:
                self._woken = False
            return turn
        turn = self.lanes.next_turn()
        if turn is not None:
            return turn
        if state in _CLOSES_WHEN_DRAINED:
            return _Step.DRAINED
        if self.self_close:
            return _Step.SELF_CLOSE
        deadline = self._before_idle()
        if deadline is _NO_WAIT or not self._will_park():
            return _LOOK_AGAIN
        return deadline

    async def _step_aside(self, step: _Step | float) -> bool:
        """Take one of the rarer steps of :meth:`run`; ``False`` once the task ends."""
        if step is _Step.SELF_CLOSE:
            await self._begin_self_close()
        elif step is _Step.DRAINED:
            with trio.CancelScope(shield=True):
                await self._finish()
            return False
        elif step is _Step.GONE:
            return False
        elif not isinstance(step, _Step):
            # A timer's deadline: such a Spot parks here, one frame deeper than run's park.
            with trio.move_on_at(step):
                await self.park()
        return True

    def _task_ended(self) -> None:
        """However the task ends: forget it, and fail what is still queued."""
        self.task = None  # (the task refers to this incarnation: no cycle after it)
        if self.lanes.counts()[0]:  # (most end with nothing queued: no error to build)
            self._fail_queued(Unavailable(
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
            self._fire_due_timers()
            deadline = timers.next_deadline()
        if self.lanes.application.queued or self.state in _CLOSES_WHEN_DRAINED:
            return _NO_WAIT
        return deadline

    async def _run_turn(self, turn: Turn[Work]) -> None:
        """Run ``turn`` and return its reservation."""
        item = turn.item
        if isinstance(item, LifecycleWork):
            try:
                await self._lifecycle_turn(item)
            finally:
                self.lanes.complete(turn.ticket)
            return
        try:
            if isinstance(item, TimerWork):
                if not _lease_passed(self.rt):  # (queued before the deadline passed)
                    await item.run(self.spot_id)
            else:
                ended: float | None = None
                try:
                    ended = await self._run_handler(item, self.rt.run_clock)
                finally:
                    self.last_work_finished_at = (self.rt.run_clock() if ended is None
                                                  else ended)
                first = item.first
                if first is not None:
                    await self._first_handled(first)
        finally:
            self.lanes.complete(turn.ticket)

    async def _lifecycle_turn(self, item: LifecycleWork) -> None:
        """Run one lifecycle turn (``work.LifecycleKind``); no handler runs meanwhile."""
        try:
            if (item.kind is LifecycleKind.BEGIN_CLOSE and self.self_close
                    and not self.admission_sealed):
                await self._begin_self_close()
        finally:
            item.finished()  # (a seal's: the coordinator captures the queue now)

    # ------------------------------------------------------------------ a message's turn

    async def _run_handler(self, item: MessageWork,
                           now: Callable[[], float] = trio.current_time) -> float | None:
        """Run ``item``'s handler and complete its request (module docstring, "A turn").

        ``now`` reads the Trio clock (the task passes the run's clock itself); when it
        is the store clock too (``rt.clock is now``, ``memory://``), one reading serves
        both checks before the turn, and the lease check after it is what this returns:
        the Trio time the turn ended (``None`` when it read none then; the task reads it).
        """
        completion, first, rt = item.completion, item.first, self.rt
        if first is None:
            at = now()
            if completion is not None:
                if completion.done:
                    return None  # the caller's deadline already completed it
                if at >= item.deadline.at:
                    completion.set_error(DeadlineExceeded(
                        f"the request to Spot {self.spot_id!r} waited in its queue past its "
                        "deadline and was not run; use a longer .timeout() or send less work"
                    ))
                    return None
            if (at if rt.clock is now else rt.clock()) >= rt.lease_expires_at:
                self._refuse_past_lease(item, "was not run")
                return None
        try:
            if item.trace is not None:
                result: Any = await self._traced(item)
            elif observers.OBSERVERS:
                result = await self._observed(item)
            else:
                result = await getattr(self.instance, item.info.name)(item.msg)
        except Exception as exc:
            what = f"handler {self.spot_type.cls.__qualname__}.{item.info.name}"
            if completion is not None:
                completion.set_error(handler_error(what, exc))
            else:
                LOGGER.error("Spot %r: %s raised on a one-way send", self.spot_id, what,
                             exc_info=exc, extra=self.log_fields())
            return None
        if completion is None:
            return None
        mismatch = check_reply(self.spot_type, item.info, result)
        ended = now() if rt.clock is now else None
        if (rt.clock() if ended is None else ended) >= rt.lease_expires_at:
            self._refuse_past_lease(item, "ran, but its effect is lost")
        elif mismatch is None:
            completion.set_result(result)
        else:
            completion.set_error(mismatch)
        return ended

    def _refuse_past_lease(self, item: MessageWork, what: str) -> None:
        """End ``item`` with Unavailable: the owner's lease deadline has passed."""
        error = Unavailable(
            f"Spot {self.spot_id!r}: this node's lease ran out at {self.rt.lease_expires_at} "
            f"before the turn ended (the process was paused or cut off from the store); the "
            f"message {what} and no reply is given, because another node may own the Spot "
            "now. Retry the call: it resolves the current owner"
        )
        if item.completion is not None:
            item.completion.set_error(error)
        else:
            LOGGER.warning("%s", error.message.replace("no reply is given", "it was one-way"),
                           extra=self.log_fields())

    async def _traced(self, item: MessageWork) -> object:
        """Run ``item``'s handler as span ``zlink.handle`` in the call's trace, current
        while the handler runs (``observe.tracing``)."""
        with self.rt.tracing.span(
                "zlink.handle", item.trace,
                kind="server" if item.completion is not None else "consumer", current=True,
                attributes={"zlink.spot_id": self.spot_id, "zlink.mesh": self.mesh,
                            "zlink.spot_type": self.spot_type.stable_type,
                            "zlink.generation": self.generation,
                            "zlink.handler": item.info.name}):
            if observers.OBSERVERS:
                return await self._observed(item)
            return await getattr(self.instance, item.info.name)(item.msg)

    async def _observed(self, item: MessageWork) -> object:
        """Run ``item``'s handler with every observer told (and able to hold it first)."""
        node_id, name, msg = self.rt.node_id, item.info.name, item.msg
        spot_id, generation = self.spot_id, self.generation
        for observer in list(observers.OBSERVERS):
            await observer.before_turn(node_id, spot_id, generation)
        for observer in observers.OBSERVERS:
            observer.turn_began(node_id, spot_id, generation, name, msg)
        try:
            result: object = await getattr(self.instance, name)(msg)
        except Exception as exc:
            for observer in observers.OBSERVERS:
                observer.turn_ended(node_id, spot_id, generation, name, msg, None, exc)
            raise
        for observer in observers.OBSERVERS:
            observer.turn_ended(node_id, spot_id, generation, name, msg, result, None)
        return result

    # ------------------------------------------------------------------ the first record

    @property
    def first_record_settled(self) -> bool:
        """Whether no first-record cleanup of a cold activation is pending (its step 12)."""
        return self.first_record is None or self.first_record.done

    async def wait_first_record(self) -> None:
        """Wait until the first record's cleanup ran (done or failed); the caller bounds it."""
        cleanup = self.first_cleanup
        if isinstance(cleanup, _NoWaiter):
            cleanup = self.first_cleanup = trio.Event()
        if cleanup is not None:
            await cleanup.wait()

    async def _first_handled(self, first: FirstRecord) -> None:
        """After the restored first record's turn: record its completion."""
        if self.ownership_lost:
            return
        if crash_points.ARMED:
            crash_points.point("cold", "after_first_handler_before_completion",
                               self.rt.node_id)
        await record_first_completion(self.rt, self.spot_id, self.generation, first)
        self._first_settled(first)

    def _first_settled(self, first: FirstRecord) -> None:
        if first.done and self.first_record is first:
            self.first_record = None  # nothing left to clean up at close (``drop_recovery``)
        if self.first_cleanup is not None:
            self.first_cleanup.set()
            self.first_cleanup = None

    # ------------------------------------------------------------------ close requests

    def request_self_close(self) -> None:
        """``ctx.close()``: begin the close after the current turn (lifecycle work).

        Raises CapacityExceeded (``lane="lifecycle"``) when the lifecycle lane is full;
        nothing changes then.
        """
        if not self.admission_sealed and not self.self_close:
            self.admit_lifecycle(LifecycleWork(LifecycleKind.BEGIN_CLOSE))
            self.self_close = True

    def request_close(self, reason: CloseReason, fence: AuthorityFence) -> None:
        """Seal admission for a close whose BeginClose succeeded; merges with a running one."""
        event = (INCARNATION.ev.begin_idle_eviction if reason is CloseReason.IDLE_EVICTED
                 else INCARNATION.ev.begin_close)
        if self.close_reason is not None or not INCARNATION.allows(self.state, event):
            return
        self.end_relay_wait()  # accepted work runs before the close
        self.state = step(INCARNATION, self.state, event)
        self.close_reason = reason
        self.close_fence = fence
        self.wake()

    def lose_ownership(self, error: Unavailable) -> None:
        """The node lost its lease: seal, fail queued work with ``error``, cancel timers.

        The task then finishes the running turn, runs ``on_close(OWNERSHIP_LOST)`` once
        (unless a close already started its ``on_close``) and leaves the catalog without
        writing to the store. Synchronous; idempotent.
        """
        if self.ownership_lost or self.state not in _TASK_RUNNING:
            return
        self.ownership_lost = True
        if self.move is not None:  # the move cannot go on without a lease
            self.unseal()
        if INCARNATION.allows(self.state, INCARNATION.ev.begin_close):
            self.state = step(INCARNATION, self.state, INCARNATION.ev.begin_close)
        if not self.cleanup_started:
            self.close_reason = CloseReason.OWNERSHIP_LOST
        self.self_close = False
        self.timers.cancel_all()
        self.end_relay_wait()
        self._fail_queued(error)
        self.wake()

    async def _begin_self_close(self) -> None:
        """``ctx.close()``'s BeginClose, after the turn that asked for it (by the task)."""
        if self.state in _HOLDS_INGRESS:
            return  # the relocation that sealed behind the turn sees it and aborts
        self.self_close = False
        if not INCARNATION.allows(self.state, INCARNATION.ev.begin_close):
            return
        rt = self.rt
        record = None
        with trio.move_on_after(rt.options.default_timeout):
            try:
                record = await rt.store.location.begin_close(
                    self.spot_id, object_generation=self.generation, owner=rt.owner,
                    now=rt.now())
            except ZLinkError as exc:
                LOGGER.warning("Spot %r: ctx.close() could not begin: %s", self.spot_id, exc,
                               extra=self.log_fields())
        if record is not None:
            self.request_close(CloseReason.CLOSED, record.fence())

    # ------------------------------------------------------------------ closing

    def leave_catalog(self) -> None:
        """Leave the catalog and drop the cached route, in one continuation."""
        if self.unregister is not None:
            self.unregister(self)
        self.rt.route_cache.invalidate(self.spot_id)

    async def _finish(self) -> None:
        """All accepted work is done: cleanup once, release, unregister.

        Without ownership (the node lost its lease) nothing is written to the store.
        """
        reason = self.close_reason
        assert reason is not None
        self.timers.cancel_all()
        self.cleanup_started = True
        await run_on_close(self.spot_type, self.instance, self.spot_id, reason)
        self._observe_close(reason)
        fence = self.close_fence
        if not self.ownership_lost and fence is not None:
            await self._bounded("Release", lambda: self.rt.store.location.release(fence))
        self.leave_catalog()
        self.state = step(INCARNATION, self.state, INCARNATION.ev.dispose)
        self._set_finished()
        incarnation_closed(self.rt.node_id, self.rt.metrics, reason.value, self.spot_id,
                           self.mesh, self.generation)
        if not self.ownership_lost:  # else inbox and root stay as evidence for the operator
            first = self.first_record
            await self._bounded("recovery cleanup", lambda: drop_recovery(
                self.rt, self.spot_id, self.generation, first))

    async def moved_away(self) -> None:
        """After a committed relocation: ``on_close(RELOCATED)`` once, then ``finished``."""
        self.cleanup_started = True
        await run_on_close(self.spot_type, self.instance, self.spot_id, CloseReason.RELOCATED)
        self._observe_close(CloseReason.RELOCATED)
        self._set_finished()
        incarnation_closed(self.rt.node_id, self.rt.metrics, CloseReason.RELOCATED.value,
                           self.spot_id, self.mesh, self.generation)

    def _observe_close(self, reason: CloseReason) -> None:
        if self.writes is not None:
            self.writes.end()
        if observers.OBSERVERS and self.instance is not None:
            for observer in observers.OBSERVERS:
                observer.closed(self.rt.node_id, self.spot_id, self.generation, reason)

    async def _bounded(self, what: str, call: Callable[[], Awaitable[object]]) -> None:
        """One store call of the (shielded) cleanup, bounded by ``default_timeout``; logged."""
        timeout = self.rt.options.default_timeout
        with trio.move_on_after(timeout) as scope:
            try:
                await call()
            except ZLinkError as exc:
                LOGGER.error("Spot %r: %s failed: %s", self.spot_id, what, exc,
                             extra=self.log_fields())
        if scope.cancelled_caught:
            LOGGER.error("Spot %r: %s got no answer from the store within %s s; the record "
                         "stays until an operator cleans it up", self.spot_id, what, timeout,
                         extra=self.log_fields())

    def _fail_queued(self, error: Unavailable) -> None:
        """Complete every queued request with ``error`` without running it (sends are
        dropped and logged); no caller may wait for a turn that never comes."""
        dropped = 0
        lanes = self.lanes
        while (turn := lanes.next_turn()) is not None:
            if isinstance(turn.item, LifecycleWork):
                turn.item.finished()
            elif isinstance(turn.item, MessageWork):
                if turn.item.completion is not None:
                    turn.item.completion.set_error(error)
                else:
                    dropped += 1
            lanes.complete(turn.ticket)
        if dropped:
            LOGGER.warning("Spot %r: %d queued one-way send(s) were not run: %s",
                           self.spot_id, dropped, error, extra=self.log_fields())

    # ------------------------------------------------------------------ moving

    def seal_for_relocation(self) -> None:
        """Seal admission into the move's hold; no application turn runs and no timer
        fires from now on. The seal is lifecycle work: its turn (the first moment no
        handler runs) is what :meth:`wait_no_turn` waits for. Raises CapacityExceeded
        (``lane="lifecycle"``) when the lifecycle lane is full; nothing changes then."""
        move = self.move
        assert move is not None
        self.admit_lifecycle(LifecycleWork(LifecycleKind.SEAL, move.seal_turn))
        self.end_relay_wait()  # what waited moves on with the queue, ahead of the hold
        self.state = step(INCARNATION, self.state, INCARNATION.ev.seal_for_relocation)

    async def wait_no_turn(self) -> None:
        """Wait until the turn that was running at the seal has finished: the seal's
        lifecycle turn ran (the caller bounds it)."""
        move = self.move
        assert move is not None
        await move.seal_turn.wait()

    def unseal(self) -> list[tuple[Any, int]]:
        """Abort before relay-ready: serve again, the hold queued behind the captured work.

        Returns what was held (now queued). Idempotent once unsealed.
        """
        move = self.move
        assert move is not None
        if INCARNATION.allows(self.state, INCARNATION.ev.abort_relocation):
            self.state = step(INCARNATION, self.state, INCARNATION.ev.abort_relocation)
        held, move.hold = move.hold, []
        lane = self.lanes.application
        for work, size in held:
            lane.append_unbounded(work, size)  # accepted already: never refused now
        self.wake()
        return held

    def strand(self, why: str) -> None:
        """Past relay-ready, the target did not commit in time: end the hold, refuse ingress.

        The source never serves again and the Spot is unavailable until the target
        commits (a restart of it included), so holding without end would only turn each
        caller's wait into a DeadlineExceeded: each held request gets ``Unavailable(why)``
        now and :meth:`admission` refuses new ingress the same way.
        :meth:`finish_relocation` still runs at the commit.
        """
        move = self.move
        assert move is not None
        move.stranded = why
        held, move.hold = move.hold, []
        for work, _size in held:
            if work.completion is not None:
                work.completion.set_error(Unavailable(why))

    def finish_relocation(self) -> tuple[list[Any], list[tuple[Any, int]]]:
        """The relocation committed: dispose of the source incarnation, no store write.

        Returns the queued work that left with the payload (oldest first) and the hold
        (arrival order), for the coordinator to account for and relay.
        """
        move = self.move
        assert move is not None
        self.state = step(INCARNATION, self.state, INCARNATION.ev.commit_relocation)
        moved = self.lanes.application.take_queued()
        self.timers.cancel_all()
        held, move.hold = move.hold, []
        self.leave_catalog()
        self.wake()  # its task sees ``disposed`` and returns
        return moved, held

"""Cold activation, target side: from the activation envelope to the first message.

Theory of operation
-------------------
The source side (:mod:`.placement`) chose this node and handed it an
:class:`ActivationJob`; :func:`run_activation` runs it as a catalog task under the
operation's single deadline, stepping the ``ColdActivation`` chart:

9.  The target re-reads the store and checks the local ceiling.  An owner that exists
    now (Ready, Creating or Closing) means another attempt won: the first message is
    handed back to the resolver (``redeliver``), which delivers it exactly once to the
    current owner once it is Ready, or competes again if the authority went Missing.
    When the source is this node and its own ``find`` just saw Missing
    (``source_saw_missing``), the re-read is skipped: it would repeat that read, and
    Reserve checks the authority atomically anyway -- an owner that appeared since
    refuses it with ``AuthorityExists`` and the message is handed back exactly as here
    (the root stored for nothing is deleted).
10. The complete envelope (operation ID, Spot ID, type, Mesh, message type name and
    body, deadline) becomes an immutable recovery root; Reserve records its receipt as
    the recovery pointer.  Losing Reserve deletes our root and redelivers as in 9.
11. The factory and ``on_activate`` run once; the envelope becomes the first record
    of the durable activation inbox (seq 1); CommitReady; then, in the same
    synchronous continuation, the host is registered in the catalog (route included),
    the first record is pushed to the head of its queue and the barrier opens.
12. The host runs the first message before anything else and afterwards moves the
    inbox cursor, removes the recovery pointer by expected-version CAS and deletes the
    root (:func:`~zlink_trio.runtime.incarnation.first_record.record_first_completion`).

The store's combined transactions (``store.combined``, see
``zlink_trio.store.protocol``) group the steps: root + Reserve (a refused Reserve
leaves no root), first inbox record + CommitReady (the record is durable exactly when
the authority is Ready), and step 12's three writes -- one transaction each where both
stores live in one backend, the separate calls otherwise (``zlink_trio.store.separate``).

Store writes (root, Reserve, first record, CommitReady, AbortCreating) are shielded from
the deadline so none is cut in half; the deadline is honoured while the factory runs,
and any failure after Reserve aborts the creation with the same fence and deletes the
root (a creation that fails midway leaves the ID Missing).  A factory/hook exception
reaches the caller as :class:`HandlerError`; ``on_close(ACTIVATION_FAILED)`` runs once
if the instance was constructed.

One algorithm, two drivers
--------------------------
:func:`_activate` is the one copy of steps 9-11 -- ceiling, re-read, root + Reserve,
factory and hooks, first record + CommitReady, publish, and the cleanup of a failure --
and :class:`_Driving` says how a run performs them:

* :func:`run_activation`, the async driver, runs a job as a catalog task on every
  store (``TASK``): each store write in a shield of its own, everything under the
  operation's deadline.  For a job whose source saw Missing and a type whose hooks are
  synchronous, with no crash point armed (:func:`runs_inline`), nothing between
  Reserve and CommitReady awaits but the two store writes, so one shield covers those
  steps and no deadline scope is opened; only a redelivery runs under the deadline
  (``SHIELDED``) -- the same outcome for fewer cancel scopes.
* :func:`activate_inline`, the sync driver, runs such a job in the caller's
  continuation when the store's transactions never suspend (``INLINE``; ``memory://``,
  ``store.combined_protocol.ImmediateTransactions``): the run is a coroutine that ends
  in one ``send``, with no task, no cancel scope and no checkpoint.  Nothing can
  interleave, so no step needs a shield, the deadline cannot pass half-way and no
  other caller can see the attempt.  The one step that must wait -- the cleanup after
  a failure past Reserve (``on_close``, AbortCreating) -- awaits :data:`_HAND_OFF`
  first: the same coroutine then goes on as a catalog task, with an attempt registered
  meanwhile so other local callers wait on it, and the caller's completion gets the
  error when the cleanup is done.  A redelivery is the caller's: it resolves again.
"""

from __future__ import annotations

import enum
import types
from contextlib import nullcontext
from typing import TYPE_CHECKING, Final, TypeVar

import attrs
import trio

from zlink_trio.core.errors import (
    CapacityExceeded,
    DeadlineExceeded,
    TypeMismatch,
    Unavailable,
    ZLinkError,
)
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import MOVING_STATES, AuthorityRecord, AuthorityState
from zlink_trio.runtime import crash_points
from zlink_trio.runtime.charts import COLD, TRACE, step
from zlink_trio.runtime.coordinators.envelope import envelope_bytes
from zlink_trio.runtime.incarnation.app_calls import activates_synchronously
from zlink_trio.runtime.incarnation.first_record import FirstRecord
from zlink_trio.runtime.incarnation.incarnation import Incarnation
from zlink_trio.runtime.incarnation.work import MessageWork
from zlink_trio.runtime.observe.fields import Operation, spot_fields
from zlink_trio.runtime.observe.logs import ACTIVATION as LOGGER
from zlink_trio.runtime.observe.operations import ObservedOperation
from zlink_trio.store import AuthorityExists

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Generator

    from statecharts.names import ColdActivationEvent, ColdActivationState
    from zlink_trio.core.deadline import Deadline
    from zlink_trio.core.records import ReservationFence, RootReceipt
    from zlink_trio.runtime.calls.completion import Completion
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.declaration.handlers import HandlerInfo
    from zlink_trio.runtime.declaration.spot_types import SpotType
    from zlink_trio.runtime.incarnation.catalog import Attempt
    from zlink_trio.store import CombinedTransactions
    from zlink_trio.store.combined_protocol import ImmediateTransactions
    from zlink_trio.wire.codec import EncodedMessage

__all__ = ("ActivationJob", "abort_creation", "activate_inline", "end_attempt", "fail_job",
           "run_activation", "runs_inline", "without_suspending")

_T = TypeVar("_T")


@attrs.define(eq=False)
class ActivationJob:
    """One activation envelope accepted by this node as the target."""

    rt: NodeRuntime
    #: This node's creation attempt (``None`` while :func:`activate_inline` runs it:
    #: nothing can interleave, so no other caller needs to wait on it).
    attempt: Attempt | None
    spot_type: SpotType
    info: HandlerInfo
    mesh: str
    spot_id: str
    msg: object
    size: int
    completion: Completion | None
    deadline: Deadline
    op_id: str
    #: ColdActivation state id.
    state: ColdActivationState
    #: Hands the first message back to the resolver when another attempt owns the ID.
    redeliver: Callable[[], Awaitable[None]]
    #: The source is this node and its ``find`` saw the ID Missing just before it took
    #: the local attempt: the target's re-read (step 9) would repeat it, so it is
    #: skipped; Reserve's ``AuthorityExists`` still reports any owner that won since.
    source_saw_missing: bool = False
    #: The first message as the codec encoded it, if the caller has it (the envelope
    #: carries it; else it is encoded again).
    encoded: EncodedMessage | None = None
    delivered: bool = False
    #: The first message was handed back to the resolver (another attempt owns the ID).
    redelivered: bool = False
    #: The trace context of the call that activates (``observe.tracing``): the parent of
    #: the activation's span and of its first message's turn. ``None``: untraced.
    trace: object | None = None
    #: The observation of this activation (metrics and its log record).
    observed: ObservedOperation = attrs.field(init=False)


def _fields(job: ActivationJob, generation: int | None) -> dict[str, object]:
    return spot_fields(job.spot_id, node_id=job.rt.node_id, mesh=job.mesh,
                       generation=generation, operation=Operation.COLD_ACTIVATION)


def fail_job(job: ActivationJob, error: BaseException) -> None:
    """The activation ended with ``error``: the caller's completion gets it (or, for a
    one-way send, it is logged)."""
    job.observed.failed(error)
    if job.completion is not None:
        job.completion.set_error(error)
    else:
        LOGGER.error("cold activation of Spot %r for a one-way send failed: %s",
                     job.spot_id, error, extra=_fields(job, None))


def end_attempt(job: ActivationJob) -> None:
    """End this node's creation attempt, if the job holds one (waiters re-read)."""
    if job.attempt is not None:
        job.rt.catalog.end_attempt(job.attempt)


# ---------------------------------------------------------------------- the drivers


class _Driving(enum.Enum):
    """How a run of :func:`_activate` performs its steps (see the module docstring)."""

    #: A job task under the operation's deadline, each store write shielded on its own.
    TASK = enum.auto()
    #: A job task whose source saw Missing, of a type :func:`runs_inline` accepts:
    #: Reserve..CommitReady in one shield, only a redelivery under the deadline.
    SHIELDED = enum.auto()
    #: :func:`activate_inline`: the caller's continuation, transactions that never
    #: suspend, no scope; a failure's cleanup goes on in a catalog task, a redelivery is
    #: the caller's.
    INLINE = enum.auto()


_TASK: Final = _Driving.TASK
_SHIELDED: Final = _Driving.SHIELDED
_INLINE: Final = _Driving.INLINE


def runs_inline(spot_type: SpotType) -> bool:
    """Whether, for a job whose source (this node) saw the ID Missing, nothing between
    Reserve and CommitReady awaits but the store's two writes: the type's hooks are
    synchronous and no crash point is armed. On a store whose transactions never
    suspend such a job may run in its caller's continuation (:func:`activate_inline`)."""
    return not crash_points.ARMED and activates_synchronously(spot_type)


async def run_activation(job: ActivationJob) -> None:
    """Run one cold activation to its end as a catalog task; the outcome reaches the
    job's completion (the async driver).

    Observed as one ``cold_activation``: ``activated`` (this attempt built it),
    ``redelivered`` (another attempt owns the ID; the message went there) or the error.
    """
    driving = _SHIELDED if job.source_saw_missing and runs_inline(job.spot_type) else _TASK
    await _run(job, driving, job.rt.store.combined)


def activate_inline(job: ActivationJob, transactions: ImmediateTransactions) -> bool:
    """Run a job whose source saw Missing, of a type :func:`runs_inline` accepts, in the
    caller's continuation on ``transactions`` that never suspend (the sync driver; see
    the module docstring).

    ``False``: another attempt owns the ID (the chart took ``reserve_lost_*``): the
    caller resolves again, as a job task redelivers. ``True`` otherwise: activated,
    failed (the completion has the error), or failed after Reserve with its cleanup
    handed to a catalog task (which gives the completion the error when done).
    """
    run = _run(job, _INLINE, transactions)
    try:
        awaited = run.send(None)
    except StopIteration:
        return not job.redelivered
    if awaited is not _HAND_OFF:
        run.close()
        raise _suspended("an inline cold activation")
    # The run awaits _HAND_OFF: what is left must wait, so a catalog task goes on with
    # it, and other local callers wait on this attempt meanwhile.
    job.attempt = job.rt.catalog.begin_attempt(job.spot_id)
    job.rt.catalog.start_job(lambda: _go_on(run))
    return True


def without_suspending(call: Coroutine[object, None, _T]) -> _T:
    """What ``call``, a coroutine that never suspends (``ImmediateTransactions``),
    returns, driven to its end in the caller's continuation."""
    try:
        call.send(None)
    except StopIteration as done:
        result: _T = done.value
        return result
    call.close()
    raise _suspended(repr(call))


def _suspended(what: str) -> RuntimeError:
    return RuntimeError(f"{what} suspended where nothing may: only transactions that never "
                        "suspend and types runs_inline() accepts run in the caller's "
                        "continuation")


class _HandOff:
    """What an inline run awaits where it must wait (see :func:`activate_inline`)."""

    __slots__ = ()

    def __await__(self) -> Generator[_HandOff, None, None]:
        yield self  # to activate_inline's ``send``, never to Trio


_HAND_OFF: Final = _HandOff()


@types.coroutine
def _resumed(run: Coroutine[object, None, None]) -> Generator[object, object, None]:
    # ``yield from`` resumes the run where it awaited _HAND_OFF, then passes every trap
    # it yields to Trio and every answer back, in the task that awaits this.
    yield from run


async def _go_on(run: Coroutine[object, None, None]) -> None:
    """A catalog task: the rest of an inline run that handed itself off."""
    await _resumed(run)


async def _run(job: ActivationJob, driving: _Driving,
               transactions: CombinedTransactions) -> None:
    """One run of :func:`_activate`, observed, its outcome given to the job's completion."""
    with ObservedOperation(job.rt.node_id, job.rt.metrics, Operation.COLD_ACTIVATION,
                           job.spot_id, job.mesh, job.rt.tracing, job.trace) as job.observed:
        try:
            if driving is _TASK:
                with trio.move_on_at(job.deadline.at) as scope:
                    await _activate(job, driving, transactions)
                _check_deadline(job, scope)
            else:  # no deadline scope: nothing but a redelivery waits on the deadline
                await _activate(job, driving, transactions)
        except ZLinkError as error:
            fail_job(job, error)
        finally:
            if not job.delivered and job.rt.lease_lost:  # cancelled by the lost lease
                fail_job(job, job.rt.lease_lost_error())
            end_attempt(job)


def _check_deadline(job: ActivationJob, scope: trio.CancelScope) -> None:
    if scope.cancelled_caught and not job.delivered:
        fail_job(job, DeadlineExceeded(
            f"cold activation of Spot {job.spot_id!r} did not finish before the "
            "call's deadline; it may or may not have been created. Use a longer "
            ".timeout()"
        ))


# ---------------------------------------------------------------------- the algorithm


async def _activate(job: ActivationJob, driving: _Driving,
                    transactions: CombinedTransactions) -> None:
    """Steps 9-11 (see the module docstring), performed as ``driving`` says."""
    rt = job.rt
    # Inline, placement placed the Spot here in this same continuation only below the
    # ceiling (``placement.inline_job``): the same rule on the same counts, so no check.
    if driving is not _INLINE:
        try:
            rt.catalog.check_ceiling()
        except CapacityExceeded:
            job.state = step(COLD, job.state, COLD.ev.over_ceiling)
            raise
    if not job.source_saw_missing:
        record = await rt.store.location.find(job.spot_id)
        if record is not None:
            if not record.matches(SpotKind.INSTANCE, job.spot_type.stable_type):
                job.state = step(COLD, job.state, COLD.ev.owner_type_mismatch)
                raise _mismatch(record, job)
            ready = record.state is AuthorityState.READY or record.state in MOVING_STATES
            await _redeliver(job, COLD.ev.owner_ready if ready else COLD.ev.owner_creating,
                             driving)
            return
    walk = _walk(job.state)  # (the steps of _PATH below: ``walk[i]``, or stepped)
    job.state = walk[0] if walk else step(COLD, job.state, COLD.ev.owner_missing)
    rt.catalog.pending += 1
    try:
        if driving is _SHIELDED:  # nothing in it awaits but the two store writes
            with trio.CancelScope(shield=True):
                lost = await _reserve_and_build(job, driving, transactions, walk)
            if lost is not None:
                with trio.move_on_at(job.deadline.at) as scope:
                    await _redeliver(job, lost, driving)
                _check_deadline(job, scope)
        else:
            lost = await _reserve_and_build(job, driving, transactions, walk)
            if lost is not None:
                await _redeliver(job, lost, driving)
    finally:
        rt.catalog.pending -= 1


async def _redeliver(job: ActivationJob, event: ColdActivationEvent,
                     driving: _Driving) -> None:
    """Another attempt owns the ID: hand the first message back to the resolver."""
    job.state = step(COLD, job.state, event)
    job.observed.outcome = "redelivered"
    job.redelivered = True
    end_attempt(job)
    if driving is not _INLINE:  # inline, activate_inline's caller resolves again
        await job.redeliver()
    # Only now: a redelivery cut short by the deadline must still be reported (a one-way
    # send was acknowledged at admission), not dropped as if it had been handed over.
    job.delivered = True


def _reserve_lost_event(job: ActivationJob, exc: AuthorityExists) -> ColdActivationEvent:
    """The event of a Reserve another attempt won; TypeMismatch if it is another type."""
    current = exc.current
    if not current.matches(SpotKind.INSTANCE, job.spot_type.stable_type):
        job.state = step(COLD, job.state, COLD.ev.reserve_refused_type)
        raise _mismatch(current, job) from None
    return (COLD.ev.reserve_lost_ready if current.state is AuthorityState.READY
            else COLD.ev.reserve_lost_creating)


def _mismatch(record: AuthorityRecord, job: ActivationJob) -> TypeMismatch:
    return TypeMismatch(
        f"Spot {record.spot_id!r} exists as {record.kind.name.title()} Spot type "
        f"{record.stable_type!r}, not Instance type {job.spot_type.stable_type!r}; call it "
        "without instance_spot() or with its own type"
    )


#: The ColdActivation events of a run that publishes, in order, from the target's
#: check of the owner (the failure and redelivery events step from where they occur).
_PATH: Final = (COLD.ev.owner_missing, COLD.ev.root_stored, COLD.ev.reserve_won,
                COLD.ev.factory_initialized, COLD.ev.first_record_durable,
                COLD.ev.commit_ready, COLD.ev.route_registered, COLD.ev.queue_head_restored)
#: The state after each event of :data:`_PATH`, per start state: the chart is a table,
#: so the path is stepped once per start state and each step of a run is an index.
_WALKS: dict[ColdActivationState, tuple[ColdActivationState, ...]] = {}


def _walk(start: ColdActivationState) -> tuple[ColdActivationState, ...] | None:
    """The states :data:`_PATH` goes through from ``start``; ``None`` while a test
    observes every step (``charts.TRACE``): then each is stepped as it is taken."""
    if TRACE:
        return None
    walk = _WALKS.get(start)
    if walk is None:
        states, state = [], start
        for event in _PATH:
            state = step(COLD, state, event)
            states.append(state)
        walk = _WALKS[start] = tuple(states)
    return walk


async def _reserve_and_build(job: ActivationJob, driving: _Driving,
                             transactions: CombinedTransactions,
                             walk: tuple[ColdActivationState, ...] | None
                             ) -> ColdActivationEvent | None:
    """Root + Reserve, factory and hooks, first record + CommitReady, publish.

    Returns the event of a Reserve another attempt won (the caller redelivers, under
    the deadline); ``None`` once published.
    """
    rt = job.rt
    # The complete activation envelope as compact JSON: the recovery root's bytes.
    envelope = envelope_bytes(
        job.op_id, job.spot_id, job.spot_type.stable_type, job.mesh, str(rt.node_rid),
        job.encoded if job.encoded is not None else rt.codec.encode(job.msg),
        job.deadline.wall_ms)
    # One call covers both chart steps (one transaction on every built-in store); a
    # refused Reserve leaves no root (the store deletes one it stored).
    job.state = walk[1] if walk else step(COLD, job.state, COLD.ev.root_stored)
    try:
        with job.observed.step("zlink.reserve"):
            fence, receipt = await _write(driving, transactions.reserve_with_root(
                job.spot_id, envelope, kind=SpotKind.INSTANCE,
                stable_type=job.spot_type.stable_type, mesh=job.mesh, owner=rt.owner,
                now=rt.now()))
    except AuthorityExists as exc:
        return _reserve_lost_event(job, exc)
    except CapacityExceeded:
        job.state = step(COLD, job.state, COLD.ev.reserve_refused_capacity)
        raise
    if crash_points.ARMED:
        crash_points.point("cold", "after_reserve", rt.node_id)
    job.state = walk[2] if walk else step(COLD, job.state, COLD.ev.reserve_won)
    host = Incarnation(rt, job.spot_type, job.spot_id, fence.object_generation, job.mesh)
    try:
        with job.observed.step("zlink.factory"):
            await host.build()
    except BaseException as exc:
        event = (COLD.ev.deadline_expired if isinstance(exc, trio.Cancelled)
                 else COLD.ev.factory_failed)
        job.state = step(COLD, job.state, event)
        await _abandon(job, driving, host, fence, receipt)
        raise
    job.state = walk[3] if walk else step(COLD, job.state, COLD.ev.factory_initialized)
    try:
        if crash_points.ARMED:
            crash_points.point("cold", "after_factory_before_commit", rt.node_id)
        rt.check_usable()  # no CommitReady once the lease is known lost
        # The first record is durable (at the latest) when the authority is Ready.
        with job.observed.step("zlink.commit"):
            ready, seq = await _write(driving, transactions.commit_ready_with_first_record(
                fence, envelope, now=rt.now()))
        job.state = walk[4] if walk else step(COLD, job.state, COLD.ev.first_record_durable)
    except ZLinkError as exc:
        await _abandon(job, driving, host, fence, receipt)
        raise Unavailable(
            f"cold activation of Spot {job.spot_id!r} lost its reservation before Ready "
            f"({exc.message}); nothing was created. Send a new call"
        ) from exc
    if crash_points.ARMED:
        crash_points.point("cold", "after_ready_before_restore", rt.node_id)
    _publish(job, host, ready, seq, receipt, walk)
    return None


async def _write(driving: _Driving, write: Awaitable[_T]) -> _T:
    """A store write: shielded on its own in a plain job task (``TASK``); otherwise
    nothing can cut it in half (inside the steps' shield, or nothing suspends)."""
    if driving is _TASK:
        with trio.CancelScope(shield=True):
            return await write
    return await write


async def _abandon(job: ActivationJob, driving: _Driving, host: Incarnation,
                   fence: ReservationFence, receipt: RootReceipt) -> None:
    """A failure after Reserve: ``on_close(ACTIVATION_FAILED)``, AbortCreating, the
    inbox and the root, shielded: the ID is left Missing."""
    if driving is _INLINE:
        await _HAND_OFF  # from here on in a catalog task, where the cleanup may wait
    with nullcontext() if driving is _SHIELDED else trio.CancelScope(shield=True):
        await host.activation_failed()
        await abort_creation(job, fence, receipt)


def _publish(job: ActivationJob, host: Incarnation, ready: AuthorityRecord, seq: int,
             receipt: RootReceipt, walk: tuple[ColdActivationState, ...] | None) -> None:
    """CommitReady succeeded: route, queue head and barrier in one continuation.

    Nothing can run between the commit and the registration, so a Spot that is Ready in
    the store is reachable here at once and its first message runs before any other.
    """
    job.state = walk[5] if walk else step(COLD, job.state, COLD.ev.commit_ready)
    job.observed.outcome, job.observed.generation = "activated", host.generation
    first = FirstRecord(seq=seq, ready_version=ready.store_version, receipt=receipt)
    host.open(MessageWork(job.msg, job.info, job.completion, job.deadline, first=first,
                          trace=job.trace))
    job.rt.catalog.register(host)
    job.state = walk[6] if walk else step(COLD, job.state, COLD.ev.route_registered)
    job.state = walk[7] if walk else step(COLD, job.state, COLD.ev.queue_head_restored)
    first.state = job.state
    job.delivered = True
    end_attempt(job)


async def abort_creation(job: ActivationJob, fence: ReservationFence, receipt: RootReceipt) -> None:
    """AbortCreating with the same fence, drop the inbox and the root (shielded caller).

    After a lost lease nothing is written: the Creating record, inbox and root stay
    for the operator's cleanup (an owner without a lease changes no authority).
    """
    rt = job.rt
    if rt.lease_lost:
        LOGGER.error("Spot %r: creation abandoned after the lease was lost; its Creating "
                     "record stays until an operator cleans it up", job.spot_id,
                     extra=_fields(job, fence.object_generation))
        return
    try:
        await rt.store.location.abort_creating(fence)
        await rt.store.relocation.inbox_drop(job.spot_id, fence.object_generation)
        await rt.store.relocation.delete_root(receipt)
    except ZLinkError as exc:
        LOGGER.error("Spot %r: cleanup of a failed activation failed: %s", job.spot_id, exc,
                     extra=_fields(job, fence.object_generation))
    if COLD.allows(job.state, COLD.ev.abort_creating):
        job.state = step(COLD, job.state, COLD.ev.abort_creating)

"""Cold activation, target side: from the activation envelope to the first message (06 §4.1).

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

On a store with synchronous transactions (``store.immediate``: ``memory://``) and a
type whose activation hooks are synchronous, :mod:`.activation_now` runs the same
steps in the caller's continuation, with nothing awaited, sharing this module's
synchronous steps (:func:`publish`, :func:`reserve_lost_event`, :func:`fail_job`, ...).

Store writes (root, Reserve, first record, CommitReady, AbortCreating) are shielded
from the deadline so none is cut in half; the deadline is honoured while the factory
runs (for a job whose source saw Missing and a type whose hooks are synchronous,
nothing between Reserve and CommitReady awaits but those writes, so with no crash point
armed one shielded scope covers the steps and no deadline scope is opened -- the same
outcome), and any failure after Reserve aborts the creation with the same fence and
deletes the root (09 §3 "If Creation Fails Midway").  A factory/hook exception reaches the
caller as :class:`HandlerError`; ``on_close(ACTIVATION_FAILED)`` runs once if the
instance was constructed.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Final

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
from zlink_trio.runtime.charts import COLD, step
from zlink_trio.runtime.coordinators.envelope import ActivationEnvelope
from zlink_trio.runtime.incarnation.app_calls import activates_synchronously
from zlink_trio.runtime.incarnation.first_record import FirstRecord
from zlink_trio.runtime.incarnation.incarnation import Incarnation
from zlink_trio.runtime.incarnation.work import MessageWork
from zlink_trio.runtime.observe.fields import Operation, spot_fields
from zlink_trio.runtime.observe.logs import ACTIVATION as LOGGER
from zlink_trio.runtime.observe.operations import observe_operation
from zlink_trio.store import AuthorityExists

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from statecharts.names import ColdActivationEvent, ColdActivationState
    from zlink_trio.core.deadline import Deadline
    from zlink_trio.core.records import ReservationFence, RootReceipt
    from zlink_trio.runtime.calls.completion import Completion
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.declaration.handlers import HandlerInfo
    from zlink_trio.runtime.declaration.spot_types import SpotType
    from zlink_trio.runtime.incarnation.catalog import Attempt
    from zlink_trio.runtime.observe.operations import ObservedOperation
    from zlink_trio.wire.codec import EncodedMessage

__all__ = ("ActivationJob", "abort_creation", "commit_refused", "encode_envelope", "end_attempt",
           "fail_job", "publish", "reserve_lost_event", "run_activation")


@attrs.define(eq=False)
class ActivationJob:
    """One activation envelope accepted by this node as the target."""

    rt: NodeRuntime
    #: This node's creation attempt (``None`` while :func:`activate_now` runs it: nothing
    #: can interleave, so no other caller needs to wait on it).
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
    #: The observation of this activation (metrics and its log record).
    observed: ObservedOperation = attrs.field(init=False)


def encode_envelope(job: ActivationJob) -> bytes:
    """The complete activation envelope as compact JSON (the recovery root's bytes)."""
    return ActivationEnvelope(
        operation_id=job.op_id, spot_id=job.spot_id, stable_type=job.spot_type.stable_type,
        mesh=job.mesh, recorded_by=str(job.rt.node_rid),
        message=job.encoded if job.encoded is not None else job.rt.codec.encode(job.msg),
        deadline_ms=job.deadline.wall_ms).encode()


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


async def run_activation(job: ActivationJob) -> None:
    """Run one cold activation to its end; the outcome reaches the job's completion.

    Observed as one ``cold_activation``: ``activated`` (this attempt built it),
    ``redelivered`` (another attempt owns the ID; the message went there) or the error.
    """
    with observe_operation(job.rt.node_id, job.rt.metrics, Operation.COLD_ACTIVATION, job.spot_id,
                           job.mesh) as job.observed:
        try:
            if (job.source_saw_missing and not crash_points.ARMED
                    and activates_synchronously(job.spot_type)):
                await _activate_shielded(job)
            else:
                with trio.move_on_at(job.deadline.at) as scope:
                    await _activate(job)
                _check_deadline(job, scope)
        except ZLinkError as error:
            fail_job(job, error)
        finally:
            if job.rt.lease_lost and not job.delivered:  # cancelled by the lost lease
                fail_job(job, job.rt.lease_lost_error())
            end_attempt(job)


def end_attempt(job: ActivationJob) -> None:
    """End this node's creation attempt, if the job holds one (waiters re-read)."""
    if job.attempt is not None:
        job.rt.catalog.end_attempt(job.attempt)


async def _redeliver(job: ActivationJob, event: ColdActivationEvent) -> None:
    job.state = step(COLD, job.state, event)
    job.observed.outcome = "redelivered"
    end_attempt(job)
    await job.redeliver()
    # Only now: a redelivery cut short by the deadline must still be reported (a one-way
    # send was acknowledged at admission), not dropped as if it had been handed over.
    job.delivered = True


async def _activate(job: ActivationJob) -> None:
    rt = job.rt
    try:
        rt.catalog.check_ceiling()
    except CapacityExceeded:
        job.state = step(COLD, job.state, COLD.ev.over_ceiling)
        raise
    record = None if job.source_saw_missing else await rt.store.location.find(job.spot_id)
    if record is not None:
        if not record.matches(SpotKind.INSTANCE, job.spot_type.stable_type):
            job.state = step(COLD, job.state, COLD.ev.owner_type_mismatch)
            raise _mismatch(record, job)
        ready = record.state is AuthorityState.READY or record.state in MOVING_STATES
        await _redeliver(job, COLD.ev.owner_ready if ready else COLD.ev.owner_creating)
        return
    job.state = step(COLD, job.state, COLD.ev.owner_missing)
    rt.catalog.pending += 1
    try:
        lost = await _reserve_and_build(job, _shield)
        if lost is not None:
            await _redeliver(job, lost)
    finally:
        rt.catalog.pending -= 1


async def _activate_shielded(job: ActivationJob) -> None:
    """:func:`_activate` for a job whose source saw Missing (no re-read), a type that
    activates synchronously and no crash point armed.

    Between Reserve and CommitReady nothing but the two store calls awaits, and those
    are shielded either way, so one shielded scope covers all of it and no deadline
    scope is opened (none could fire outside the shield); only a redelivery runs under
    the call's deadline, as on the other path.
    """
    rt = job.rt
    try:
        rt.catalog.check_ceiling()
    except CapacityExceeded:
        job.state = step(COLD, job.state, COLD.ev.over_ceiling)
        raise
    job.state = step(COLD, job.state, COLD.ev.owner_missing)
    rt.catalog.pending += 1
    try:
        with trio.CancelScope(shield=True):
            lost = await _reserve_and_build(job, _inside_shield)
        if lost is not None:
            with trio.move_on_at(job.deadline.at) as scope:
                await _redeliver(job, lost)
            _check_deadline(job, scope)
    finally:
        rt.catalog.pending -= 1


def _check_deadline(job: ActivationJob, scope: trio.CancelScope) -> None:
    if scope.cancelled_caught and not job.delivered:
        fail_job(job, DeadlineExceeded(
            f"cold activation of Spot {job.spot_id!r} did not finish before the "
            "call's deadline; it may or may not have been created. Use a longer "
            ".timeout()"
        ))


def _shield() -> AbstractContextManager[object]:
    """A store write's own shield (the caller's deadline scope is around it)."""
    return trio.CancelScope(shield=True)


def _inside_shield() -> AbstractContextManager[object]:
    """No scope: the whole activation already runs shielded (:func:`_activate_shielded`)."""
    return _NO_SCOPE


_NO_SCOPE: Final = nullcontext()


def reserve_lost_event(job: ActivationJob, exc: AuthorityExists) -> ColdActivationEvent:
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


def _store_root_and_reserve(job: ActivationJob, envelope: bytes
                            ) -> Awaitable[tuple[ReservationFence, RootReceipt]]:
    """Envelope root + Reserve: one call of the store's combined transactions (await it).

    A refused Reserve leaves no root (the store deletes one it stored). A plain function
    returning the store's coroutine: one coroutine frame less on each of its waits.
    """
    rt = job.rt
    # One call covers both chart steps (one transaction on every built-in store).
    job.state = step(COLD, job.state, COLD.ev.root_stored)
    return rt.store.combined.reserve_with_root(
        job.spot_id, envelope, kind=SpotKind.INSTANCE,
        stable_type=job.spot_type.stable_type, mesh=job.mesh, owner=rt.owner,
        now=rt.now())


async def _reserve_and_build(job: ActivationJob,
                             shield: Callable[[], AbstractContextManager[object]]
                             ) -> ColdActivationEvent | None:
    """Root + Reserve, factory and hooks, first record + CommitReady, publish.

    ``shield`` gives the scope each store write runs in. Returns the event of a
    Reserve another attempt won (the caller redelivers, under the deadline); ``None``
    once published.
    """
    rt = job.rt
    envelope = encode_envelope(job)
    reserve_lost: ColdActivationEvent | None = None
    with shield():
        try:
            fence, receipt = await _store_root_and_reserve(job, envelope)
        except AuthorityExists as exc:
            reserve_lost = reserve_lost_event(job, exc)
        except CapacityExceeded:
            job.state = step(COLD, job.state, COLD.ev.reserve_refused_capacity)
            raise
    if reserve_lost is not None:
        return reserve_lost
    if crash_points.ARMED:
        crash_points.point("cold", "after_reserve", rt.node_id)
    job.state = step(COLD, job.state, COLD.ev.reserve_won)
    host = Incarnation(rt, job.spot_type, job.spot_id, fence.object_generation, job.mesh)
    try:
        await host.build()
    except BaseException as exc:
        event = (COLD.ev.deadline_expired if isinstance(exc, trio.Cancelled)
                 else COLD.ev.factory_failed)
        job.state = step(COLD, job.state, event)
        with shield():
            await host.activation_failed()
            await abort_creation(job, fence, receipt)
        raise
    job.state = step(COLD, job.state, COLD.ev.factory_initialized)
    with shield():
        try:
            if crash_points.ARMED:
                crash_points.point("cold", "after_factory_before_commit", rt.node_id)
            rt.check_usable()  # no CommitReady once the lease is known lost
            # The first record is durable (at the latest) when the authority is Ready.
            ready, seq = await rt.store.combined.commit_ready_with_first_record(
                fence, envelope, now=rt.now())
            job.state = step(COLD, job.state, COLD.ev.first_record_durable)
        except ZLinkError as exc:
            await host.activation_failed()
            await abort_creation(job, fence, receipt)
            raise commit_refused(job, exc) from exc
    if crash_points.ARMED:
        crash_points.point("cold", "after_ready_before_restore", rt.node_id)
    publish(job, host, ready, seq, receipt)
    return None


def commit_refused(job: ActivationJob, exc: ZLinkError) -> Unavailable:
    """The caller's error when CommitReady refused with ``exc``."""
    return Unavailable(
        f"cold activation of Spot {job.spot_id!r} lost its reservation before Ready "
        f"({exc.message}); nothing was created. Send a new call"
    )


def publish(job: ActivationJob, host: Incarnation, ready: AuthorityRecord, seq: int,
             receipt: RootReceipt) -> None:
    """CommitReady succeeded: route, queue head and barrier in one continuation (09 §3)."""
    job.state = step(COLD, job.state, COLD.ev.commit_ready)
    job.observed.outcome, job.observed.generation = "activated", host.generation
    first = FirstRecord(seq=seq, ready_version=ready.store_version, receipt=receipt)
    host.open(MessageWork(job.msg, job.info, job.completion, job.deadline, first=first))
    job.rt.catalog.register(host)
    job.state = step(COLD, job.state, COLD.ev.route_registered)
    job.state = step(COLD, job.state, COLD.ev.queue_head_restored)
    first.state = job.state
    job.delivered = True
    end_attempt(job)


async def abort_creation(job: ActivationJob, fence: ReservationFence, receipt: RootReceipt) -> None:
    """AbortCreating with the same fence, drop the inbox and the root (shielded caller).

    After a lost lease nothing is written: the Creating record, inbox and root stay
    for the operator's cleanup (06 §9).
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


"""Cold activation, target side, with nothing awaited (``memory://``, synchronous hooks).

Theory of operation
-------------------
:func:`activate_now` is :func:`.activation.run_activation` for a job whose source saw
the ID Missing in this same continuation, on a store whose transactions are plain
calls (``store.immediate``), for a type whose ``on_activate`` / ``on_create`` are
synchronous (``app_calls.activates_synchronously``), with no crash point armed.  It
takes the same steps of 06 §4.1 in the same order, with the same chart events --
ceiling (checked by ``placement.local_job_now`` in the same continuation), root +
Reserve, factory and hooks (``Incarnation.build_now``), first record + CommitReady, then
route, queue head and barrier (:func:`.activation.publish`) -- in the caller's
continuation: no task, no cancel scope, no checkpoint.  Nothing can interleave, so no
step needs shielding and the deadline cannot pass half-way; no other local caller can
see the attempt, so none is registered.

A failure after Reserve (the factory or a hook raised, CommitReady refused) hands the
cleanup -- ``on_close(ACTIVATION_FAILED)``, AbortCreating, the inbox and the root -- to a
catalog task (:func:`_cleanup`), with an attempt registered meanwhile, exactly as the
task path runs it; the caller's completion gets the error when it is done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.core.errors import CapacityExceeded, ZLinkError
from zlink_trio.core.identity import SpotKind
from zlink_trio.runtime.charts import COLD, TRACE, step
from zlink_trio.runtime.coordinators.activation import (
    abort_creation,
    commit_refused,
    end_attempt,
    fail_job,
    publish,
    reserve_lost_event,
)
from zlink_trio.runtime.coordinators.envelope import envelope_bytes
from zlink_trio.runtime.incarnation.incarnation import Incarnation
from zlink_trio.runtime.observe.fields import Operation
from zlink_trio.runtime.observe.operations import ObservedOperation
from zlink_trio.store import AuthorityExists

if TYPE_CHECKING:
    from statecharts.names import ColdActivationState
    from zlink_trio.core.records import ReservationFence, RootReceipt
    from zlink_trio.runtime.coordinators.activation import ActivationJob
    from zlink_trio.store.immediate import ImmediateTransactions

__all__ = ("activate_now",)

#: The ColdActivation events of the path to CommitReady, in order (``publish`` takes
#: the rest): the owner is Missing, the root is stored with the Reserve, the Reserve is
#: won, the factory and hooks ran, the first record is durable with CommitReady.
_PATH: Final = (COLD.ev.owner_missing, COLD.ev.root_stored, COLD.ev.reserve_won,
                COLD.ev.factory_initialized, COLD.ev.first_record_durable)
#: The state after each event of :data:`_PATH`, per start state: stepped once per start
#: state (the chart is a table), so each step is an index, not a lookup.
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


def activate_now(job: ActivationJob, immediate: ImmediateTransactions) -> bool:
    """``run_activation`` with nothing awaited (see the module docstring).

    For a job whose source saw the ID Missing in this same continuation, on a store
    with ``immediate`` transactions, for a type that activates synchronously, with no
    crash point armed. ``False``: another attempt owns the ID (the chart took
    ``reserve_lost_*``): the caller resolves again, as the task path redelivers.
    """
    job.observed = observed = ObservedOperation(job.rt.node_id, job.rt.metrics,
                                                Operation.COLD_ACTIVATION, job.spot_id,
                                                job.mesh).__enter__()
    handed_off = False
    try:
        result = _activate_now(job, immediate)
        handed_off = result is None
        return True if result is None else result
    except ZLinkError as error:
        fail_job(job, error)
        return True
    finally:
        if not handed_off:
            observed.__exit__(None, None, None)


def _activate_now(job: ActivationJob, immediate: ImmediateTransactions) -> bool | None:
    """The steps of the task path's ``_activate`` and ``_reserve_and_build``, synchronous.

    ``None``: a failure after Reserve was handed to a catalog task (:func:`_cleanup`).
    """
    rt = job.rt
    # (No ``catalog.check_ceiling()``: ``placement.local_job_now`` placed the Spot here in
    # this same continuation only below the ceiling -- the same rule, the same counts.)
    walk = _walk(job.state)  # (the steps below: ``walk[i]``, else ``step`` with TRACE)
    job.state = walk[0] if walk else step(COLD, job.state, COLD.ev.owner_missing)
    # ``activation.encode_envelope(job)``'s bytes, without building the envelope object.
    envelope = envelope_bytes(
        job.op_id, job.spot_id, job.spot_type.stable_type, job.mesh, str(rt.node_rid),
        job.encoded if job.encoded is not None else rt.codec.encode(job.msg),
        job.deadline.wall_ms)
    job.state = walk[1] if walk else step(COLD, job.state, COLD.ev.root_stored)
    try:
        fence, receipt = immediate.reserve_with_root(
            job.spot_id, envelope, kind=SpotKind.INSTANCE,
            stable_type=job.spot_type.stable_type, mesh=job.mesh, owner=rt.owner,
            now=rt.now())
    except AuthorityExists as exc:
        lost = reserve_lost_event(job, exc)
        job.state = step(COLD, job.state, lost)
        job.observed.outcome = "redelivered"
        return False
    except CapacityExceeded:
        job.state = step(COLD, job.state, COLD.ev.reserve_refused_capacity)
        raise
    job.state = walk[2] if walk else step(COLD, job.state, COLD.ev.reserve_won)
    host = Incarnation(rt, job.spot_type, job.spot_id, fence.object_generation, job.mesh)
    try:
        host.build_now()
    except Exception as exc:
        job.state = step(COLD, job.state, COLD.ev.factory_failed)
        _hand_off(job, host, fence, receipt, exc)
        return None
    job.state = walk[3] if walk else step(COLD, job.state, COLD.ev.factory_initialized)
    try:
        rt.check_usable()  # no CommitReady once the lease is known lost
        ready, seq = immediate.commit_ready_with_first_record(fence, envelope, now=rt.now())
        job.state = walk[4] if walk else step(COLD, job.state, COLD.ev.first_record_durable)
    except ZLinkError as exc:
        error = commit_refused(job, exc)
        error.__cause__ = exc
        _hand_off(job, host, fence, receipt, error)
        return None
    publish(job, host, ready, seq, receipt)
    return True


def _hand_off(job: ActivationJob, host: Incarnation, fence: ReservationFence, receipt: RootReceipt,
              error: Exception) -> None:
    """A failure after Reserve: the cleanup runs as a catalog task, as it would in
    ``run_activation``; other local callers wait on the attempt meanwhile."""
    rt = job.rt
    job.attempt = rt.catalog.begin_attempt(job.spot_id)
    rt.catalog.pending += 1
    rt.catalog.start_job(lambda: _cleanup(job, host, fence, receipt, error))


async def _cleanup(job: ActivationJob, host: Incarnation, fence: ReservationFence,
                   receipt: RootReceipt, error: Exception) -> None:
    """``on_close(ACTIVATION_FAILED)``, AbortCreating, then ``error`` reaches the caller."""
    rt = job.rt
    try:
        with trio.CancelScope(shield=True):
            await host.activation_failed()
            await abort_creation(job, fence, receipt)
    finally:
        rt.catalog.pending -= 1
        try:
            if isinstance(error, ZLinkError):
                fail_job(job, error)
            if rt.lease_lost and not job.delivered:
                fail_job(job, rt.lease_lost_error())
        finally:
            end_attempt(job)
            job.observed.__exit__(None, None, None)
    if not isinstance(error, ZLinkError):
        raise error

"""Cold activation, target side, with nothing awaited (``memory://``, synchronous hooks).

Theory of operation
-------------------
:func:`activate_now` is :func:`.activation.run_activation` for a job whose source saw
the ID Missing in this same continuation, on a store whose transactions are plain
calls (``store.immediate``), for a type whose ``on_activate`` / ``on_create`` are
synchronous (``app_calls.activates_synchronously``), with no crash point armed.  It
takes the same steps of 06 §4.1 in the same order, with the same chart events -- ceiling,
root + Reserve, factory and hooks (``Host.build_now``), first record + CommitReady, then
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

from typing import TYPE_CHECKING

import trio

from zlink_trio.core.errors import CapacityExceeded, ZLinkError
from zlink_trio.core.identity import SpotKind
from zlink_trio.runtime.charts import COLD, step
from zlink_trio.runtime.coordinators.activation import (
    abort_creation,
    commit_refused,
    encode_envelope,
    end_attempt,
    fail_job,
    publish,
    reserve_lost_event,
)
from zlink_trio.runtime.incarnation.host import Host
from zlink_trio.runtime.observe.fields import Operation
from zlink_trio.runtime.observe.operations import ObservedOperation
from zlink_trio.store import AuthorityExists

if TYPE_CHECKING:
    from zlink_trio.core.records import ReservationFence, RootReceipt
    from zlink_trio.runtime.coordinators.activation import ActivationJob
    from zlink_trio.store.immediate import ImmediateTransactions

__all__ = ("activate_now",)


def activate_now(job: ActivationJob, immediate: ImmediateTransactions) -> bool:
    """``run_activation`` with nothing awaited (see the module docstring).

    For a job whose source saw the ID Missing in this same continuation, on a store
    with ``immediate`` transactions, for a type that activates synchronously, with no
    crash point armed. ``False``: another attempt owns the ID (the chart took
    ``reserve_lost_*``): the caller resolves again, as the task path redelivers.
    """
    job.observed = observed = ObservedOperation(job.rt, Operation.COLD_ACTIVATION,
                                                job.spot_id, job.mesh).__enter__()
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
    try:
        rt.catalog.check_ceiling()
    except CapacityExceeded:
        job.state = step(COLD, job.state, COLD.ev.over_ceiling)
        raise
    job.state = step(COLD, job.state, COLD.ev.owner_missing)
    envelope = encode_envelope(job)
    job.state = step(COLD, job.state, COLD.ev.root_stored)
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
    job.state = step(COLD, job.state, COLD.ev.reserve_won)
    host = Host(rt, job.spot_type, job.spot_id, fence.object_generation, job.mesh)
    try:
        host.build_now()
    except Exception as exc:
        job.state = step(COLD, job.state, COLD.ev.factory_failed)
        _hand_off(job, host, fence, receipt, exc)
        return None
    job.state = step(COLD, job.state, COLD.ev.factory_initialized)
    try:
        rt.check_usable()  # no CommitReady once the lease is known lost
        ready, seq = immediate.commit_ready_with_first_record(fence, envelope, now=rt.now())
        job.state = step(COLD, job.state, COLD.ev.first_record_durable)
    except ZLinkError as exc:
        error = commit_refused(job, exc)
        error.__cause__ = exc
        _hand_off(job, host, fence, receipt, error)
        return None
    publish(job, host, ready, seq, receipt)
    return True


def _hand_off(job: ActivationJob, host: Host, fence: ReservationFence, receipt: RootReceipt,
              error: Exception) -> None:
    """A failure after Reserve: the cleanup runs as a catalog task, as it would in
    ``run_activation``; other local callers wait on the attempt meanwhile."""
    rt = job.rt
    job.attempt = rt.catalog.begin_attempt(job.spot_id)
    rt.catalog.pending += 1
    rt.catalog.start_job(lambda: _cleanup(job, host, fence, receipt, error))


async def _cleanup(job: ActivationJob, host: Host, fence: ReservationFence,
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

"""The node's lease: keeping it, and stopping the node's Spots when it is lost.

Theory of operation
-------------------
The descriptor claim carries the lease every owner check uses (docs/concepts.md).
:func:`keep_lease` renews it every third of its length (two thirds before the
deadline the last renewal set), as a task of the node's nursery.  The node *learns*
that its lease is gone -- ``NodeLifecycle`` ``lease_expired`` -> ``lease_lost`` -- when

* the store refuses a renewal (StaleFence: the claim was removed or replaced;
  Unavailable: the lease had already expired in the store), or
* no renewal was answered before the lease deadline (each renewal attempt is
  bounded by the time left on the lease, so a hung store cannot hide the loss), or
* a renewal was answered only after the lease deadline had passed (too late: for a
  while this node was no valid owner, and others may have acted on that).

Any other store error is retried (5 ms doubling, at most a tenth of the lease apart)
while lease time remains: an outage that ends before the lease does is always met by
an attempt with room to spare, instead of one last attempt a few milliseconds before
the deadline that a slow reconnect makes too late (found by ``tests/chaos``). The
retries of one renewal are logged as one outage episode (``lowlevel.outage``): a
WARNING at the first failure, a count at most every 30 s, an INFO once it is renewed.

:func:`lose_lease` then stops the lifecycle's work without a single store write (an
expired owner may not admit messages or timers nor update a location; cleaning
up the authority this node held is an operator action):

1. every later call on the node raises :class:`Unavailable` saying the node lost its
   lease and what happens next (``NodeRuntime.check_usable``);
2. cold activations in flight are cancelled (their callers get that Unavailable, and
   their aborts skip the store);
3. every local incarnation seals admission, completes its queued work with that
   Unavailable without running it, cancels its timers, lets its running turn finish
   (withholding its reply if the lease deadline passed first), runs
   ``on_close(OWNERSHIP_LOST)`` once and leaves the catalog
   (``Incarnation.lose_ownership``);
4. once all are gone (bounded by ``default_timeout``) the node steps ``stop`` ->
   ``stopped``.  The lifecycle ends without touching any store record; ``open_node``
   then starts a new lifecycle of the same NodeId as soon as the store answers, or,
   with ``on_lease_lost="raise"``, ends its block with :class:`NodeLost`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.core.errors import StaleFence, StoreUnavailable, Unavailable, ZLinkError
from zlink_trio.lowlevel.outage import Outage
from zlink_trio.runtime.charts import NODE, step
from zlink_trio.runtime.observe.logs import LEASE as LOGGER

if TYPE_CHECKING:
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime

__all__ = ("finish_lease_loss", "keep_lease", "lose_lease", "mark_lease_lost", "wait_stopped")

_FIRST_RETRY: Final = 0.005
_MAX_RETRY: Final = 1.0


async def keep_lease(rt: NodeRuntime) -> None:
    """Renew the lease every third of it until it is lost (then stop the node's Spots)."""
    period = rt.options.lease / 3
    while True:
        # From the lease deadline, not from the last answer: a renewal is stamped when
        # it is sent, so a slow answer must not push the next one later (found by
        # tests/chaos on a loaded machine).
        await trio.sleep(max(rt.lease_expires_at - 2 * period - rt.now(), period / 100))
        why = await _renew(rt)
        if why is not None:
            await lose_lease(rt, why)
            return


def _next_retry(rt: NodeRuntime, retry: float) -> float:
    """The pause before the next renewal attempt: doubling, capped at a tenth of the lease."""
    return min(retry * 2, _MAX_RETRY, rt.options.lease / 10)


async def _renew(rt: NodeRuntime) -> str | None:
    """One renewal, retried on transient errors; ``None`` when renewed, else why it is lost."""
    retry = _FIRST_RETRY
    outage = Outage(LOGGER, f"the lease renewal of node {rt.node_id!r}",
                    counted="failed attempts")
    while True:
        deadline = rt.lease_expires_at
        left = deadline - rt.now()
        if left <= 0:
            return f"it expired at {deadline} before it was renewed"
        try:
            with trio.move_on_after(left) as scope:
                claim = await rt.store.location.renew(
                    rt.mesh, rt.node_rid, rt.owner.lifecycle_generation, now=rt.now(),
                    lease=rt.options.lease)
        except StoreUnavailable as exc:
            # The store was not reached (busy, paused, disconnected): says nothing
            # about the lease, so retry while lease time remains.
            outage.failed(f"the store was not reached ({exc}); retrying for {left:.3f} s more")
            await trio.sleep(min(retry, left))
            retry = _next_retry(rt, retry)
            continue
        except StaleFence as exc:
            # The store holds no claim of this lifecycle any more: removed by an
            # operator, or the store lost its data (then other lifecycles may still hold
            # leases the store no longer knows of: see ``NodeState.claim_vanished``).
            rt.claim_vanished = True
            return f"the store refused its renewal: {exc.message}"
        except Unavailable as exc:
            return f"the store refused its renewal: {exc.message}"
        except ZLinkError as exc:
            outage.failed(f"{exc}; retrying for {left:.3f} s more")
            await trio.sleep(min(retry, left))
            retry = _next_retry(rt, retry)
            continue
        if scope.cancelled_caught:
            return f"no renewal was answered before it expired at {deadline}"
        if rt.now() >= deadline:
            return f"the renewal was answered after it had expired at {deadline}"
        if not NODE.allows(rt.state, NODE.ev.renew):
            # The node ended while this renewal's write was under way (a store write that
            # has begun finishes despite the cancel): the drain removed or abandoned the
            # claim, so the late answer changes nothing.
            return None
        rt.lease_expires_at = claim.lease_expires_at
        rt.state = step(NODE, rt.state, NODE.ev.renew)
        outage.recovered()
        return None


async def lose_lease(rt: NodeRuntime, why: str) -> None:
    """Stop admission and every local Spot without store writes, then step ``stop``."""
    if mark_lease_lost(rt, why):
        await finish_lease_loss(rt)


def mark_lease_lost(rt: NodeRuntime, why: str) -> bool:
    """The synchronous start of :func:`lose_lease`: admission stops and every local Spot
    begins to stop, in this continuation. False if the lease was already lost (or the
    lifecycle is over). The test kit's ``Faults.kill`` calls it, then
    :func:`finish_lease_loss`."""
    if rt.lease_lost or not NODE.allows(rt.state, NODE.ev.lease_expired):
        return False
    rt.lease_loss = why
    rt.state = step(NODE, rt.state, NODE.ev.lease_expired)
    LOGGER.error("node %r lost its lease: %s; its %d local Spot(s) stop without touching "
                 "the store (on_close(OWNERSHIP_LOST)); then %s", rt.node_id, why,
                 len(rt.catalog.hosts),
                 "it rejoins the Mesh as a new lifecycle" if rt.on_lease_lost == "rejoin"
                 else "open_node raises NodeLost")
    rt.catalog.lose_ownership(rt.lease_lost_error())
    return True


async def finish_lease_loss(rt: NodeRuntime) -> None:
    """After :func:`mark_lease_lost`: wait (bounded) for the local Spots, step ``stop``."""
    with trio.move_on_after(rt.options.default_timeout) as scope:
        await rt.catalog.wait_stopped()
    if scope.cancelled_caught:
        LOGGER.error("node %r: local Spots did not stop within %s s after the lease was "
                     "lost; they are cancelled when open_node exits", rt.node_id,
                     rt.options.default_timeout)
    if NODE.allows(rt.state, NODE.ev.stop):  # the exit may have stepped it already
        rt.state = step(NODE, rt.state, NODE.ev.stop)
    rt.stopped.set()


async def wait_stopped(rt: NodeRuntime) -> None:
    """At exit after a lost lease: let :func:`lose_lease` finish (bounded), then stop."""
    with trio.move_on_after(rt.options.default_timeout):
        await rt.stopped.wait()
    if NODE.allows(rt.state, NODE.ev.stop):
        rt.state = step(NODE, rt.state, NODE.ev.stop)
        rt.stopped.set()

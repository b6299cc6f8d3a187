"""Node lifecycle: one Object Server process lifecycle, from claim to removal.

Theory of operation
-------------------

A node (NodeId, with a fresh NodeRid per process lifecycle) publishes a descriptor in
the Location Store.  Its lease is the validity period that every owner check uses: an
owner whose lease expired may not admit new messages or timers nor update a location
(docs/concepts.md, "Fences").  The runtime keeps the node's state id and steps it with
``compile(NodeLifecycle)``.

* ``starting`` -- registration is validated locally (registering the same stable
  type twice is a startup error) -> ``configuration_invalid`` ->
  ``startup_failed``.  ``new_claim`` -> ``claimed``: one Location Store transaction
  creates the (MeshName, NodeRid) descriptor and the Entry Spot ID's global claim,
  linked to the owner lease and lifecycle generation.  ``claim_conflict``
  (either identity is held by an active claim; nothing was changed, no second Entry
  UUID is tried) -> ``startup_failed`` (final, startup configuration error).
* ``claimed`` -- the descriptor exists; listeners and the Entry Spot come up and the
  startup authority scan runs, which may wait for a dead lifecycle's lease, so ``renew``
  (a self-transition) keeps the lease meanwhile.  ``open_admission`` -> ``serving``.
  A failure here is handled like a drain: ``begin_drain`` -> ``draining`` so the claim
  is removed with its fence.
* ``serving`` -- admits Spot traffic; ``renew`` (a self-transition) extends the lease
  and may update mutable descriptor fields, never the immutable ones such as the
  Entry Spot ID.  ``begin_drain`` -> ``draining``.
* ``draining`` -- new admission is rejected (a draining owner takes no new work),
  accepted work finishes and Spots close or move; the lease is still renewed.
  ``remove`` -> ``removed`` (final): Remove deletes the descriptor and releases the
  linked Entry claim in one transaction, only if the stored owner lease and lifecycle
  match; a stale remove cannot delete a replacement lifecycle's records.
  ``abandon`` -> ``stopped`` (final) when the drain could not close every local Spot
  within its deadline: the descriptor is *not* removed and renewal stops, so the claim
  expires with the records it still owns linked to it, and this NodeId's next
  lifecycle (its startup authority scan) or an operator (``release --node``) finds
  and releases them, as after a crash.
* ``lease_lost`` -- from ``claimed``, ``serving`` or ``draining``, when renewal is
  refused or the lease expired locally (``lease_expired``): no new message/timer
  admission and no location update.  ``stop`` -> ``stopped`` (final): the process
  ends without touching the store; a replacement lifecycle claims anew, and stale
  records are cleaned by the fenced owner cleanup.

Tags -- the questions the runtime asks of the node's state:

* ``admits_work`` (``serving``) -- new messages, creations and links are admitted.
* ``lease_lost`` (``lease_lost``, ``stopped``) -- this lifecycle learned its lease is
  gone: every call is Unavailable and nothing is written to the store.
* ``closed`` (``removed``, ``startup_failed``, ``stopped``) -- the lifecycle has ended:
  the node sends, creates and finds nothing any more.
"""

from __future__ import annotations

from statemachine import State

from statecharts._base import StrictChart, state_tags

__all__ = ("NodeLifecycle",)


class NodeLifecycle(StrictChart):
    """One node process lifecycle: claim, serve with a renewed lease, drain, remove."""

    starting = State(initial=True)
    claimed = State()
    serving = State()
    draining = State()
    lease_lost = State()
    # --- terminal outcomes ---
    removed = State(final=True)
    startup_failed = State(final=True)
    stopped = State(final=True)

    configuration_invalid = starting.to(startup_failed)
    new_claim = starting.to(claimed)
    claim_conflict = starting.to(startup_failed)
    open_admission = claimed.to(serving)
    renew = claimed.to.itself() | serving.to.itself() | draining.to.itself()
    begin_drain = claimed.to(draining) | serving.to(draining)
    remove = draining.to(removed)
    abandon = draining.to(stopped)
    lease_expired = lease_lost.from_(claimed, serving, draining)
    stop = lease_lost.to(stopped)

    tags = state_tags(
        admits_work=(serving,),
        lease_lost=(lease_lost, stopped),
        closed=(removed, startup_failed, stopped),
    )

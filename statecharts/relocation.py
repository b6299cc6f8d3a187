"""Planned relocation: moving an existing Spot owner to another node.

Theory of operation
-------------------

One chart instance follows one explicit host Relocate of one relocation unit (a
SpotWide User Spot with its member Actors, or an Instance Spot).  This chart encodes
the order of a move's steps (docs/relocation.md, "The procedure") and the two rules
that routing depends on: *abort only before relay-ready* and *no automatic resume*.

* ``requested`` -- the factory's relocation policy decides:
  ``relocation_disabled`` (DisableRelocation, or an Entry Spot, which never moves)
  -> ``refused`` (final).  So does the authority: ``already_moving`` (the
  Spot is Relocating, Sealed or RelayReady for another move, or Closing),
  ``no_target`` (no other live node of the Mesh serves the type, or the named one
  does not), ``begin_refused`` (BeginRelocation refused: the target is full, its lease
  ended, the record changed) -> ``refused``.  ``begin_relocation`` ->
  ``waiting_for_permit``.
* ``waiting_for_permit`` -- the unit is Relocating but not sealed: the source keeps
  accepting application messages and timers on its owner route.
* ``seal`` -> ``sealed`` -- ingress arriving on the source route is kept in the
  relocation hold (no count/byte bound of its own); no application handler runs for
  it.
* ``captured`` -- ``capture_done``: durable capture of the unit: the adapter's opaque
  bytes (PreserveStateWith) or nothing (RecreateOnRelocation), not-yet-executed
  messages, the accepted journal, timer registrations and pending ticks.
* ``restoring_target`` -- ``target_reserved``: the target shell (same SpotId and
  ObjectGeneration, invisible to resolver and handlers) is reserved and restores.
  ``target_restored`` -> ``target_ready``.
* ``relay_ready`` -- ``accept_relay_ready``: the point of no return.  From here the
  source is never restored, whatever the cutover-submit result; the procedure
  continues only on the same target process.
* ``committed`` (final) -- ``commit_relocation``: the authority names the target
  (owner generation + 1) and the source->target Message Follow route is installed
  in the same commit; the held ingress is relayed through it with operation ID,
  generation and reply route preserved (docs/concepts.md, "Message Follow").

Failure:

* ``abort_relocation`` is accepted from every state before ``relay_ready`` ->
  ``aborted`` (final): the source stays owner and held ingress returns to the source
  queue in arrival order.  An explicit failure before relay-ready -- a failed
  capture, a target that cannot reserve/restore, or a target process that died --
  is reported by the coordinator as this explicit abort.
* ``target_lost`` after relay-ready -> ``failed`` (final): the target process
  terminated; no other target is selected and relocation is not resumed
  automatically.  What the failure policy does next is outside this chart.

The target steps the same chart from ``captured`` -- it receives the captured unit --
through ``target_reserved``, ``target_restored``, ``accept_relay_ready`` (it records
relay-ready in the store itself, once its shell is restored) and ``commit_relocation``
(it commits the authority and opens its barrier).  The source learns those steps from
the target's one answer and steps them after it; a failure answer before relay-ready
is the source's ``abort_relocation``.
"""

from __future__ import annotations

from statemachine import State

from statecharts._base import StrictChart

__all__ = ("PlannedRelocation",)


class PlannedRelocation(StrictChart):
    """One planned relocation of a Spot owner, from request to commit or abort."""

    requested = State(initial=True)
    waiting_for_permit = State()
    sealed = State()
    captured = State()
    restoring_target = State()
    target_ready = State()
    relay_ready = State()
    # --- terminal outcomes ---
    committed = State(final=True)
    aborted = State(final=True)
    failed = State(final=True)
    refused = State(final=True)

    relocation_disabled = requested.to(refused)
    already_moving = requested.to(refused)
    no_target = requested.to(refused)
    begin_refused = requested.to(refused)
    begin_relocation = requested.to(waiting_for_permit)
    seal = waiting_for_permit.to(sealed)
    capture_done = sealed.to(captured)
    target_reserved = captured.to(restoring_target)
    target_restored = restoring_target.to(target_ready)
    accept_relay_ready = target_ready.to(relay_ready)
    commit_relocation = relay_ready.to(committed)
    abort_relocation = aborted.from_(
        waiting_for_permit, sealed, captured, restoring_target, target_ready
    )
    target_lost = relay_ready.to(failed)

"""Spot authority: the Location Store's lifecycle of one Spot ID (store side).

Theory of operation
-------------------

The Location Store keeps, per global Spot ID, one authority record: its owner,
ObjectGeneration, AuthorityOwnerGeneration, StoreVersion and lifecycle state.  Every
store transaction (``docs/stores.md``) is one event of this chart, and a store backend
applies an event only when ``compile(SpotAuthority).step(state, event)`` allows it;
anything else is refused as ``InvalidOperation`` without writing.

Lifecycle (docs/concepts.md explains generations and fences):

* ``missing`` -- no authority exists.  Only ``reserve`` leaves it: the Reserve
  transaction of an explicit User Spot create or of a cold activation (its step 10)
  records the reservation fence, the pending capacity and (cold activation) the
  recovery receipt, and moves to ``creating`` (Missing -> Creating).
* ``creating`` -- one attempt holds the reservation.  ``commit_ready`` publishes Ready
  authority and active capacity with the same fence (cold activation step 11);
  ``abort_creating`` is the cleanup of a rejected or failed creation and returns to
  ``missing`` (a creation that fails midway leaves the ID Missing; after a restart the
  startup scan aborts with the same fence).  A restart that *resumes* the same
  reservation changes nothing here: the record stays ``creating``.
* ``ready`` -- the Spot can receive application messages.
* ``closing`` -- entered by ``begin_close`` (the Closing CAS of a close) or by
  ``begin_idle_eviction`` (the catalog's IdleEvicted cleanup of an Instance Spot);
  both are the same record state, the event only names the shutdown reason.
  ``release`` with the same owner/generation fence returns to ``missing``.
  Only after a release can the resolver produce a new Missing input.

Relocation of an existing owner (docs/relocation.md):

* ``begin_relocation`` -- ``ready`` -> ``relocating``: the unit waits for a permit and
  is *not yet sealed*, so the current owner keeps serving messages and timers.
* ``seal`` -- ``relocating`` -> ``sealed``: source ingress now goes to the relocation
  hold; no application handler runs for it.
* ``accept_relay_ready`` -- ``sealed`` -> ``relay_ready``: the target accepted
  relay-ready.  From here the source is never restored, so the record
  no longer accepts ``abort_relocation``; this is how the store fences a late abort.
* ``commit_relocation`` -- ``relay_ready`` -> ``ready`` with the target as owner
  (AuthorityOwnerGeneration + 1) and the Message Follow route installed.
* ``abort_relocation`` -- from ``relocating`` or ``sealed`` back to ``ready`` at the
  source (held ingress returns to the source queue in arrival order).

Close, idle eviction and a new relocation are refused while relocating, sealed or
relay-ready (the ``moving`` tag):
a close that meets a move is ``Unavailable``, and a Spot being evicted for idleness
does not move.  An owner whose lease expired keeps its record (the resolver reports
``Unavailable``; nothing is recreated elsewhere).  The failure policy's one way
out is ``release_expired``: ``ready`` -> ``missing``, the fenced release of a
Ready record whose owner's lease expired, taken by the same NodeId restarted or by an
operator (``store.rules.operator``), never by another node on its own.  A move whose
target died past relay-ready has its own way out, ``release_relay_ready``:
``relay_ready`` -> ``missing``, taken by restart recovery (the target's NodeId
restarted) or an operator once the target's lifecycle is over -- the move is not
resumed, the source is not restored, the incarnation ends.

Entry Spot records are not this chart's: they are written and deleted with their
node's descriptor claim (NewClaim, Remove) and are always ``ready``.

The states are also the stored ones: ``state_enum`` makes ``statecharts.names``
generate ``AuthorityState``, the enum an authority record keeps (``missing`` is the
absence of a record, so no record holds it).  The stores step this chart for every
state change -- ``store.rules.authority`` in Python (memory and SQLite), the Lua
fragment ``store.redis.lua.authority`` on Redis.

There is no final state: the record cycles back to ``missing`` and a later Reserve
starts a new incarnation with a strictly larger ObjectGeneration.  Every state can
reach ``missing`` again (checked by the tests).
"""

from __future__ import annotations

from statemachine import State

from statecharts._base import StrictChart, state_tags

__all__ = ("SpotAuthority",)


class SpotAuthority(StrictChart):
    """Location Store authority of one Spot ID: Missing -> Creating -> Ready -> Closing."""

    missing = State(initial=True)
    creating = State()
    ready = State()
    closing = State()
    relocating = State()
    sealed = State()
    relay_ready = State()

    reserve = missing.to(creating)
    commit_ready = creating.to(ready)
    abort_creating = creating.to(missing)

    begin_close = ready.to(closing)
    begin_idle_eviction = ready.to(closing)
    release = closing.to(missing)

    begin_relocation = ready.to(relocating)
    seal = relocating.to(sealed)
    accept_relay_ready = sealed.to(relay_ready)
    commit_relocation = relay_ready.to(ready)
    abort_relocation = relocating.to(ready) | sealed.to(ready)

    release_expired = ready.to(missing)
    release_relay_ready = relay_ready.to(missing)

    tags = state_tags(moving=(relocating, sealed, relay_ready))
    state_enum = "AuthorityState"

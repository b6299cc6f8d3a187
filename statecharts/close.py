"""Close operation: closing one User Spot incarnation named by a SpotRef.

Theory of operation
-------------------

One chart instance follows one ``close(ref)`` (local, or remote through command 48
answered by command 20) and the same steps serve an Instance Spot's local close from
its own lifecycle context and the catalog's idle eviction.  The owner verifies
everything *before* the Closing CAS, in one read of the current authority: object
generation, owner generation, StoreVersion, active Actor membership, Closing, and
relocation state.  Each finding is its own event:

* ``incarnation_gone`` -> ``already_gone`` (final, ``closed=False``): the same
  incarnation no longer exists; idempotent, never retargeted to a newer one.
* ``other_generation`` -> ``invalid_operation`` (final): a different generation of
  the same Spot ID exists; the framework does not re-find the current ref.
* ``active_membership`` -> ``kept_for_membership`` (final, ``closed=False``): at
  least one Actor membership remains; admission and authority are kept, no member is
  moved or destroyed.
* ``sealed_for_move`` / ``owner_fence_mismatch`` -> ``unavailable`` (final): the unit
  is relocating, or the owner fence (owner, lifecycle, lease) differs: an owner whose
  lease expired or that another lifecycle replaced changes no authority
  (docs/concepts.md, "Fences").
* ``already_closing`` -> ``joining_close``: another close of the same incarnation has
  passed its CAS; this request merges with it (closes of one Spot ID run once) and
  completes when that one releases (``release`` -> ``closed``).  Interpretation: the
  merged request reports ``closed=True``, because the incarnation it named was closed by
  the merged transaction; ``closed=False`` is reserved for "already gone before we
  looked".
* ``verified`` -> ``beginning_close``.

Then, in order:

1. ``beginning_close`` -- ``begin_close``: Closing CAS with the expected owner and
   generation (``SpotAuthority``: ready -> closing).  A lost CAS (the record changed
   between the read and the write) -> ``cas_conflict`` -> ``verifying`` again.
2. ``sealing_admission`` -- ``admission_sealed``: local admission is sealed; any
   operation after the seal ends closing/stale.
3. ``finishing_turns`` -- ``turns_finished``: turns and timers accepted before the
   seal complete on the existing generation, up to the set boundary.
4. ``cleaning_up`` -- ``cleanup_done``: handler scope, timers and local activation
   resources are cleaned up exactly once, including the ``on_close`` callback.
5. ``releasing`` -- ``release``: authority is released with the same owner/generation
   fence (closing -> missing) -> ``closed`` (final, ``closed=True``).

Deadline: ``deadline_expired`` is accepted only while verifying or waiting on a merged
close; the Closing CAS itself is a shielded store write.  Once the CAS has succeeded
the close runs to ``closed`` -- a half-closed incarnation would occupy the ID
forever -- and the caller alone sees DeadlineExceeded.
"""

from __future__ import annotations

from statemachine import State

from statecharts._base import StrictChart

__all__ = ("CloseOperation",)


class CloseOperation(StrictChart):
    """One Close of a Spot incarnation, from verification to authority release."""

    verifying = State(initial=True)
    beginning_close = State()
    joining_close = State()
    sealing_admission = State()
    finishing_turns = State()
    cleaning_up = State()
    releasing = State()
    # --- terminal results ---
    closed = State(final=True)
    already_gone = State(final=True)
    kept_for_membership = State(final=True)
    invalid_operation = State(final=True)
    unavailable = State(final=True)
    deadline_exceeded = State(final=True)

    # verification of the current authority, before any write
    incarnation_gone = verifying.to(already_gone)
    other_generation = verifying.to(invalid_operation)
    active_membership = verifying.to(kept_for_membership)
    sealed_for_move = verifying.to(unavailable)
    owner_fence_mismatch = verifying.to(unavailable)
    already_closing = verifying.to(joining_close)
    verified = verifying.to(beginning_close)
    # the close procedure, in order
    begin_close = beginning_close.to(sealing_admission)
    cas_conflict = beginning_close.to(verifying)
    admission_sealed = sealing_admission.to(finishing_turns)
    turns_finished = finishing_turns.to(cleaning_up)
    cleanup_done = cleaning_up.to(releasing)
    release = releasing.to(closed) | joining_close.to(closed)
    # the operation's deadline, only before the Closing CAS
    deadline_expired = deadline_exceeded.from_(verifying, joining_close)

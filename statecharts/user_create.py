"""User Spot create operation: Create and GetOrCreate, from submit to terminal result.

Theory of operation
-------------------

One chart instance follows one terminal submit of ``Create(type)`` or
``GetOrCreate(spot_id, type)`` (docs/concepts.md, "Intent").  The single end-to-end
deadline is fixed at submit and spans resolve, reservation, factory and the Ready
barrier.  Each store answer is its own event, so the chart has no guards.

* ``validating`` -- the caller's input is checked at the API edge before any store
  call: a malformed ID or one in the reserved Entry format
  -> ``input_invalid`` -> ``invalid_operation``, nothing written.  ``Create`` then
  issues a fresh lowercase UUID v4 (``spot_id_issued``, straight to placement: there is
  nothing to resolve); ``GetOrCreate`` resolves the caller's ID (``spot_id_given``).
* ``resolving`` -- current authority of the ID.  A Ready incarnation of the same User
  type -> ``found_ready`` -> ``existing`` (final; no factory, no reply).  Another kind
  or type -> ``type_mismatch``.  Creating -> ``found_creating`` ->
  ``waiting_on_creating``; a Closing incarnation of the same type -> ``found_closing`` ->
  the same wait (its release makes the ID Missing).  Missing -> ``found_missing``
  -> ``selecting_placement``.
* ``waiting_on_creating`` -- another attempt holds the reservation; this operation
  starts no reservation or factory of its own.  That attempt ends Ready ->
  ``other_attempt_ready`` -> ``existing``; it ends Missing through rejection/failure
  cleanup -> ``other_attempt_missing`` -> compete again from ``selecting_placement``
  within the remaining deadline; neither before the deadline -> ``deadline_exceeded``.
  An earlier attempt's Rejected state or reply is never shared.
* ``selecting_placement`` -- Mesh and capacity selection: no object-role
  Mesh -> ``not_configured``; several without InMesh -> ``invalid_operation``; unknown
  InMesh -> ``not_found``; no candidate with capacity -> ``capacity_exceeded``; every
  node serving the type takes no new Spots now (draining or stopping) -> ``hosts_closed``
  -> ``unavailable`` (the caller may retry once one is undrained or restarted).  The
  creation request's reference and hash are recorded into the creation intent here,
  before reservation.
* ``reserving`` -- Reserve (Missing -> Creating, see ``SpotAuthority``).  Won ->
  ``running_factory``.  Lost to a Ready authority -> ``existing``; lost to a Creating
  one -> ``waiting_on_creating`` (``reserve_lost_closing`` when it was Closing); another
  kind/type -> ``type_mismatch``; refused for
  capacity -> ``capacity_exceeded``.  ``reserve_conflict`` is the Create-only case: an
  active authority already holds the issued UUID -> ``already_exists`` (no second UUID
  or reservation is generated).
* ``running_factory`` -- only the reservation winner runs the factory and
  ``on_create`` (remotely: command 47, result via command 20, docs/wire.md).
  ``create_accepted`` -> ``committing_ready`` -> ``commit_ready`` -> ``created``
  (final, optional reply).  ``create_rejected`` -> ``cleaning_up_rejected`` ->
  ``abort_creating`` -> ``rejected`` (final; reservation and authority cleaned up, the
  SpotRef names the declined attempt, optional reply).
* Failures after Reserve clean up with the same fence so the ID is not left occupied
  (a creation that fails midway leaves the ID Missing): ``factory_failed`` ->
  ``aborting_failed_creation`` -> ``creation_failed``; ``deadline_expired`` ->
  ``aborting_expired_creation`` -> ``deadline_exceeded``.  Before Reserve the deadline
  ends the operation directly in ``deadline_exceeded``; the next call re-checks the
  store's current authority.
* Deadline rule: ``deadline_expired`` is accepted only while the operation waits on
  something it may abandon (a store read, another attempt, the application factory).
  A store *write* in flight (Reserve, CommitReady, AbortCreating) is shielded from
  cancellation and its answer is applied first; otherwise a cancelled Reserve could
  leave a Creating record nobody cleans up.  The runtime then reports
  DeadlineExceeded to the caller if the deadline has passed.

Final states map one-to-one to the terminal result: ``existing`` / ``created`` /
``rejected`` are ``CreateState`` values; the others are the error of the same name.

Tags -- the questions the runtime asks of an operation's state:

* ``reads_authority`` (``resolving``, ``waiting_on_creating``) -- the operation reads
  the store's current authority next and decides from what it finds.
* ``waits_on_other_attempt`` (``waiting_on_creating``) -- what it reads is the outcome of
  another attempt it waited for (Missing: that attempt failed; Ready: it won).
"""

from __future__ import annotations

from statemachine import State

from statecharts._base import StrictChart, state_tags

__all__ = ("UserCreate",)


class UserCreate(StrictChart):
    """One User Spot Create / GetOrCreate operation, from submit to terminal result."""

    validating = State(initial=True)
    resolving = State()
    waiting_on_creating = State()
    selecting_placement = State()
    reserving = State()
    running_factory = State()
    committing_ready = State()
    cleaning_up_rejected = State()
    aborting_failed_creation = State()
    aborting_expired_creation = State()
    # --- terminal results ---
    existing = State(final=True)
    created = State(final=True)
    rejected = State(final=True)
    type_mismatch = State(final=True)
    already_exists = State(final=True)
    not_configured = State(final=True)
    invalid_operation = State(final=True)
    not_found = State(final=True)
    capacity_exceeded = State(final=True)
    unavailable = State(final=True)
    creation_failed = State(final=True)
    deadline_exceeded = State(final=True)

    # API edge: the ID is checked before any store call
    input_invalid = validating.to(invalid_operation)
    spot_id_issued = validating.to(selecting_placement)
    spot_id_given = validating.to(resolving)
    # resolve
    found_ready = resolving.to(existing)
    found_type_mismatch = resolving.to(type_mismatch)
    found_creating = resolving.to(waiting_on_creating)
    found_closing = resolving.to(waiting_on_creating)
    found_missing = resolving.to(selecting_placement)
    # waiting for another attempt's authority change
    other_attempt_ready = waiting_on_creating.to(existing)
    other_attempt_missing = waiting_on_creating.to(selecting_placement)
    # Mesh and capacity selection
    placement_selected = selecting_placement.to(reserving)
    no_mesh_candidate = selecting_placement.to(not_configured)
    ambiguous_mesh = selecting_placement.to(invalid_operation)
    mesh_not_found = selecting_placement.to(not_found)
    no_capacity = selecting_placement.to(capacity_exceeded)
    hosts_closed = selecting_placement.to(unavailable)
    # Reserve (Missing -> Creating)
    reserve_won = reserving.to(running_factory)
    reserve_lost_ready = reserving.to(existing)
    reserve_lost_creating = reserving.to(waiting_on_creating)
    reserve_lost_closing = reserving.to(waiting_on_creating)
    reserve_lost_type_mismatch = reserving.to(type_mismatch)
    reserve_refused_capacity = reserving.to(capacity_exceeded)
    reserve_conflict = reserving.to(already_exists)
    # factory and on_create on the reservation winner
    create_accepted = running_factory.to(committing_ready)
    create_rejected = running_factory.to(cleaning_up_rejected)
    factory_failed = running_factory.to(aborting_failed_creation)
    commit_ready = committing_ready.to(created)
    # cleanup with the same reservation fence
    abort_creating = (
        cleaning_up_rejected.to(rejected)
        | aborting_failed_creation.to(creation_failed)
        | aborting_expired_creation.to(deadline_exceeded)
    )
    # the single end-to-end deadline
    deadline_expired = deadline_exceeded.from_(
        resolving, waiting_on_creating, selecting_placement
    ) | running_factory.to(aborting_expired_creation)

    tags = state_tags(
        reads_authority=(resolving, waiting_on_creating),
        waits_on_other_attempt=(waiting_on_creating,),
    )

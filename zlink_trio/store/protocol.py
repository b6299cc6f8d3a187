"""The Location Store and Relocation Store protocols every backend implements.

Theory of operation
-------------------
Each method is **one atomic store transaction**: it reads what it needs,
checks *every* precondition, and only then writes. When a check fails it
raises and nothing at all was written, so a backend without rollback (a
Redis Lua script, a SQLite ``BEGIN IMMEDIATE`` block) fits by doing all its
reads and comparisons before its first write. No method waits for another
transaction, and none reads a clock: ``now`` is an argument (the runtime
passes ``trio.current_time()``), so leases follow the caller's clock.

Outcomes follow one rule: *your incarnation is gone* is an idempotent
``False``/``None`` (a retried cleanup succeeds); *your incarnation exists but
you hold an old fence* is :class:`StaleFence` (re-read, then decide); *the
owner cannot act now* (lease expired, sealed for a move) is
:class:`Unavailable`; *you asked for something the rules forbid* is
:class:`InvalidOperation`. StaleFence is a subclass of Unavailable.

Every write to an authority record adds one to its StoreVersion; a write to a
descriptor claim adds one to the claim's StoreVersion.

Capacity is counted per owner lifecycle ``(mesh, node_rid,
lifecycle_generation)``: *pending* is the number of its Creating records plus
the moves targeting it (Relocating/Sealed/RelayReady records whose
``relocation_target`` it is); *active* the number of its Ready, Closing,
Relocating, Sealed and RelayReady records. Entry claims count neither.
Reserve and BeginRelocation refuse with :class:`CapacityExceeded` when
``active + pending >= capacity``.

The Relocation Store is a separate key space: immutable content-addressed
roots (activation envelopes, creation requests, relocation payloads) and one
durable activation inbox per ``(spot_id, object_generation)``.

A cold activation (``statecharts.cold_activation``) writes to both stores in three
groups, which every :class:`Store` offers as one transaction each, with the guarantees
of the methods they merge:
:class:`~zlink_trio.store.combined_protocol.CombinedTransactions` (``store.combined``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from zlink_trio.store.combined_protocol import CombinedTransactions
from zlink_trio.store.relocation_steps import RelocationSteps
from zlink_trio.store.reminder_steps import ReminderSteps
from zlink_trio.store.state_steps import StateSteps

if TYPE_CHECKING:
    from zlink_trio.core.descriptor import NodeClaim, NodeDescriptor
    from zlink_trio.core.identity import NodeRid, SpotKind
    from zlink_trio.core.records import (
        AuthorityFence,
        AuthorityRecord,
        CreationIntent,
        OwnerFence,
        RecoveryPointer,
        ReservationFence,
        RootReceipt,
    )
    from zlink_trio.store.values import (
        InboxRecord,
        LocationStatistics,
        Page,
        RelocationStatistics,
    )

__all__ = ("CombinedTransactions", "LocationStore", "RelocationStore", "Store", "StorePair")


class LocationStore(RelocationSteps, StateSteps, ReminderSteps, Protocol):
    """Descriptors, Entry claims and Spot authority (docs/stores.md).

    The steps of a planned move are part of it, documented
    apart in :class:`~zlink_trio.store.relocation_steps.RelocationSteps`.
    """

    async def new_claim(self, descriptor: NodeDescriptor, *, now: float,
                        lease: float) -> NodeClaim:
        """NewClaim: publish ``descriptor`` and its Entry Spot claim together.

        Issues the next lifecycle generation of ``descriptor.node_id``
        (strictly increasing, never reused, even after Remove), stores the
        claim under ``(mesh, node_rid)`` with ``lease_expires_at = now +
        lease``, and creates the Entry Spot's authority record (kind ENTRY,
        Ready, owned by the new lifecycle, a fresh ObjectGeneration).

        Raises :class:`AlreadyExists` if a *live* claim holds ``(mesh,
        node_rid)``; :class:`NodeIdInUse` (an AlreadyExists) if a live claim
        of another NodeRid holds ``descriptor.node_id`` in any Mesh (one
        process per NodeId; checked in the same transaction, so two processes
        starting at once cannot both win); :class:`AlreadyExists` if any
        record holds the Entry Spot ID; then nothing is written (no
        descriptor, no Entry claim, no generation consumed). An
        *expired* claim at the same key is replaced, and its Entry claim
        deleted, in the same transaction. :class:`InvalidOperation` for a
        non-positive or non-finite ``lease``. Not idempotent: a retry after a
        lost reply meets its own claim and raises AlreadyExists.
        """

    async def renew(self, mesh: str, node_rid: NodeRid, lifecycle_generation: int, *,
                    now: float, lease: float) -> NodeClaim:
        """Renew: extend a live claim's lease to ``now + lease`` (never shortens it).

        Only the lease and StoreVersion change; no descriptor field can, and a
        ``close_placement`` mark is kept.
        Raises :class:`StaleFence` if no claim is at the key or it belongs to
        another lifecycle; :class:`Unavailable` if the claim's lease already
        expired at ``now`` (the lifecycle is over: make a new claim);
        :class:`InvalidOperation` for a bad ``lease``. Nothing written then.
        """

    async def close_placement(self, mesh: str, node_rid: NodeRid,
                              lifecycle_generation: int) -> bool:
        """ClosePlacement: mark the claim as draining, fenced by lifecycle.

        Sets the claim's ``accepts_placements`` to ``False`` (and adds one to its
        StoreVersion), so every node reading ``descriptors`` stops placing new
        Spots on that lifecycle. Renew keeps the mark; it ends with
        :meth:`open_placement` (``Node.undrain``) or with the claim (Remove, or a
        NewClaim replacing an expired claim; a new lifecycle accepts placements
        again). Returns ``True`` when the claim
        at the key is that lifecycle -- also when it was already marked, then
        nothing is written (idempotent) -- and ``False`` (nothing written) when
        no claim is at the key or it belongs to another lifecycle, so a stale
        drain never marks a replacement. Like Remove it takes no ``now``: it
        works on an expired claim of that lifecycle too (which ``descriptors``
        no longer lists anyway). Spots already placed are not affected.
        """

    async def open_placement(self, mesh: str, node_rid: NodeRid,
                             lifecycle_generation: int) -> bool:
        """OpenPlacement: clear the draining mark of :meth:`close_placement`, fenced by
        lifecycle.

        Sets the claim's ``accepts_placements`` back to ``True`` (and adds one to its
        StoreVersion), so the other nodes place new Spots on that lifecycle again.
        Returns ``True`` when the claim at the key is that lifecycle -- also when it was
        not marked, then nothing is written (idempotent) -- and ``False`` (nothing
        written) when no claim is at the key or it belongs to another lifecycle. Like
        ClosePlacement it takes no ``now``.
        """

    async def remove(self, mesh: str, node_rid: NodeRid, lifecycle_generation: int) -> bool:
        """Remove: delete the claim and its linked Entry claim, fenced by lifecycle.

        Returns ``True`` when it deleted them; ``False`` (nothing written)
        when no claim is at the key or it belongs to another lifecycle, so a
        stale cleanup never deletes a replacement's descriptor or Entry claim.
        Works on expired claims. Idempotent. Spots the lifecycle still owns
        keep their records (and capacity counts) until closed.
        """

    async def descriptors(self, mesh: str | None = None, *, now: float) -> list[NodeClaim]:
        """The live claims (``now < lease_expires_at``), of ``mesh`` or all, by key order."""

    async def dead_claims(self, mesh: str | None = None, *,
                          now: float) -> list[NodeClaim]:
        """The claims whose lease is over at ``now``, of ``mesh`` or all, by key order.

        A dead lifecycle's claim stays until it is removed: while it still owns records
        (:meth:`remove_dead_claims` keeps those) or until its NodeId starts again. It is
        where the NodeId of a dead owner is read (a record names only its NodeRid).
        Read-only.
        """

    async def find(self, spot_id: str) -> AuthorityRecord | None:
        """The authority record of ``spot_id`` in whatever state, or ``None`` (Missing)."""

    async def reserve(self, spot_id: str, *, kind: SpotKind, stable_type: str, mesh: str,
                      owner: OwnerFence, now: float,
                      creation_intent: CreationIntent | None = None,
                      recovery_pointer: RecoveryPointer | None = None,
                      container: str | None = None) -> ReservationFence:
        """Reserve: Missing -> Creating for ``owner``, with a pending capacity unit.

        Checks, in order: ``spot_id`` is valid and not of the reserved Entry
        form, ``kind`` is USER or INSTANCE, or ACTOR with a ``container`` (and a
        container only for ACTOR) (:class:`InvalidOperation`); the
        ID has no record (:class:`AuthorityExists` carrying it); ``owner``'s
        claim in ``mesh`` exists with that lifecycle (:class:`StaleFence`) and
        a live lease (:class:`Unavailable`); for an Actor, its container is the
        Ready record of an Entry or User Spot that ``owner`` owns
        (``store.rules.location.check_container``: InvalidOperation, StaleFence,
        Unavailable); the owner serves ``stable_type``
        as ``kind`` (:class:`InvalidOperation`); capacity
        (:class:`CapacityExceeded`). An Actor's record names its container from
        the reservation on, so a BeginClose of the container sees it. Then it
        issues a new ObjectGeneration
        larger than any the store ever issued (on Redis Cluster: than any the
        ID's bucket issued -- strictly increasing per ID and unique store-wide,
        docs/decisions.md), owner generation 1,
        StoreVersion 1, records the intent and pointer, and returns the fence.
        Not idempotent: a retry meets its own record (AuthorityExists).
        """

    async def commit_ready(self, fence: ReservationFence, *, now: float) -> AuthorityRecord:
        """CommitReady: Creating -> Ready; the pending unit becomes active.

        The creation intent is dropped; the recovery pointer is kept. Raises
        :class:`StaleFence` unless the record is Creating with exactly the
        fence's StoreVersion, generations and owner, and that owner is still
        the current lifecycle; :class:`Unavailable` if its lease expired.
        Idempotent: if the record is the Ready result of this very commit
        (StoreVersion one more, nothing else changed), returns it unchanged.
        """

    async def abort_creating(self, fence: ReservationFence) -> bool:
        """AbortCreating: Creating -> Missing (record deleted, pending unit released).

        ``True`` when it deleted the record; ``False`` when the record is
        gone or belongs to another ObjectGeneration (idempotent). Raises
        :class:`StaleFence` if the same generation's record no longer matches
        the fence (committed, or changed). Does not require a live lease, so a
        restarted process can clean up with the fence it recovered.
        """

    async def begin_close(self, spot_id: str, *, object_generation: int, owner: OwnerFence,
                          now: float, expected_owner_generation: int | None = None,
                          expected_store_version: int | None = None
                          ) -> AuthorityRecord | None:
        """BeginClose: Ready -> Closing.

        Returns the Closing record (its ``fence()`` is the release fence), or
        ``None`` when ``spot_id`` has no record (idempotent false). Raises
        :class:`InvalidOperation` when another ObjectGeneration holds the ID,
        the record is an Entry claim, or it is still Creating;
        :class:`~zlink_trio.store.values.MembersRemain` when an Actor's record
        names it as container (checked last, with the lease; nothing written);
        :class:`Unavailable` when it moves (Relocating, Sealed or RelayReady)
        or the owner's lease expired; :class:`StaleFence` when ``owner`` or the expected owner
        generation / StoreVersion differ. Idempotent: a record already Closing
        under the same owner and generation is returned unchanged.
        """

    async def move_membership(self, actor_id: str, *, object_generation: int,
                              owner: OwnerFence, container: str,
                              now: float) -> AuthorityRecord:
        """MoveMembership: a Ready Actor's record names another container of its owner.

        Join and Leave on one node (docs/actors.md). Raises :class:`InvalidOperation`
        when ``actor_id`` has no record of ``object_generation`` (a control names the
        current ActorRef), is not an Actor, or is not Ready; :class:`StaleFence` when
        ``owner`` does not own it; :class:`Unavailable` when the owner's lease expired;
        then the container checks of :meth:`reserve`. Returns the record with its new
        container and StoreVersion one more; the record unchanged when it already names
        ``container`` (idempotent).
        """

    async def members(self, container: str) -> list[AuthorityRecord]:
        """The Actor records that name ``container``, in ActorId order (a read)."""

    async def release(self, fence: AuthorityFence) -> bool:
        """Release: Closing -> Missing, releasing the active capacity unit.

        ``True`` when it deleted the record; ``False`` when the record is gone
        or belongs to another ObjectGeneration (idempotent). Raises
        :class:`StaleFence` if the same generation is not Closing under
        exactly the fence's owner and owner generation. No lease needed. The
        release of a User Spot or an Actor (its close) deletes its durable state
        in the same transaction (``StateSteps``); an Instance Spot's stays.
        """

    async def release_expired(self, spot_id: str, *, object_generation: int,
                              owner_generation: int, now: float) -> AuthorityRecord:
        """ReleaseExpired: the operator's Ready -> Missing for an owner whose lease expired.

        An expired owner cannot change authority, so a Ready Spot
        whose owner never comes back would keep its ID forever. This is the
        explicit, fenced way out, taken only for a dead lifecycle *of the
        caller's own NodeId* (a node restarted under that NodeId, whose
        NewClaim proved every earlier lifecycle over) or by an operator
        (``zlink-trio release``) -- never by another node on its own, since
        a lease that looks expired may be a clock or network fault
        (``store.dead_lifecycle``). It deletes the record and releases the
        owner's active capacity unit, so the ID can be reserved again (with a
        larger ObjectGeneration). Returns the record as it was just before
        the deletion. The StoreVersion sequence ends with the record.

        Checks, in order (nothing written on any refusal): ``spot_id``,
        generations and ``now`` are valid (:class:`InvalidOperation`); the ID
        has a record (:class:`NotFound` -- deliberately not an idempotent
        ``False``: an operator must learn that nothing was released; a retry
        after a lost reply reads as NotFound and ``find`` confirms Missing);
        its ObjectGeneration is ``object_generation`` and its owner generation
        ``owner_generation`` (:class:`StaleFence`: re-read, decide again); it
        is not an Entry claim (:class:`InvalidOperation`: those end with
        their node's claim) and is Ready (:class:`InvalidOperation` naming
        the way out: Creating -> ``abort_creating``, Closing -> ``release``,
        Relocating/Sealed -> ``abort_relocation`` or finishing the move,
        RelayReady -> the target's ``commit_relocation``, or
        ``release_relay_ready`` once the target is dead, an abort being
        impossible past relay-ready); its owner's lease is over
        at ``now``: no claim at ``(mesh, owner node_rid)``, a claim of
        another lifecycle, or ``lease_expires_at <= now`` -- otherwise
        :class:`OwnerAlive` (an InvalidOperation: the live owner must close
        the Spot itself). ``now`` is on the clock the owners stamp leases
        with (wall-clock ``time.time()`` for shared stores).

        The released incarnation's durable inbox and roots in the Relocation
        Store are left as they are (keyed by its generation, they never meet
        a new incarnation); messages still in that inbox are not delivered.
        """

    async def remove_recovery_pointer(self, spot_id: str, *, object_generation: int,
                                      expected_version: int) -> bool:
        """Remove the recovery pointer by a CAS on the record's StoreVersion.

        ``True`` when removed; ``False`` when the record is gone, belongs to
        another generation, or has no pointer (idempotent; the root may then
        be deleted). Raises :class:`StaleFence` when the StoreVersion is not
        ``expected_version``; :class:`InvalidOperation` while Creating.
        """

    async def query(self, *, page_size: int, cursor: str | None = None) -> Page:
        """One page of authority records (any state, Entry claims included) by Spot ID.

        At most ``page_size`` records (1..1000, else :class:`InvalidOperation`)
        and at most 4 MiB encoded (the page stops before the record that would
        cross it; one record always fits). Walking ``next_cursor`` visits
        every record present for the whole walk exactly once. A cursor not
        issued by ``query`` is :class:`InvalidOperation`.
        """

    async def statistics(self) -> LocationStatistics:
        """A snapshot of counts; read-only."""

    async def orphans(self, node_id: str, *, now: float, after: str | None = None,
                      limit: int = 1000) -> list[AuthorityRecord]:
        """The incomplete activations a dead lifecycle of ``node_id`` left.

        Creating records, and Ready records that still have a recovery
        pointer, whose owner's claim belongs to ``node_id`` and is expired at
        ``now``; sorted by Spot ID, those above ``after`` only, at most
        ``limit`` (1..1000, else :class:`InvalidOperation`). A restarted node
        pages with ``after`` = the last Spot ID it got. Read-only. The cost is
        the backend's: memory and SQLite read only the dead claims' records
        (SQLite through its owner index); Redis scans every Spot ID of the
        store in bounded server-side pages (see docs/stores.md).
        """

    async def dead_owned(self, node_id: str, *, now: float, after: str | None = None,
                         limit: int = 1000) -> list[AuthorityRecord]:
        """Every record a dead lifecycle of ``node_id`` still owns, in any state.

        Like :meth:`orphans` (owner's claim of ``node_id``, expired at ``now``; by
        Spot ID above ``after``, at most ``limit``, 1..1000, else
        :class:`InvalidOperation`), but every state -- steady Ready, Closing and
        moving records too, and the RelayReady records whose move *targets* such a
        lifecycle (the target died past relay-ready) -- and never an Entry claim
        (those end with their claim, :meth:`remove_dead_claims`). Read-only, at the cost of
        :meth:`orphans`. A restarted node and ``zlink-trio release --node``
        release what it returns, each record with its own fenced transaction.
        """

    async def remove_dead_claims(self, node_id: str, *, now: float) -> int:
        """RemoveDeadClaims: delete the empty expired claims of ``node_id``.

        One transaction: every claim of ``node_id`` whose lease is over at ``now``
        and that holds no capacity unit (no record is owned by that lifecycle and
        none is moving to it) is deleted with its linked Entry claim, as
        :meth:`remove` would. Returns how many; 0 writes nothing. Claims that still
        own records are kept: they prove the NodeId of those records to
        :meth:`adopt_orphan`. :class:`InvalidOperation` for a bad NodeId or ``now``.
        """

    async def adopt_orphan(self, spot_id: str, *, object_generation: int,
                           owner_generation: int, old_owner: OwnerFence,
                           new_owner: OwnerFence, now: float) -> AuthorityRecord:
        """AdoptOrphan: move an incomplete activation to a new lifecycle of its NodeId.

        For the startup authority scan only (docs/stores.md). Checks, in order
        (nothing written on any refusal): arguments valid
        (:class:`InvalidOperation`); the record exists with
        ``object_generation`` (:class:`StaleFence`); it is owned by
        ``old_owner`` at ``owner_generation`` (:class:`StaleFence`); it is
        Creating, or Ready with a recovery pointer
        (:class:`InvalidOperation`); the old owner's claim still exists
        (:class:`InvalidOperation`) and is expired at ``now``
        (:class:`Unavailable`); ``new_owner`` has a live claim
        (:class:`StaleFence` / :class:`Unavailable`, as Reserve) of the
        same NodeId that serves the record's type (:class:`InvalidOperation`).
        Then the owner becomes ``new_owner``, the owner generation and
        StoreVersion grow by one, and the capacity unit moves (pending stays
        pending, active stays active; the new owner's capacity is not
        checked). State, ObjectGeneration, creation intent and recovery pointer
        are kept. Idempotent: the result of this very adoption is returned
        unchanged.
        """


class RelocationStore(Protocol):
    """Immutable roots and durable activation inboxes, in their own key space."""

    async def put_root(self, data: bytes) -> RootReceipt:
        """Store ``data`` as an immutable root and return its receipt.

        Content addressed: identical bytes give the identical receipt, and a
        repeat is a no-op (idempotent). Callers must put bytes that embed
        their own identity (operation ID, Spot ID, generation) so two owners
        never share a root. :class:`CapacityExceeded` above 64 MiB.
        """

    async def get_root(self, receipt: RootReceipt) -> bytes:
        """The root's bytes, after checking their SHA-256 and size against ``receipt``.

        :class:`NotFound` when no root has ``receipt.ref``;
        :class:`RootIntegrityError` when the stored bytes do not match.
        """

    async def delete_root(self, receipt: RootReceipt) -> bool:
        """Delete a root; ``False`` when already gone (idempotent).

        :class:`RootIntegrityError` (nothing deleted) when the stored root
        does not match ``receipt``.
        """

    async def inbox_append(self, spot_id: str, object_generation: int, record: bytes) -> int:
        """Append ``record`` to the inbox of that incarnation; return its sequence.

        Sequences start at 1 and strictly increase; they are never reused
        while the inbox exists. :class:`CapacityExceeded` above 64 MiB.
        """

    async def inbox_read(self, spot_id: str, object_generation: int, *, after: int = 0,
                         limit: int) -> list[InboxRecord]:
        """Up to ``limit`` (1..1000) records with sequence above ``after`` and the cursor.

        Records at or below the cursor are gone (handled). An unknown inbox
        reads as empty. :class:`InvalidOperation` for a bad ``after``/``limit``.
        """

    async def inbox_set_cursor(self, spot_id: str, object_generation: int, seq: int) -> bool:
        """Move the replay cursor to ``seq`` and drop records up to it.

        ``True`` when it moved, ``False`` when already there (idempotent).
        :class:`InvalidOperation` when ``seq`` is below the cursor (moving
        backwards is refused) or above the last appended sequence.
        """

    async def inbox_cursor(self, spot_id: str, object_generation: int) -> int:
        """The replay cursor (0 for a new or unknown inbox)."""

    async def inbox_drop(self, spot_id: str, object_generation: int) -> bool:
        """Delete the whole inbox; ``False`` when there was none (idempotent)."""

    async def statistics(self) -> RelocationStatistics:
        """A snapshot of counts; read-only."""


class StorePair(Protocol):
    """A Location Store and a Relocation Store: what ``with_combined`` completes."""

    @property
    def location(self) -> LocationStore:
        """The Location Store."""

    @property
    def relocation(self) -> RelocationStore:
        """The Relocation Store."""


class Store(StorePair, Protocol):
    """What :func:`open_store` yields: the two stores and their combined transactions."""

    @property
    def combined(self) -> CombinedTransactions:
        """The combined transactions over :attr:`location` and :attr:`relocation`."""

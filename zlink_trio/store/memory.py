"""The ``memory://`` backend: both store protocols over in-process dicts.

Theory of operation
-------------------
Each method first awaits ``trio.lowlevel.checkpoint()`` -- so it is a real
scheduling and cancellation point, like a round trip to a networked store --
and then runs one pure transaction function of ``store.rules`` (``location``,
``claims``, ``relocation_steps``, ``relocation_store``, ...) with no await in
between. Trio never switches tasks inside that call, so each method is one
critical section: atomic and isolated. If the checkpoint is cancelled, nothing was done.

One :class:`MemoryStore` may be shared by any number of nodes in the same
process (and the same Trio run): pass the instance around, or open the same
``memory://<name>`` URL from several places (see ``open_store``). Nothing is
persisted; the store lives as long as the object.

A cold activation's store calls are also offered without the checkpoint
(``MemoryStore.immediate``, ``combined_protocol.ImmediateTransactions``): a second
:class:`MemoryCombined` over the same states whose coroutines never suspend, so the
runtime runs an activation in one synchronous continuation.  They are the same
methods of the same class (:class:`MemoryCombined`), so a wrapper around that class's
methods (``bench.stores.count_store_calls``) sees their calls too; they read the
states directly, so a subclass that must see every call -- a test double overriding
``find`` (``testing.MemoryStoreWith``) or a transaction that suspends on purpose --
opens its store with ``MemoryStore(immediate=False)``, and then every transaction
goes through the awaited path.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

import trio

from zlink_trio.core.placement import reminder_partition
from zlink_trio.store.rules import claims, combined, membership, recovery
from zlink_trio.store.rules import location as loc
from zlink_trio.store.rules import operator as ops
from zlink_trio.store.rules import relocation_steps as steps
from zlink_trio.store.rules import relocation_store as rel
from zlink_trio.store.rules import reminders as rem
from zlink_trio.store.rules import state as spot_state

if TYPE_CHECKING:
    from collections.abc import Sequence

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
        FirstRecordCleanup,
        InboxRecord,
        LocationStatistics,
        Page,
        RelocationStatistics,
        SavedState,
        StoredReminder,
    )

__all__ = ("MemoryCombined", "MemoryLocationStore", "MemoryRelocationStore", "MemoryStore")


def _heap_key(reminder: StoredReminder) -> tuple[str, int]:
    return (reminder.mesh, reminder_partition(reminder.spot_id))


class _WakeIndex:
    """The reminders of each partition by wake: a heap of ``(wake, spot_id, name)`` per
    Mesh and partition, pushed at every write that sets a wake and checked against the state when
    popped (an entry whose reminder changed or went is dropped), so a take pops only what
    is due in its partitions."""

    __slots__ = ("_heaps", "_pushed", "_rebuild_at")

    def __init__(self) -> None:
        self._heaps: dict[tuple[str, int], list[tuple[float, str, str]]] = {}
        self._pushed = 0
        self._rebuild_at = 1024

    def push(self, state: loc.LocationState, reminder: StoredReminder) -> None:
        heapq.heappush(self._heaps.setdefault(_heap_key(reminder), []),
                       (reminder.wake, reminder.spot_id, reminder.name))
        self._pushed += 1
        if self._pushed >= self._rebuild_at:  # drop the stale entries, now and then
            self._heaps = {}
            live = [r for kept in state.reminders.values() for r in kept]
            for r in live:
                self._heaps.setdefault(_heap_key(r), []).append(
                    (r.wake, r.spot_id, r.name))
            for heap in self._heaps.values():
                heapq.heapify(heap)
            self._pushed, self._rebuild_at = len(live), 2 * len(live) + 1024

    def due(self, state: loc.LocationState, mesh: str, partitions: Sequence[int],
            now: float, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` keys due at ``now`` in ``partitions``, in ``scan_order``;
        the caller takes them (and pushes their new wakes) at once."""
        found: list[tuple[float, str, str]] = []
        for partition in partitions:
            heap = self._heaps.get((mesh, partition))
            kept = 0
            while heap and heap[0][0] <= now and kept < limit:
                wake, spot_id, name = heapq.heappop(heap)
                current = next((r for r in state.reminders.get(spot_id, ())
                                if r.name == name), None)
                if current is not None and current.wake == wake:
                    found.append((wake, spot_id, name))
                    kept += 1
        found.sort()
        for entry in found[limit:]:  # not taken this time: still due
            heapq.heappush(self._heaps[mesh, reminder_partition(entry[1])], entry)
        return [(spot_id, name) for _, spot_id, name in found[:limit]]


class MemoryLocationStore:
    """A :class:`~zlink_trio.store.LocationStore` in memory; see the protocol for contracts."""

    def __init__(self) -> None:
        #: The plain state; tests may read it (never write it) to check invariants.
        self.state = loc.LocationState()
        self._wakes = _WakeIndex()

    async def new_claim(self, descriptor: NodeDescriptor, *, now: float,
                        lease: float) -> NodeClaim:
        """NewClaim (one transaction); see ``LocationStore.new_claim``."""
        await trio.lowlevel.checkpoint()
        return claims.txn_new_claim(self.state, descriptor, now=now, lease=lease)

    async def renew(self, mesh: str, node_rid: NodeRid, lifecycle_generation: int, *,
                    now: float, lease: float) -> NodeClaim:
        """Renew (one transaction); see ``LocationStore.renew``."""
        await trio.lowlevel.checkpoint()
        return claims.txn_renew(self.state, mesh, node_rid, lifecycle_generation, now=now,
                             lease=lease)

    async def close_placement(self, mesh: str, node_rid: NodeRid,
                              lifecycle_generation: int) -> bool:
        """ClosePlacement (one transaction); see ``LocationStore.close_placement``."""
        await trio.lowlevel.checkpoint()
        return claims.txn_close_placement(self.state, mesh, node_rid, lifecycle_generation)

    async def open_placement(self, mesh: str, node_rid: NodeRid,
                             lifecycle_generation: int) -> bool:
        """OpenPlacement (one transaction); see ``LocationStore.open_placement``."""
        await trio.lowlevel.checkpoint()
        return claims.txn_open_placement(self.state, mesh, node_rid, lifecycle_generation)

    async def remove(self, mesh: str, node_rid: NodeRid, lifecycle_generation: int) -> bool:
        """Remove (one transaction); see ``LocationStore.remove``."""
        await trio.lowlevel.checkpoint()
        return claims.txn_remove(self.state, mesh, node_rid, lifecycle_generation)

    async def descriptors(self, mesh: str | None = None, *, now: float) -> list[NodeClaim]:
        """Live claims (one read); see ``LocationStore.descriptors``."""
        await trio.lowlevel.checkpoint()
        return claims.txn_descriptors(self.state, mesh, now=now)

    async def dead_claims(self, mesh: str | None = None, *, now: float) -> list[NodeClaim]:
        """Claims whose lease is over (one read); see ``LocationStore.dead_claims``."""
        await trio.lowlevel.checkpoint()
        return claims.txn_dead_claims(self.state, mesh, now=now)

    async def find(self, spot_id: str) -> AuthorityRecord | None:
        """The record or ``None`` (one read); see ``LocationStore.find``."""
        await trio.lowlevel.checkpoint()
        return self.state.records.get(spot_id)

    async def reserve(self, spot_id: str, *, kind: SpotKind, stable_type: str, mesh: str,
                      owner: OwnerFence, now: float,
                      creation_intent: CreationIntent | None = None,
                      recovery_pointer: RecoveryPointer | None = None,
                      container: str | None = None) -> ReservationFence:
        """Reserve (one transaction); see ``LocationStore.reserve``."""
        await trio.lowlevel.checkpoint()
        return loc.txn_reserve(self.state, spot_id, kind=kind, stable_type=stable_type,
                               mesh=mesh, owner=owner, now=now,
                               creation_intent=creation_intent,
                               recovery_pointer=recovery_pointer, container=container)

    async def move_membership(self, actor_id: str, *, object_generation: int,
                              owner: OwnerFence, container: str,
                              now: float) -> AuthorityRecord:
        """MoveMembership (one transaction); see ``LocationStore.move_membership``."""
        await trio.lowlevel.checkpoint()
        return membership.txn_move_membership(
            self.state, actor_id, object_generation=object_generation, owner=owner,
            container=container, now=now)

    async def members(self, container: str) -> list[AuthorityRecord]:
        """The Actor records naming ``container`` (one read); see ``LocationStore.members``."""
        await trio.lowlevel.checkpoint()
        return membership.txn_members(self.state, container)

    async def commit_ready(self, fence: ReservationFence, *, now: float) -> AuthorityRecord:
        """CommitReady (one transaction); see ``LocationStore.commit_ready``."""
        await trio.lowlevel.checkpoint()
        return loc.txn_commit_ready(self.state, fence, now=now)

    async def abort_creating(self, fence: ReservationFence) -> bool:
        """AbortCreating (one transaction); see ``LocationStore.abort_creating``."""
        await trio.lowlevel.checkpoint()
        return loc.txn_abort_creating(self.state, fence)

    async def begin_close(self, spot_id: str, *, object_generation: int, owner: OwnerFence,
                          now: float, expected_owner_generation: int | None = None,
                          expected_store_version: int | None = None
                          ) -> AuthorityRecord | None:
        """BeginClose (one transaction); see ``LocationStore.begin_close``."""
        await trio.lowlevel.checkpoint()
        return loc.txn_begin_close(self.state, spot_id, object_generation=object_generation,
                                   owner=owner, now=now,
                                   expected_owner_generation=expected_owner_generation,
                                   expected_store_version=expected_store_version)

    async def release(self, fence: AuthorityFence) -> bool:
        """Release (one transaction); see ``LocationStore.release``."""
        await trio.lowlevel.checkpoint()
        return loc.txn_release(self.state, fence)

    async def release_expired(self, spot_id: str, *, object_generation: int,
                              owner_generation: int, now: float) -> AuthorityRecord:
        """ReleaseExpired (one transaction); see ``LocationStore.release_expired``."""
        await trio.lowlevel.checkpoint()
        return ops.txn_release_expired(self.state, spot_id,
                                            object_generation=object_generation,
                                            owner_generation=owner_generation, now=now)

    async def remove_recovery_pointer(self, spot_id: str, *, object_generation: int,
                                      expected_version: int) -> bool:
        """RemoveRecoveryPointer (one transaction); see the protocol."""
        await trio.lowlevel.checkpoint()
        return loc.txn_remove_recovery_pointer(self.state, spot_id,
                                               object_generation=object_generation,
                                               expected_version=expected_version)

    async def save_state(self, fence: AuthorityFence, data: bytes, *,
                         now: float) -> SavedState:
        """SaveState (one transaction); see ``StateSteps.save_state``."""
        await trio.lowlevel.checkpoint()
        return spot_state.txn_save_state(self.state, fence, data, now=now)

    async def load_state(self, spot_id: str) -> SavedState | None:
        """LoadState (one read); see ``StateSteps.load_state``."""
        await trio.lowlevel.checkpoint()
        return spot_state.txn_load_state(self.state, spot_id)

    async def clear_state(self, fence: AuthorityFence, *, now: float) -> bool:
        """ClearState (one transaction); see ``StateSteps.clear_state``."""
        await trio.lowlevel.checkpoint()
        return spot_state.txn_clear_state(self.state, fence, now=now)

    async def set_reminder(self, fence: AuthorityFence, name: str, *, due: float,
                           period: float | None, now: float) -> StoredReminder:
        """SetReminder (one transaction); see ``ReminderSteps.set_reminder``."""
        await trio.lowlevel.checkpoint()
        reminder = rem.txn_set_reminder(self.state, fence, name, due=due, period=period,
                                        now=now)
        self._wakes.push(self.state, reminder)
        return reminder

    async def cancel_reminder(self, fence: AuthorityFence, name: str, *,
                              now: float) -> bool:
        """CancelReminder (one transaction); see ``ReminderSteps.cancel_reminder``."""
        await trio.lowlevel.checkpoint()
        return rem.txn_cancel_reminder(self.state, fence, name, now=now)

    async def reminders(self, spot_id: str) -> tuple[StoredReminder, ...]:
        """Reminders (one read); see ``ReminderSteps.reminders``."""
        await trio.lowlevel.checkpoint()
        return rem.txn_reminders(self.state, spot_id)

    async def take_due_reminders(self, mesh: str, partitions: Sequence[int],
                                 taker: OwnerFence, *, now: float, hold: float,
                                 limit: int) -> list[StoredReminder]:
        """TakeDueReminders (one transaction); see ``ReminderSteps.take_due_reminders``."""
        await trio.lowlevel.checkpoint()
        taken = rem.txn_take_due_reminders(
            self.state, mesh, partitions, taker, now=now, hold=hold, limit=limit,
            candidates=lambda wanted: self._wakes.due(self.state, mesh, wanted, now, limit))
        for reminder in taken:
            self._wakes.push(self.state, reminder)
        return taken

    async def reminder_done(self, taken: StoredReminder, *, now: float) -> bool:
        """ReminderDone (one transaction); see ``ReminderSteps.reminder_done``."""
        await trio.lowlevel.checkpoint()
        done = rem.txn_reminder_done(self.state, taken, now=now)
        if done:
            for reminder in self.state.reminders.get(taken.spot_id, ()):
                if reminder.name == taken.name:  # repeating: its next due
                    self._wakes.push(self.state, reminder)
        return done

    async def drop_reminders(self, spot_id: str) -> int:
        """DropReminders (one transaction); see ``ReminderSteps.drop_reminders``."""
        await trio.lowlevel.checkpoint()
        return rem.txn_drop_reminders(self.state, spot_id)

    async def begin_relocation(self, fence: AuthorityFence, *, target: OwnerFence,
                               now: float, container: str | None = None,
                               members_stay: bool = False,
                               carry_members: bool = False) -> AuthorityRecord:
        """BeginRelocation (one transaction); see the protocol."""
        await trio.lowlevel.checkpoint()
        return steps.txn_begin_relocation(self.state, fence, target=target, now=now,
                                          container=container, members_stay=members_stay,
                                          carry_members=carry_members)

    async def seal_relocation(self, fence: AuthorityFence, *, now: float) -> AuthorityRecord:
        """Seal (one transaction); see the protocol."""
        await trio.lowlevel.checkpoint()
        return steps.txn_seal_relocation(self.state, fence, now=now)

    async def accept_relay_ready(self, fence: AuthorityFence, *, target: OwnerFence,
                                 now: float) -> AuthorityRecord:
        """AcceptRelayReady (one transaction); see the protocol."""
        await trio.lowlevel.checkpoint()
        return steps.txn_accept_relay_ready(self.state, fence, target=target, now=now)

    async def commit_relocation(self, fence: AuthorityFence, *, now: float) -> AuthorityRecord:
        """CommitRelocation (one transaction); see the protocol."""
        await trio.lowlevel.checkpoint()
        return steps.txn_commit_relocation(self.state, fence, now=now)

    async def abort_relocation(self, fence: AuthorityFence) -> AuthorityRecord:
        """AbortRelocation (one transaction); see the protocol."""
        await trio.lowlevel.checkpoint()
        return steps.txn_abort_relocation(self.state, fence)

    async def record_relocation_payload(self, fence: AuthorityFence, *, payload: RootReceipt,
                                        now: float) -> AuthorityRecord:
        """RecordRelocationPayload (one transaction); see the protocol."""
        await trio.lowlevel.checkpoint()
        return steps.txn_record_relocation_payload(self.state, fence, payload=payload, now=now)

    async def release_relay_ready(self, fence: AuthorityFence, *, target: OwnerFence,
                                  now: float) -> AuthorityRecord | None:
        """ReleaseRelayReady (one transaction); see the protocol."""
        await trio.lowlevel.checkpoint()
        return steps.txn_release_relay_ready(self.state, fence, target=target, now=now)

    async def query(self, *, page_size: int, cursor: str | None = None) -> Page:
        """One Query page (one read); see ``LocationStore.query``."""
        await trio.lowlevel.checkpoint()
        return loc.txn_query(self.state, page_size=page_size, cursor=cursor)

    async def statistics(self) -> LocationStatistics:
        """A snapshot of counts; see ``LocationStore.statistics``."""
        await trio.lowlevel.checkpoint()
        return loc.txn_statistics(self.state)

    async def orphans(self, node_id: str, *, now: float, after: str | None = None,
                      limit: int = 1000) -> list[AuthorityRecord]:
        """Incomplete activations of a dead lifecycle (one read); see the protocol."""
        await trio.lowlevel.checkpoint()
        return recovery.txn_orphans(self.state, node_id, now=now, after=after, limit=limit)

    async def dead_owned(self, node_id: str, *, now: float, after: str | None = None,
                         limit: int = 1000) -> list[AuthorityRecord]:
        """Every record of a dead lifecycle (one read); see the protocol."""
        await trio.lowlevel.checkpoint()
        return recovery.txn_dead_owned(self.state, node_id, now=now, after=after, limit=limit)

    async def remove_dead_claims(self, node_id: str, *, now: float) -> int:
        """RemoveDeadClaims (one transaction); see the protocol."""
        await trio.lowlevel.checkpoint()
        return recovery.txn_remove_dead_claims(self.state, node_id, now=now)

    async def adopt_orphan(self, spot_id: str, *, object_generation: int,
                           owner_generation: int, old_owner: OwnerFence,
                           new_owner: OwnerFence, now: float) -> AuthorityRecord:
        """AdoptOrphan (one transaction); see ``LocationStore.adopt_orphan``."""
        await trio.lowlevel.checkpoint()
        return recovery.txn_adopt_orphan(self.state, spot_id,
                                         object_generation=object_generation,
                                         owner_generation=owner_generation,
                                         old_owner=old_owner, new_owner=new_owner, now=now)


class MemoryRelocationStore:
    """A :class:`~zlink_trio.store.RelocationStore` in memory; see the protocol for contracts."""

    def __init__(self) -> None:
        #: The plain state; tests may read it (never write it).
        self.state = rel.RelocationState()

    async def put_root(self, data: bytes) -> RootReceipt:
        """PutRoot (one transaction); see ``RelocationStore.put_root``."""
        await trio.lowlevel.checkpoint()
        return rel.txn_put_root(self.state, data)

    async def get_root(self, receipt: RootReceipt) -> bytes:
        """GetRoot (one read); see ``RelocationStore.get_root``."""
        await trio.lowlevel.checkpoint()
        return rel.txn_get_root(self.state, receipt)

    async def delete_root(self, receipt: RootReceipt) -> bool:
        """DeleteRoot (one transaction); see ``RelocationStore.delete_root``."""
        await trio.lowlevel.checkpoint()
        return rel.txn_delete_root(self.state, receipt)

    async def inbox_append(self, spot_id: str, object_generation: int, record: bytes) -> int:
        """InboxAppend (one transaction); see ``RelocationStore.inbox_append``."""
        await trio.lowlevel.checkpoint()
        return rel.txn_inbox_append(self.state, spot_id, object_generation, record)

    async def inbox_read(self, spot_id: str, object_generation: int, *, after: int = 0,
                         limit: int) -> list[InboxRecord]:
        """InboxRead (one read); see ``RelocationStore.inbox_read``."""
        await trio.lowlevel.checkpoint()
        return rel.txn_inbox_read(self.state, spot_id, object_generation, after=after,
                                  limit=limit)

    async def inbox_set_cursor(self, spot_id: str, object_generation: int, seq: int) -> bool:
        """InboxSetCursor (one transaction); see ``RelocationStore.inbox_set_cursor``."""
        await trio.lowlevel.checkpoint()
        return rel.txn_inbox_set_cursor(self.state, spot_id, object_generation, seq)

    async def inbox_cursor(self, spot_id: str, object_generation: int) -> int:
        """InboxCursor (one read); see ``RelocationStore.inbox_cursor``."""
        await trio.lowlevel.checkpoint()
        return rel.txn_inbox_cursor(self.state, spot_id, object_generation)

    async def inbox_drop(self, spot_id: str, object_generation: int) -> bool:
        """InboxDrop (one transaction); see ``RelocationStore.inbox_drop``."""
        await trio.lowlevel.checkpoint()
        return rel.txn_inbox_drop(self.state, spot_id, object_generation)

    async def statistics(self) -> RelocationStatistics:
        """A snapshot of counts; see ``RelocationStore.statistics``."""
        await trio.lowlevel.checkpoint()
        return rel.txn_statistics(self.state)


class MemoryCombined:
    """The combined cold-activation transactions over both memory stores (one process).

    See ``CombinedTransactions`` for the contracts; each method is one critical
    section after a checkpoint, like every other memory method -- or, for
    ``MemoryStore.immediate`` (``checkpoint=False``), with no checkpoint: its
    coroutines never suspend (``ImmediateTransactions``, which adds ``find``). It
    works on the stores' states directly, so it bypasses any method a subclass
    overrides.
    """

    __slots__ = ("_checkpoint", "_store")

    def __init__(self, store: MemoryStore, *, checkpoint: bool = True) -> None:
        # Read the halves through the store at each call: a subclass (tests) may swap
        # its Location Store after construction.
        self._store = store
        self._checkpoint = checkpoint

    async def find(self, spot_id: str) -> AuthorityRecord | None:
        """The record or ``None`` (one read); see ``LocationStore.find``."""
        if self._checkpoint:
            await trio.lowlevel.checkpoint()
        return self._store.location.state.records.get(spot_id)

    async def reserve_with_root(self, spot_id: str, root: bytes, *, kind: SpotKind,
                                stable_type: str, mesh: str, owner: OwnerFence,
                                now: float) -> tuple[ReservationFence, RootReceipt]:
        """PutRoot + Reserve (one transaction); see the protocol."""
        if self._checkpoint:
            await trio.lowlevel.checkpoint()
        return combined.txn_reserve_with_root(
            self._store.location.state, self._store.relocation.state, spot_id, root, kind=kind,
            stable_type=stable_type, mesh=mesh, owner=owner, now=now)

    async def commit_ready_with_first_record(self, fence: ReservationFence, record: bytes, *,
                                             now: float) -> tuple[AuthorityRecord, int]:
        """InboxAppend + CommitReady (one transaction); see the protocol."""
        if self._checkpoint:
            await trio.lowlevel.checkpoint()
        return combined.txn_commit_ready_with_first_record(
            self._store.location.state, self._store.relocation.state, fence, record, now=now)

    async def finish_first_record(self, spot_id: str, object_generation: int, *, seq: int,
                                  expected_version: int,
                                  root: RootReceipt) -> FirstRecordCleanup:
        """Cursor + pointer CAS + root deletion (one transaction); see the protocol."""
        if self._checkpoint:
            await trio.lowlevel.checkpoint()
        return combined.txn_finish_first_record(
            self._store.location.state, self._store.relocation.state, spot_id,
            object_generation, seq=seq, expected_version=expected_version, root=root)


class MemoryStore:
    """A Location Store and a Relocation Store in memory, shareable in one process.

    Several nodes may use one instance; they then see one authority namespace,
    like nodes sharing a SQLite file or a Redis server.
    """

    def __init__(self, *, immediate: bool = True) -> None:
        """``immediate=False``: offer no :attr:`immediate` transactions, so every call
        reaches the methods a subclass or a test overrides (see the module docstring)."""
        self._location = MemoryLocationStore()
        self._relocation = MemoryRelocationStore()
        self._combined = MemoryCombined(self)
        self._immediate = MemoryCombined(self, checkpoint=False) if immediate else None

    @property
    def immediate(self) -> MemoryCombined | None:
        """The cold activation's transactions without their checkpoint, or ``None`` for a
        store opened with ``immediate=False`` (see the module docstring)."""
        return self._immediate

    @property
    def combined(self) -> MemoryCombined:
        """Both stores live in this process: the combined transactions (one section each)."""
        return self._combined

    @property
    def location(self) -> MemoryLocationStore:
        """The Location Store."""
        return self._location

    @property
    def relocation(self) -> MemoryRelocationStore:
        """The Relocation Store (a separate key space)."""
        return self._relocation


if TYPE_CHECKING:
    from zlink_trio.store.combined_protocol import ImmediateTransactions
    from zlink_trio.store.protocol import (
        CombinedTransactions,
        LocationStore,
        RelocationStore,
        Store,
    )

    def _conforms(store: MemoryStore, immediate: MemoryCombined
                  ) -> tuple[LocationStore, RelocationStore, Store, CombinedTransactions,
                             ImmediateTransactions]:
        # mypy proves here that the memory classes satisfy the protocols.
        return store.location, store.relocation, store, store.combined, immediate

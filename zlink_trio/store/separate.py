"""The combined transactions as separate protocol calls, for a store without its own.

Theory of operation
-------------------
Every :class:`Store` has ``combined`` (``protocol.CombinedTransactions``). Each
built-in backend implements it with one transaction per group; a third-party store
that offers only a Location and a Relocation Store gets it from
:func:`with_combined`, which wraps it so that ``combined`` is a
:class:`SeparateSteps` over its two halves. :class:`SeparateSteps` makes exactly
the calls the runtime made before the groups existed, in the same order and with
the same recovery after a refusal:

- ``reserve_with_root``: ``put_root``, then ``reserve`` with the recovery pointer
  naming the receipt; if Reserve raises anything (``AuthorityExists`` included) the
  root is deleted again before the error propagates. Between the two calls the
  root exists without a record that points to it (a kill there leaves an orphan
  root).
- ``commit_ready_with_first_record``: ``inbox_append`` of the first record, then
  ``commit_ready``. A refused CommitReady leaves the appended record (the caller
  aborts the creation and drops the inbox); a retry appends again.
- ``finish_first_record``: ``inbox_set_cursor``, then ``remove_recovery_pointer``
  by expected-version CAS -- on :class:`StaleFence` it re-reads the record once
  and, if it still has this generation and a pointer, retries with the current
  StoreVersion -- then ``delete_root``. A refusal stops the sequence: the steps
  before it stay done (each is idempotent, so the whole call can be retried). The
  runtime also uses it when a built-in ``finish_first_record`` refuses with
  StaleFence (a close changed the record since Ready), for that re-read.

:class:`SplitStore` is a store whose halves live in two backends
(``open_store(url, relocation=url2)``): it always has :class:`SeparateSteps` as
``combined``, since no transaction spans two backends.

Each step keeps its own guarantees (one transaction each); only the grouping is
lost. ``tests/store/test_combined_conformance.py`` runs the same suite against the
built-in transactions and against this adapter over every backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from zlink_trio.core.errors import StaleFence
from zlink_trio.core.records import RecoveryPointer
from zlink_trio.store.values import AuthorityExists, FirstRecordCleanup

if TYPE_CHECKING:
    from zlink_trio.core.identity import SpotKind
    from zlink_trio.core.records import (
        AuthorityRecord,
        OwnerFence,
        ReservationFence,
        RootReceipt,
    )
    from zlink_trio.store.protocol import (
        CombinedTransactions,
        LocationStore,
        RelocationStore,
        Store,
        StorePair,
    )

__all__ = ("SeparateSteps", "SplitStore", "with_combined")


class SeparateSteps:
    """``CombinedTransactions`` as separate calls on ``location`` and ``relocation``.

    See the module docstring for the calls each method makes; the contracts of the
    single methods hold for each call.
    """

    def __init__(self, location: LocationStore, relocation: RelocationStore) -> None:
        self.location = location
        self.relocation = relocation

    async def reserve_with_root(self, spot_id: str, root: bytes, *, kind: SpotKind,
                                stable_type: str, mesh: str, owner: OwnerFence,
                                now: float) -> tuple[ReservationFence, RootReceipt]:
        """PutRoot, then Reserve naming it; the root is deleted again if Reserve raises --
        unless the record that exists names that very root (an identical root is kept:
        the same activation's envelope, written by an attempt that landed)."""
        receipt = await self.relocation.put_root(root)
        try:
            fence = await self.location.reserve(
                spot_id, kind=kind, stable_type=stable_type, mesh=mesh, owner=owner, now=now,
                recovery_pointer=RecoveryPointer.from_receipt(receipt))
        except AuthorityExists as exists:
            pointer = exists.current.recovery_pointer
            if pointer is None or pointer.receipt() != receipt:
                await self.relocation.delete_root(receipt)
            raise
        except Exception:
            await self.relocation.delete_root(receipt)
            raise
        return fence, receipt

    async def commit_ready_with_first_record(self, fence: ReservationFence, record: bytes, *,
                                             now: float) -> tuple[AuthorityRecord, int]:
        """InboxAppend of the first record, then CommitReady: (Ready record, sequence)."""
        seq = await self.relocation.inbox_append(fence.spot_id, fence.object_generation,
                                                 record)
        ready = await self.location.commit_ready(fence, now=now)
        return ready, seq

    async def finish_first_record(self, spot_id: str, object_generation: int, *, seq: int,
                                  expected_version: int,
                                  root: RootReceipt) -> FirstRecordCleanup:
        """InboxSetCursor, RemoveRecoveryPointer (re-read once on StaleFence), DeleteRoot."""
        moved = await self.relocation.inbox_set_cursor(spot_id, object_generation, seq)
        removed = await self._remove_pointer(spot_id, object_generation, expected_version)
        deleted = await self.relocation.delete_root(root)
        return FirstRecordCleanup(moved, removed, deleted)

    async def _remove_pointer(self, spot_id: str, generation: int, version: int) -> bool:
        location = self.location
        try:
            return await location.remove_recovery_pointer(
                spot_id, object_generation=generation, expected_version=version)
        except StaleFence:
            # The record changed since Ready (a close began): re-read once and retry.
            record = await location.find(spot_id)
            if (record is None or record.object_generation != generation
                    or record.recovery_pointer is None):
                return False
            return await location.remove_recovery_pointer(
                spot_id, object_generation=generation, expected_version=record.store_version)


class SplitStore:
    """A :class:`Store` whose two halves live apart; ``combined`` is :class:`SeparateSteps`.

    What ``open_store(url, relocation=url2)`` yields: the Location Store of one
    backend and the Relocation Store of another (the Relocation Store may share a
    Redis deployment with the Location Store, but not a keyspace). No transaction can span two
    backends, so the combined cold-activation groups are the separate calls.
    """

    def __init__(self, location: LocationStore, relocation: RelocationStore) -> None:
        self._location = location
        self._relocation = relocation
        self._combined = SeparateSteps(location, relocation)

    @property
    def location(self) -> LocationStore:
        """The Location Store (authority, descriptors, capacity)."""
        return self._location

    @property
    def relocation(self) -> RelocationStore:
        """The Relocation Store (roots, inboxes), in its own backend."""
        return self._relocation

    @property
    def combined(self) -> SeparateSteps:
        """The separate steps over the two halves."""
        return self._combined


class _WithSeparateSteps(SplitStore):
    """A store without ``combined``, completed by :class:`SeparateSteps` over its halves.

    Every other attribute is the wrapped store's.
    """

    def __init__(self, store: StorePair) -> None:
        super().__init__(store.location, store.relocation)
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def with_combined(store: StorePair) -> Store:
    """``store`` itself when it has ``combined``; else it with :class:`SeparateSteps`.

    The result is a full :class:`Store`: every built-in store is returned as is; a
    store offering only ``location`` and ``relocation`` is wrapped so that
    ``combined`` makes the separate calls (every other attribute is the store's own).
    """
    if getattr(store, "combined", None) is not None:
        return cast("Store", store)
    return _WithSeparateSteps(store)


if TYPE_CHECKING:
    def _conforms(steps: SeparateSteps, split: SplitStore) -> tuple[CombinedTransactions,
                                                                   Store]:
        # mypy proves here that the adapter and the split store satisfy the protocols.
        return steps, split

"""The ``memory://`` store's synchronous transactions (``MemoryStore.immediate``).

:class:`MemoryImmediate` runs the cold activation's four store calls -- the same
``store.rules`` functions as ``MemoryLocationStore.find`` and ``MemoryCombined`` --
without their checkpoint, on the same states, one critical section each
(``store.immediate`` says what for; ``store.memory`` when it is offered).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zlink_trio.store.rules import combined

if TYPE_CHECKING:
    from zlink_trio.core.identity import SpotKind
    from zlink_trio.core.records import (
        AuthorityRecord,
        OwnerFence,
        ReservationFence,
        RootReceipt,
    )
    from zlink_trio.store.rules import location as loc
    from zlink_trio.store.rules import relocation_store as rel
    from zlink_trio.store.values import FirstRecordCleanup

__all__ = ("MemoryImmediate",)


class MemoryImmediate:
    """The cold activation's four store calls without a checkpoint (``store.immediate``).

    Each runs the same transaction function as the ``async`` method of the same name,
    on the same states, in one critical section; only the checkpoint is left out.
    """

    __slots__ = ("_location", "_relocation")

    def __init__(self, location: loc.LocationState, relocation: rel.RelocationState) -> None:
        self._location = location
        self._relocation = relocation

    def find(self, spot_id: str) -> AuthorityRecord | None:
        """``MemoryLocationStore.find`` without the checkpoint."""
        return self._location.records.get(spot_id)

    def reserve_with_root(self, spot_id: str, root: bytes, *, kind: SpotKind,
                          stable_type: str, mesh: str, owner: OwnerFence,
                          now: float) -> tuple[ReservationFence, RootReceipt]:
        """``MemoryCombined.reserve_with_root`` without the checkpoint."""
        return combined.txn_reserve_with_root(
            self._location, self._relocation, spot_id, root, kind=kind,
            stable_type=stable_type, mesh=mesh, owner=owner, now=now)

    def commit_ready_with_first_record(self, fence: ReservationFence, record: bytes, *,
                                       now: float) -> tuple[AuthorityRecord, int]:
        """``MemoryCombined.commit_ready_with_first_record`` without the checkpoint."""
        return combined.txn_commit_ready_with_first_record(
            self._location, self._relocation, fence, record, now=now)

    def finish_first_record(self, spot_id: str, object_generation: int, *, seq: int,
                            expected_version: int, root: RootReceipt) -> FirstRecordCleanup:
        """``MemoryCombined.finish_first_record`` without the checkpoint."""
        return combined.txn_finish_first_record(
            self._location, self._relocation, spot_id, object_generation, seq=seq,
            expected_version=expected_version, root=root)

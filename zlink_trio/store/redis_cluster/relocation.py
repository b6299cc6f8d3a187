"""The Redis Cluster Relocation Store and combined transactions (bucket scripts).

Theory of operation
-------------------
Roots live in the bucket of their ref, inboxes in the bucket of their Spot ID
(``keys``), so every Relocation Store transaction is one bucket script: the
single-Redis classes run unchanged on the cluster runner, except ``statistics``, which
sums every bucket's counts.

The root of a cold activation is kept beside its Spot's record instead: its ref names
the Spot's bucket (``ClusterKeys.root_ref_beside``: the content ref and ``@b<k>``), so
each combined transaction is one bucket script, the single-Redis one
(``store.redis.combined``): ``reserve_with_root`` (the owner's unit taken first, as for
Reserve), ``commit_ready_with_first_record`` and ``finish_first_record``, every check
before the first write, a refusal writing nothing. A receipt whose root lives in another
bucket (one ``put_root`` stored) is finished in two steps: the inbox cursor and the
pointer in the Spot's bucket (one script, refusals before writes), then the root's
deletion in its bucket (the SHA-1-guarded DeleteRoot). A root that is not the receipt's
bytes is refused (:class:`RootIntegrityError`) before anything moves, as on one Redis.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from zlink_trio.core.records import RootReceipt
from zlink_trio.store.redis.codec import raise_status, text
from zlink_trio.store.redis.combined import RedisCombined
from zlink_trio.store.redis.relocation import RedisRelocationStore
from zlink_trio.store.rules.combined import check_finish_args
from zlink_trio.store.rules.relocation_store import (
    MAX_SEQ,
    check_cursor_move,
)
from zlink_trio.store.values import FirstRecordCleanup, RelocationStatistics

if TYPE_CHECKING:
    from zlink_trio.store.redis_cluster.keys import ClusterKeys
    from zlink_trio.store.redis_cluster.location import ClusterLocationStore
    from zlink_trio.store.redis_cluster.runner import ClusterRunner

__all__ = ("ClusterCombined", "ClusterRelocationStore")


class ClusterRelocationStore(RedisRelocationStore):
    """A :class:`~zlink_trio.store.RelocationStore` on Redis Cluster."""

    location: ClusterLocationStore

    async def statistics(self) -> RelocationStatistics:
        """Counts summed over every bucket; see the protocol."""
        _, totals, _ = await self.location.totals()
        return RelocationStatistics(roots=totals[0], root_bytes=totals[1], inboxes=totals[2],
                                    inbox_records=totals[3])


class ClusterCombined(RedisCombined):
    """The combined transactions of a cluster store (see the module docstring)."""

    location: ClusterLocationStore
    _run: ClusterRunner  # type: ignore[assignment]  # the cluster's runner, same interface
    _keys: ClusterKeys

    def _root_receipt(self, spot_id: str, receipt: RootReceipt) -> RootReceipt:
        """The content ``receipt``, its ref naming ``spot_id``'s bucket."""
        return RootReceipt(ref=self._keys.root_ref_beside(receipt.ref, spot_id),
                           sha256=receipt.sha256, size=receipt.size)

    async def finish_first_record(self, spot_id: str, object_generation: int, *, seq: int,
                                  expected_version: int,
                                  root: RootReceipt) -> FirstRecordCleanup:
        """One script where the root is in the Spot's bucket, else two steps (see the
        module docstring)."""
        check_finish_args(spot_id, object_generation, seq, expected_version, root)
        if self._keys.root_bucket(root.ref) == self._keys.bucket(spot_id):
            return await super().finish_first_record(
                spot_id, object_generation, seq=seq, expected_version=expected_version,
                root=root)
        what = f"finish_first_record of {spot_id!r}"
        raw = await self._relocation.read_verified(root)  # RootIntegrityError first
        written = "" if raw is None else hashlib.sha1(raw, usedforsecurity=False).hexdigest()
        keys = [*self._keys.inbox(spot_id, object_generation), self._keys.spot(spot_id)]
        reply: list[Any] = await self._run.script(what, "finish_first_record_apart", keys,
                                                  [object_generation, seq, expected_version])
        code = text(reply[0])
        if code in ("BACK", "PAST"):
            value = int(text(reply[1]))
            last, cursor = (value, 0) if code == "PAST" else (MAX_SEQ, value)
            check_cursor_move(spot_id, object_generation, seq, last, cursor)
        raise_status(reply, what)
        deleted = False
        if written:
            done = await self._run.script(f"delete_root {root.ref}", "rel_delete_root",
                                          [self._keys.root(root.ref)], [written])
            deleted = int(done) == 1
            if int(done) < 0:  # the bytes differ from what was written: verify, delete
                deleted = await self._relocation.delete_root(root)
        return FirstRecordCleanup(cursor_moved=bool(int(reply[1])),
                                  pointer_removed=bool(int(reply[2])), root_deleted=deleted)

"""The Redis Cluster Relocation Store and combined transactions (bucket scripts).

Theory of operation
-------------------
Roots live in the bucket of their ref, inboxes in the bucket of their Spot ID
(``keys``), so every Relocation Store transaction is one bucket script: the
single-Redis classes run unchanged on the cluster runner, except ``statistics``, which
sums every bucket's counts.

The combined transactions keep their single-script form where the keys share a
bucket -- ``commit_ready_with_first_record`` (the Spot's record and its inbox) -- and
are two steps where the root's bucket differs from the Spot's:

- ``reserve_with_root``: Reserve (with the recovery pointer) and PutRoot at once, one
  round trip for both (PutRoot is queued for its master before the Reserve starts and its
  answer read after it: no task of its own). A refused Reserve deletes the root its
  PutRoot stored (one that was there before is kept) before the refusal propagates; a
  PutRoot that fails aborts the creation again before its error propagates (a kill in
  between leaves a Creating record whose pointer names a missing root: startup recovery
  aborts it, as it does for any orphan whose root is gone -- the caller never had its
  answer -- or a root no record names).
- ``finish_first_record``: the inbox cursor and the pointer in the Spot's bucket (one
  script, refusals before writes), then the root's deletion in its bucket (the
  SHA-1-guarded DeleteRoot). A root that is not the receipt's bytes is refused
  (:class:`RootIntegrityError`) before anything moves, as on one Redis.
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import TYPE_CHECKING, Any

import trio

from zlink_trio.core.records import RecoveryPointer
from zlink_trio.store.redis.codec import raise_status, text
from zlink_trio.store.redis.combined import RedisCombined, receipt_key
from zlink_trio.store.redis.relocation import RedisRelocationStore
from zlink_trio.store.rules.combined import check_finish_args
from zlink_trio.store.rules.relocation_store import (
    MAX_SEQ,
    check_bytes,
    check_cursor_move,
    receipt_of,
)
from zlink_trio.store.values import FirstRecordCleanup, RelocationStatistics

if TYPE_CHECKING:
    from zlink_trio.core.identity import SpotKind
    from zlink_trio.core.records import OwnerFence, ReservationFence, RootReceipt
    from zlink_trio.store.redis_cluster.location import ClusterLocationStore
    from zlink_trio.store.redis_cluster.runner import ClusterRunner, Started

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

    async def reserve_with_root(self, spot_id: str, root: bytes, *, kind: SpotKind,
                                stable_type: str, mesh: str, owner: OwnerFence,
                                now: float) -> tuple[ReservationFence, RootReceipt]:
        """Reserve (with the pointer) beside PutRoot; see the module docstring."""
        raw = check_bytes(root, "root")
        receipt = receipt_of(raw)
        key = self._keys.root(receipt.ref)
        digest = hashlib.sha1(raw, usedforsecurity=False).hexdigest()
        fence: ReservationFence | None = None
        stored = False  # PutRoot wrote the root (an identical one already there is kept)
        put_error: Exception | None = None
        what = f"put_root {receipt.ref}"

        async def take_back() -> None:
            # Shielded and bounded; if even this fails, startup recovery aborts the
            # creation, and a root left behind is bytes no record names.
            with (trio.CancelScope(shield=True), trio.move_on_after(self._run.timeout),
                  contextlib.suppress(Exception)):
                if fence is not None:
                    await self.location.abort_creating(fence)
                if stored:
                    await self._run.script(what, "rel_delete_root", [key], [digest])

        # PutRoot goes out with its master's next batch, beside the Reserve; both run to
        # their end (a refused Reserve waits for its PutRoot's answer, so that the root it
        # stored is taken back, not left behind).
        put = self._run.start(what, "rel_put_root", [key], [raw])
        reserve_error: Exception | None = None
        try:
            try:
                fence = await self.location.reserve(
                    spot_id, kind=kind, stable_type=stable_type, mesh=mesh, owner=owner,
                    now=now, recovery_pointer=RecoveryPointer.from_receipt(receipt))
            except Exception as error:  # raised below, first
                reserve_error = error
            except BaseException:
                # The PutRoot's answer all the same (bounded: its store timeout).
                with trio.CancelScope(shield=True), contextlib.suppress(Exception):
                    stored = await self._stored(what, key, raw, put)
                raise
            try:
                stored = await self._stored(what, key, raw, put)
            except Exception as error:  # raised below, after the Reserve's
                put_error = error
        except BaseException:
            await take_back()
            raise
        if reserve_error is not None or put_error is not None:
            await take_back()
            raise reserve_error or put_error  # type: ignore[misc]
        assert fence is not None
        if len(self._written) > 65_536:
            self._written.clear()
        self._written[receipt_key(receipt)] = digest
        return fence, receipt

    async def _stored(self, what: str, key: str, raw: bytes, put: Started) -> bool:
        """The answer of the PutRoot ``put`` started: whether it stored the root."""
        return int(await self._run.script(what, "rel_put_root", [key], [raw],
                                          started=put)) == 1

    async def finish_first_record(self, spot_id: str, object_generation: int, *, seq: int,
                                  expected_version: int,
                                  root: RootReceipt) -> FirstRecordCleanup:
        """Cursor and pointer in the Spot's bucket, then the root in its own."""
        check_finish_args(spot_id, object_generation, seq, expected_version, root)
        what = f"finish_first_record of {spot_id!r}"
        # Only the very receipt written here skips the read: one with another size or
        # hash is checked against the bytes (RootIntegrityError first, as the oracle).
        written = self._written.pop(receipt_key(root), None)
        if written is None:
            raw = await self._relocation.read_verified(root)  # RootIntegrityError first
            written = "" if raw is None else hashlib.sha1(
                raw, usedforsecurity=False).hexdigest()
        keys = [*self._keys.inbox(spot_id, object_generation), self._keys.spot(spot_id)]
        reply: list[Any] = await self._run.script(what, "finish_first_record", keys,
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

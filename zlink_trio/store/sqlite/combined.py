"""SQLite store: the combined cold-activation transactions (both stores, one file).

Theory of operation
-------------------
The Location and Relocation Stores share one connection and file, so each combined
transaction (``protocol.CombinedTransactions``) is one ``BEGIN IMMEDIATE`` block
that runs the merged steps' bodies one after the other: the oracle over the
``loc_*`` views (``view``), the inbox bodies and the root rows of ``relocation``.
Any refusal raises inside the block and the whole transaction rolls back, so
nothing at all is written; the checks run in the order the protocol documents
(the oracle of ``store.rules.combined`` is the reference for the outcomes). A
transaction that moves more than ``INLINE_MAX_BYTES`` runs in the worker thread,
as every other large one.

The bodies are module functions bound to their arguments with ``functools.partial``,
not closures: a closure is a function and a cell per captured value, alive until its
group ran, and with a hundred activations in flight those objects are what set the
cyclic collector going (measured on PostgreSQL, 3,000 activations with 100 in flight:
384 passes over the youngest generation with closures, 350-358 without).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from zlink_trio.core.records import RecoveryPointer, RootReceipt
from zlink_trio.store.rules import location as loc
from zlink_trio.store.rules import relocation_store as rel
from zlink_trio.store.rules.combined import check_finish_args
from zlink_trio.store.rules.location import capacity_key, pointer_removal
from zlink_trio.store.rules.relocation_store import receipt_of
from zlink_trio.store.sqlite.relocation import (
    append_sync,
    delete_root,
    inbox_state,
    insert_root,
    load_root,
    set_cursor_sync,
    write_cursor_sync,
)
from zlink_trio.store.sqlite.session import Prefetch
from zlink_trio.store.sqlite.view import LocationView
from zlink_trio.store.values import FirstRecordCleanup

if TYPE_CHECKING:
    from zlink_trio.core.identity import SpotKind
    from zlink_trio.core.records import AuthorityRecord, OwnerFence, ReservationFence
    from zlink_trio.store.sqlite.session import SqlDatabase, SqlSession

__all__ = ("SqliteCombined",)


def _reserve_body(spot_id: str, kind: SpotKind, stable_type: str, mesh: str,
                  owner: OwnerFence, now: float, pointer: RecoveryPointer,
                  receipt: RootReceipt, raw: bytes,
                  conn: SqlSession) -> tuple[ReservationFence, RootReceipt]:
    view = LocationView(conn)
    fence = loc.txn_reserve(view.state, spot_id, kind=kind, stable_type=stable_type,
                            mesh=mesh, owner=owner, now=now, recovery_pointer=pointer)
    view.flush()
    insert_root(conn, receipt.ref, raw, or_ignore=True)
    return fence, receipt


def _commit_ready_body(fence: ReservationFence, now: float, key: tuple[str, int], raw: bytes,
                       conn: SqlSession) -> tuple[AuthorityRecord, int]:
    view = LocationView(conn, generation=False)  # CommitReady issues no generation
    before = view.state.records.get(fence.spot_id)
    ready = loc.txn_commit_ready(view.state, fence, now=now)
    if ready is before:  # this very commit already happened: write nothing
        found = inbox_state(conn, key)
        return ready, 0 if found is None else found[0]
    view.flush()
    return ready, append_sync(conn, key, raw)


def _finish_body(spot_id: str, object_generation: int, seq: int, expected_version: int,
                 root: RootReceipt, key: tuple[str, int],
                 conn: SqlSession) -> FirstRecordCleanup:
    # Every check first (RootIntegrityError first of all), then the writes.
    state = rel.RelocationState()
    data = load_root(conn, root.ref)
    if data is not None:
        state.roots[root.ref] = data
    delete = rel.verified_root(state, root) is not None  # RootIntegrityError first
    moved = set_cursor_sync(conn, key, seq, check_only=True)
    view = LocationView(conn, generation=False)
    remove = pointer_removal(view.state.records.get(spot_id), object_generation,
                             expected_version)
    if remove:  # the oracle's step, on the view: nothing written yet
        loc.txn_remove_recovery_pointer(view.state, spot_id,
                                        object_generation=object_generation,
                                        expected_version=expected_version)
    # -- writes --
    if moved:
        write_cursor_sync(conn, key, seq)
    if remove:
        view.flush()
    if delete:
        delete_root(conn, root.ref)
    return FirstRecordCleanup(moved, remove, delete)


class SqliteCombined:
    """The combined transactions of a :class:`SqliteStore`; see the protocol."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    async def reserve_with_root(self, spot_id: str, root: bytes, *, kind: SpotKind,
                                stable_type: str, mesh: str, owner: OwnerFence,
                                now: float) -> tuple[ReservationFence, RootReceipt]:
        """PutRoot + Reserve (one transaction); see ``CombinedTransactions``."""
        raw = rel.check_bytes(root, "root")
        receipt = receipt_of(raw)
        pointer = RecoveryPointer.from_receipt(receipt)

        body = partial(_reserve_body, spot_id, kind, stable_type, mesh, owner, now, pointer,
                       receipt, raw)
        # The oracle checks everything before the view is flushed: no savepoint needed.
        return await self._db.write(body, size=len(raw), checks_first=True,
                                    reads=Prefetch(records=(spot_id,), roots=(receipt.ref,),
                                                   claims=((mesh, owner.node_rid),),
                                                   capacity=(capacity_key(mesh, owner),),
                                                   sequence=True))

    async def commit_ready_with_first_record(self, fence: ReservationFence, record: bytes, *,
                                             now: float) -> tuple[AuthorityRecord, int]:
        """InboxAppend + CommitReady (one transaction); see ``CombinedTransactions``."""
        key = rel.inbox_key(fence.spot_id, fence.object_generation)
        raw = rel.check_bytes(record, "inbox record")

        body = partial(_commit_ready_body, fence, now, key, raw)
        return await self._db.write(body, size=len(raw), checks_first=True,
                                    reads=Prefetch(records=(fence.spot_id,), inboxes=(key,),
                                                   owners=(fence.spot_id,)))

    async def finish_first_record(self, spot_id: str, object_generation: int, *, seq: int,
                                  expected_version: int,
                                  root: RootReceipt) -> FirstRecordCleanup:
        """Cursor + pointer CAS + root deletion (one transaction); see the protocol."""
        check_finish_args(spot_id, object_generation, seq, expected_version, root)
        key = (spot_id, object_generation)

        body = partial(_finish_body, spot_id, object_generation, seq, expected_version, root,
                       key)
        return await self._db.write(body, size=root.size, checks_first=True,
                                    reads=Prefetch(records=(spot_id,), inboxes=(key,),
                                                   roots=(root.ref,)))

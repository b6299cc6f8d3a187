"""SQLite store: the Location Store, the memory oracle run over views of the ``loc_*`` tables.

Theory of operation
-------------------
Each write method is one ``BEGIN IMMEDIATE`` transaction (``connection``) that runs
the memory backend's pure ``txn_*`` function -- the oracle of ``store.rules`` --
over a :class:`LocationView` of the ``loc_*`` tables (``view``): the checks, their
order, the errors and the return values are the memory backend's by construction,
and :meth:`LocationView.flush` writes what the oracle changed. Reads are bounded
SQL queries (a primary key, an index range, ``LIMIT``) whose rows are fed to the
same functions, so a read never scans a table into memory. Actor membership is the
``container`` and ``next_container`` columns of ``loc_records`` (``members``, ``view``):
Reserve with a container, MoveMembership and an Actor's move (BeginRelocation with a
container) run the oracle like every write, and ``members`` reads one range of each
membership index. Reminders are rows of ``loc_reminders`` (``view``): every reminder
write runs the oracle of ``store.rules.reminders``, and a take reads its candidates --
due rows of its partitions, in scan order -- from the wake index before the oracle
checks and takes each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from zlink_trio.core._checks import check_finite, check_int
from zlink_trio.core.identity import validate_spot_id
from zlink_trio.core.records import AuthorityState
from zlink_trio.store.rules import claims, membership, recovery
from zlink_trio.store.rules import location as loc
from zlink_trio.store.rules import operator as ops
from zlink_trio.store.rules import relocation_steps as steps
from zlink_trio.store.rules import reminders as rem
from zlink_trio.store.rules import state as spot_state
from zlink_trio.store.sqlite.codec import (
    REMINDER_COLUMNS,
    decode_claim,
    decode_record,
    decode_reminder,
)
from zlink_trio.store.sqlite.members import member_rows
from zlink_trio.store.sqlite.view import LocationView
from zlink_trio.store.values import MAX_PAGE_SIZE, LocationStatistics, SavedState

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

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
    from zlink_trio.store.sqlite.session import SqlDatabase, SqlSession
    from zlink_trio.store.values import Page, StoredReminder

__all__ = ("SqliteLocationStore",)

T = TypeVar("T")


def _node_claims(conn: SqlSession, node_id: str, *, live_at: float | None = None,
                 expired_at: float | None = None) -> list[NodeClaim]:
    """The claims of ``node_id``: live at ``live_at``, or expired at ``expired_at``."""
    if live_at is not None:
        rows = conn.execute("SELECT body FROM loc_claims WHERE lease_expires_at > ?",
                            (live_at,)).fetchall()
    else:
        rows = conn.execute("SELECT body FROM loc_claims WHERE lease_expires_at <= ?",
                            (expired_at,)).fetchall()
    found = (decode_claim(row[0]) for row in rows)
    return [claim for claim in found if claim.descriptor.node_id == node_id]


class SqliteLocationStore:
    """A :class:`~zlink_trio.store.LocationStore` on SQLite; see the protocol for contracts."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    async def _txn(self, fn: Callable[[loc.LocationState], T], *,
                   generation: bool = False) -> T:
        """One write transaction running the oracle ``fn`` over the views.

        ``generation``: ``fn`` may issue an ObjectGeneration (NewClaim, Reserve), so
        the sequence row is read; every other transaction skips that statement.
        """
        def body(conn: SqlSession) -> T:
            view = LocationView(conn, generation=generation)
            result = fn(view.state)  # the oracle: checks everything, then writes the view
            view.flush()
            return result
        return await self._db.write(body)

    async def new_claim(self, descriptor: NodeDescriptor, *, now: float,
                        lease: float) -> NodeClaim:
        """NewClaim (one transaction); see ``LocationStore.new_claim``.

        The live claims of the NodeId are read inside the same ``BEGIN IMMEDIATE``
        transaction, so two processes claiming one NodeId at once are serialized.
        """
        def body(conn: SqlSession) -> NodeClaim:
            view = LocationView(conn, generation=True)
            live = _node_claims(conn, descriptor.node_id, live_at=now)
            result = claims.txn_new_claim(view.state, descriptor, now=now, lease=lease,
                                          same_node_id=live)
            view.flush()
            return result
        return await self._db.write(body)

    async def renew(self, mesh: str, node_rid: NodeRid, lifecycle_generation: int, *,
                    now: float, lease: float) -> NodeClaim:
        """Renew (one transaction); see ``LocationStore.renew``."""
        return await self._txn(lambda s: claims.txn_renew(s, mesh, node_rid,
                                                          lifecycle_generation, now=now,
                                                          lease=lease))

    async def close_placement(self, mesh: str, node_rid: NodeRid,
                              lifecycle_generation: int) -> bool:
        """ClosePlacement (one transaction); see ``LocationStore.close_placement``."""
        return await self._txn(lambda s: claims.txn_close_placement(s, mesh, node_rid,
                                                                    lifecycle_generation))

    async def open_placement(self, mesh: str, node_rid: NodeRid,
                             lifecycle_generation: int) -> bool:
        """OpenPlacement (one transaction); see ``LocationStore.open_placement``."""
        return await self._txn(lambda s: claims.txn_open_placement(s, mesh, node_rid,
                                                                   lifecycle_generation))

    async def remove(self, mesh: str, node_rid: NodeRid, lifecycle_generation: int) -> bool:
        """Remove (one transaction); see ``LocationStore.remove``."""
        return await self._txn(lambda s: claims.txn_remove(s, mesh, node_rid,
                                                           lifecycle_generation))

    async def descriptors(self, mesh: str | None = None, *, now: float) -> list[NodeClaim]:
        """Live claims (one read); see ``LocationStore.descriptors``."""
        check_finite(now, "now")

        def body(conn: SqlSession) -> list[NodeClaim]:
            rows = conn.execute(
                "SELECT body FROM loc_claims WHERE lease_expires_at > ? AND "
                "(CAST(? AS TEXT) IS NULL OR mesh = ?)", (now, mesh, mesh)).fetchall()
            return claims.select_claims((decode_claim(r[0]) for r in rows), mesh, now=now,
                                        live=True)
        return await self._db.read(body)

    async def dead_claims(self, mesh: str | None = None, *, now: float) -> list[NodeClaim]:
        """Claims whose lease is over (one read); see ``LocationStore.dead_claims``."""
        check_finite(now, "now")

        def body(conn: SqlSession) -> list[NodeClaim]:
            rows = conn.execute(
                "SELECT body FROM loc_claims WHERE lease_expires_at <= ? AND "
                "(CAST(? AS TEXT) IS NULL OR mesh = ?)", (now, mesh, mesh)).fetchall()
            return claims.select_claims((decode_claim(r[0]) for r in rows), mesh, now=now,
                                        live=False)
        return await self._db.read(body)

    async def find(self, spot_id: str) -> AuthorityRecord | None:
        """The record or ``None`` (one read, shared with concurrent finds where the
        backend batches them); see ``LocationStore.find``."""
        body = await self._db.read_keyed(
            "SELECT spot_id, body FROM loc_records WHERE spot_id IN ({})", spot_id)
        return None if body is None else decode_record(body)

    async def reserve(self, spot_id: str, *, kind: SpotKind, stable_type: str, mesh: str,
                      owner: OwnerFence, now: float,
                      creation_intent: CreationIntent | None = None,
                      recovery_pointer: RecoveryPointer | None = None,
                      container: str | None = None) -> ReservationFence:
        """Reserve (one transaction); see ``LocationStore.reserve``.

        An Actor's reservation (``container``) reads its container's record and members
        in the same transaction, so it cannot race a BeginClose of the container.
        """
        return await self._txn(lambda s: loc.txn_reserve(
            s, spot_id, kind=kind, stable_type=stable_type, mesh=mesh, owner=owner, now=now,
            creation_intent=creation_intent, recovery_pointer=recovery_pointer,
            container=container), generation=True)

    async def move_membership(self, actor_id: str, *, object_generation: int,
                              owner: OwnerFence, container: str,
                              now: float) -> AuthorityRecord:
        """MoveMembership (one transaction); see ``LocationStore.move_membership``."""
        return await self._txn(lambda s: membership.txn_move_membership(
            s, actor_id, object_generation=object_generation, owner=owner,
            container=container, now=now))

    async def members(self, container: str) -> list[AuthorityRecord]:
        """The Actor records naming ``container`` (one read); see ``LocationStore.members``.

        One range of each membership index (``members``: the Actors whose container it
        is, and those moving into it); the oracle lists them in ActorId order.
        """
        membership.txn_members(loc.LocationState(), container)  # the argument, before I/O

        def body(conn: SqlSession) -> list[AuthorityRecord]:
            rows = member_rows(conn, container)
            window = loc.LocationState(
                records={i: decode_record(text) for i, text in rows.items()},
                members={container: frozenset(rows)})
            return membership.txn_members(window, container)
        return await self._db.read(body, single=True)

    async def commit_ready(self, fence: ReservationFence, *, now: float) -> AuthorityRecord:
        """CommitReady (one transaction); see ``LocationStore.commit_ready``."""
        return await self._txn(lambda s: loc.txn_commit_ready(s, fence, now=now))

    async def abort_creating(self, fence: ReservationFence) -> bool:
        """AbortCreating (one transaction); see ``LocationStore.abort_creating``."""
        return await self._txn(lambda s: loc.txn_abort_creating(s, fence))

    async def begin_close(self, spot_id: str, *, object_generation: int, owner: OwnerFence,
                          now: float, expected_owner_generation: int | None = None,
                          expected_store_version: int | None = None
                          ) -> AuthorityRecord | None:
        """BeginClose (one transaction); see ``LocationStore.begin_close``."""
        return await self._txn(lambda s: loc.txn_begin_close(
            s, spot_id, object_generation=object_generation, owner=owner, now=now,
            expected_owner_generation=expected_owner_generation,
            expected_store_version=expected_store_version))

    async def release(self, fence: AuthorityFence) -> bool:
        """Release (one transaction); see ``LocationStore.release``."""
        return await self._txn(lambda s: loc.txn_release(s, fence))

    async def release_expired(self, spot_id: str, *, object_generation: int,
                              owner_generation: int, now: float) -> AuthorityRecord:
        """ReleaseExpired (one transaction); see ``LocationStore.release_expired``."""
        return await self._txn(lambda s: ops.txn_release_expired(
            s, spot_id, object_generation=object_generation, owner_generation=owner_generation,
            now=now))

    async def remove_recovery_pointer(self, spot_id: str, *, object_generation: int,
                                      expected_version: int) -> bool:
        """RemoveRecoveryPointer (one transaction); see the protocol."""
        return await self._txn(lambda s: loc.txn_remove_recovery_pointer(
            s, spot_id, object_generation=object_generation, expected_version=expected_version))

    async def save_state(self, fence: AuthorityFence, data: bytes, *,
                         now: float) -> SavedState:
        """SaveState (one transaction: the record's check and the ``loc_state`` row); see
        ``StateSteps.save_state``."""
        return await self._txn(lambda s: spot_state.txn_save_state(s, fence, data, now=now))

    async def load_state(self, spot_id: str) -> SavedState | None:
        """LoadState (one read); see ``StateSteps.load_state``."""
        validate_spot_id(spot_id)

        def body(conn: SqlSession) -> SavedState | None:
            row = conn.execute("SELECT version, object_generation, data FROM loc_state "
                               "WHERE spot_id = ?", (spot_id,)).fetchone()
            return None if row is None else SavedState(
                spot_id=spot_id, data=bytes(row[2]), version=row[0], object_generation=row[1])
        return await self._db.read(body, single=True)

    async def clear_state(self, fence: AuthorityFence, *, now: float) -> bool:
        """ClearState (one transaction); see ``StateSteps.clear_state``."""
        return await self._txn(lambda s: spot_state.txn_clear_state(s, fence, now=now))

    async def set_reminder(self, fence: AuthorityFence, name: str, *, due: float,
                           period: float | None, now: float) -> StoredReminder:
        """SetReminder (one transaction: the record's check and the Spot's
        ``loc_reminders`` rows); see ``ReminderSteps.set_reminder``."""
        return await self._txn(lambda s: rem.txn_set_reminder(s, fence, name, due=due,
                                                               period=period, now=now))

    async def cancel_reminder(self, fence: AuthorityFence, name: str, *,
                              now: float) -> bool:
        """CancelReminder (one transaction); see ``ReminderSteps.cancel_reminder``."""
        return await self._txn(lambda s: rem.txn_cancel_reminder(s, fence, name, now=now))

    async def reminders(self, spot_id: str) -> tuple[StoredReminder, ...]:
        """Reminders (one read of the Spot's rows); see ``ReminderSteps.reminders``."""
        rem.txn_reminders(loc.LocationState(), spot_id)  # the argument, before I/O

        def body(conn: SqlSession) -> tuple[StoredReminder, ...]:
            rows = conn.execute(f"SELECT {REMINDER_COLUMNS} FROM loc_reminders "
                                "WHERE spot_id = ?", (spot_id,)).fetchall()
            kept = tuple(sorted(map(decode_reminder, rows), key=lambda r: r.name))
            window = loc.LocationState(reminders={spot_id: kept} if kept else {})
            return rem.txn_reminders(window, spot_id)
        return await self._db.read(body, single=True)

    async def take_due_reminders(self, mesh: str, partitions: Sequence[int],
                                 taker: OwnerFence, *, now: float, hold: float,
                                 limit: int) -> list[StoredReminder]:
        """TakeDueReminders (one transaction); see ``ReminderSteps.take_due_reminders``.

        After the oracle's checks (the arguments, then the taker's claim), one read of
        the wake index (``loc_reminders_wake``: the rows of the partitions due at ``now``, in
        ``scan_order``, at most ``limit``) names the candidates; the oracle loads each
        Spot's reminders through the view and takes those it finds due.

        The same take runs first in a read transaction, and only when it would take
        something does the write transaction run: every node looks for due reminders
        several times a second, and a write lock taken for nothing would be held by a
        process frozen in that moment (SIGSTOP, a debugger) against every other process
        of the store.
        """
        def attempt(conn: SqlSession, write: bool) -> list[StoredReminder]:
            view = LocationView(conn, generation=False)

            def due(wanted: tuple[int, ...]) -> list[tuple[str, str]]:
                if not wanted:
                    return []
                return conn.execute(
                    "SELECT spot_id, name FROM loc_reminders WHERE mesh = ? AND part IN "
                    f"({', '.join('?' * len(wanted))}) AND wake <= ? "
                    "ORDER BY wake, spot_id, name LIMIT ?",
                    (mesh, *wanted, now, limit)).fetchall()
            result = rem.txn_take_due_reminders(view.state, mesh, partitions, taker,
                                                now=now, hold=hold, limit=limit,
                                                candidates=due)
            if write:
                view.flush()
            return result
        if not await self._db.read(lambda conn: attempt(conn, False), single=True):
            return []
        return await self._db.write(lambda conn: attempt(conn, True))

    async def reminder_done(self, taken: StoredReminder, *, now: float) -> bool:
        """ReminderDone (one transaction); see ``ReminderSteps.reminder_done``."""
        return await self._txn(lambda s: rem.txn_reminder_done(s, taken, now=now))

    async def drop_reminders(self, spot_id: str) -> int:
        """DropReminders (one transaction); see ``ReminderSteps.drop_reminders``."""
        return await self._txn(lambda s: rem.txn_drop_reminders(s, spot_id))

    async def begin_relocation(self, fence: AuthorityFence, *, target: OwnerFence,
                               now: float, container: str | None = None,
                               members_stay: bool = False,
                               carry_members: bool = False) -> AuthorityRecord:
        """BeginRelocation (one transaction); see the protocol.

        An Actor's move (``container``: its container at the target) checks that
        container's record in the same transaction, so it cannot race a BeginClose of
        it; the Actor's row then names it in ``next_container`` until the move ends. A
        Spot's that carries its members steps their rows in the same transaction, and so
        does each later step of that move.
        """
        return await self._txn(lambda s: steps.txn_begin_relocation(
            s, fence, target=target, now=now, container=container, members_stay=members_stay,
            carry_members=carry_members))

    async def seal_relocation(self, fence: AuthorityFence, *, now: float) -> AuthorityRecord:
        """Seal (one transaction); see the protocol."""
        return await self._txn(lambda s: steps.txn_seal_relocation(s, fence, now=now))

    async def accept_relay_ready(self, fence: AuthorityFence, *, target: OwnerFence,
                                 now: float) -> AuthorityRecord:
        """AcceptRelayReady (one transaction); see the protocol."""
        return await self._txn(lambda s: steps.txn_accept_relay_ready(s, fence, target=target,
                                                                      now=now))

    async def commit_relocation(self, fence: AuthorityFence, *, now: float) -> AuthorityRecord:
        """CommitRelocation (one transaction); see the protocol."""
        return await self._txn(lambda s: steps.txn_commit_relocation(s, fence, now=now))

    async def abort_relocation(self, fence: AuthorityFence) -> AuthorityRecord:
        """AbortRelocation (one transaction); see the protocol."""
        return await self._txn(lambda s: steps.txn_abort_relocation(s, fence))

    async def record_relocation_payload(self, fence: AuthorityFence, *, payload: RootReceipt,
                                        now: float) -> AuthorityRecord:
        """RecordRelocationPayload (one transaction); see the protocol."""
        return await self._txn(lambda s: steps.txn_record_relocation_payload(
            s, fence, payload=payload, now=now))

    async def release_relay_ready(self, fence: AuthorityFence, *, target: OwnerFence,
                                  now: float) -> AuthorityRecord | None:
        """ReleaseRelayReady (one transaction); see the protocol."""
        return await self._txn(lambda s: steps.txn_release_relay_ready(
            s, fence, target=target, now=now))

    async def query(self, *, page_size: int, cursor: str | None = None) -> Page:
        """One Query page (one read of at most ``page_size + 1`` rows); see the protocol."""
        check_int(page_size, "page_size", 1, MAX_PAGE_SIZE)
        after = loc.parse_cursor(cursor) or ""

        def body(conn: SqlSession) -> Page:
            rows = conn.execute(
                "SELECT spot_id, body FROM loc_records WHERE spot_id > ? ORDER BY spot_id "
                "LIMIT ?", (after, page_size + 1)).fetchall()
            # The oracle pages these rows exactly as it pages the whole table.
            window = loc.LocationState(records={r[0]: decode_record(r[1]) for r in rows})
            return loc.txn_query(window, page_size=page_size, cursor=cursor)
        return await self._db.read(body)

    async def statistics(self) -> LocationStatistics:
        """A snapshot of counts (one read); see ``LocationStore.statistics``."""
        def body(conn: SqlSession) -> LocationStatistics:
            by_state = {s.value: 0 for s in AuthorityState}
            by_state.update(conn.execute(
                "SELECT state, count(*) FROM loc_records GROUP BY state").fetchall())
            (count,) = conn.execute("SELECT count(*) FROM loc_claims").fetchone()
            last = conn.execute("SELECT value FROM loc_sequence").fetchone()
            return LocationStatistics(
                claims=count, creating=by_state[AuthorityState.CREATING],
                ready=by_state[AuthorityState.READY], closing=by_state[AuthorityState.CLOSING],
                relocating=by_state[AuthorityState.RELOCATING],
                sealed=by_state[AuthorityState.SEALED],
                relay_ready=by_state[AuthorityState.RELAY_READY],
                last_object_generation=0 if last is None else last[0])
        return await self._db.read(body)

    async def orphans(self, node_id: str, *, now: float, after: str | None = None,
                      limit: int = 1000) -> list[AuthorityRecord]:
        """Incomplete activations of a dead lifecycle (one read); see the protocol.

        Reads the expired claims, keeps those of ``node_id``, then at most ``limit``
        orphan rows of each through the owner index; the oracle filters and pages them.
        """
        # The arguments are checked here, before any I/O (an empty window has no orphans).
        recovery.txn_orphans(loc.LocationState(), node_id, now=now, after=after, limit=limit)

        def body(conn: SqlSession) -> list[AuthorityRecord]:
            state = loc.LocationState()
            for row in conn.execute("SELECT body FROM loc_claims WHERE lease_expires_at <= ?",
                                    (now,)).fetchall():
                claim = decode_claim(row[0])
                if claim.descriptor.node_id != node_id:
                    continue
                state.claims[(claim.descriptor.mesh, claim.descriptor.node_rid)] = claim
                for (spot_id, text) in conn.execute(
                        "SELECT spot_id, body FROM loc_records WHERE mesh = ? AND owner_rid = ? "
                        "AND owner_lifecycle = ? AND spot_id > ? AND (state = ? OR "
                        "(state = ? AND json_extract(body, '$.recoveryPointer') IS NOT "
                        "NULL)) ORDER BY spot_id LIMIT ?",
                        (claim.descriptor.mesh, str(claim.descriptor.node_rid),
                         claim.lifecycle_generation, after or "",
                         AuthorityState.CREATING.value, AuthorityState.READY.value,
                         limit)).fetchall():
                    state.records[spot_id] = decode_record(text)
            return recovery.txn_orphans(state, node_id, now=now, after=after, limit=limit)
        return await self._db.read(body)

    async def dead_owned(self, node_id: str, *, now: float, after: str | None = None,
                         limit: int = 1000) -> list[AuthorityRecord]:
        """Every record of a dead lifecycle (one read); see the protocol.

        Reads the expired claims of ``node_id``, then at most ``limit`` rows of each
        through the owner index, and the RelayReady rows through the state index (a
        move toward a dead lifecycle); the oracle filters and pages them.
        """
        recovery.txn_dead_owned(loc.LocationState(), node_id, now=now, after=after,
                                limit=limit)

        def body(conn: SqlSession) -> list[AuthorityRecord]:
            state = loc.LocationState()
            for claim in _node_claims(conn, node_id, expired_at=now):
                state.claims[(claim.descriptor.mesh, claim.descriptor.node_rid)] = claim
                for (spot_id, text) in conn.execute(
                        "SELECT spot_id, body FROM loc_records WHERE mesh = ? AND owner_rid = ? "
                        "AND owner_lifecycle = ? AND spot_id > ? ORDER BY spot_id LIMIT ?",
                        # + 1: the claim's own Entry record may be among the rows
                        (claim.descriptor.mesh, str(claim.descriptor.node_rid),
                         claim.lifecycle_generation, after or "", limit + 1)).fetchall():
                    state.records[spot_id] = decode_record(text)
            if state.claims:
                # Moves past relay-ready toward a dead lifecycle (few: a move is brief),
                # through the state index; the oracle keeps those of the dead claims.
                for (spot_id, text) in conn.execute(
                        "SELECT spot_id, body FROM loc_records WHERE state = ? AND spot_id > ?",
                        (AuthorityState.RELAY_READY.value, after or "")).fetchall():
                    state.records[spot_id] = decode_record(text)
            return recovery.txn_dead_owned(state, node_id, now=now, after=after, limit=limit)
        return await self._db.read(body)

    async def remove_dead_claims(self, node_id: str, *, now: float) -> int:
        """RemoveDeadClaims (one transaction); see the protocol."""
        recovery.txn_remove_dead_claims(loc.LocationState(), node_id, now=now)

        def body(conn: SqlSession) -> int:
            view = LocationView(conn, generation=False)
            dead = _node_claims(conn, node_id, expired_at=now)
            result = recovery.txn_remove_dead_claims(view.state, node_id, now=now, claims=dead)
            view.flush()
            return result
        return await self._db.write(body)

    async def adopt_orphan(self, spot_id: str, *, object_generation: int,
                           owner_generation: int, old_owner: OwnerFence,
                           new_owner: OwnerFence, now: float) -> AuthorityRecord:
        """AdoptOrphan (one transaction); see ``LocationStore.adopt_orphan``."""
        return await self._txn(lambda s: recovery.txn_adopt_orphan(
            s, spot_id, object_generation=object_generation, owner_generation=owner_generation,
            old_owner=old_owner, new_owner=new_owner, now=now))

"""The Redis Location Store: each method is one Lua script (see ``lua.location``).

Theory of operation
-------------------
A method first checks its arguments exactly as the memory oracle does before
it looks at any state (same validators, same order, so a bad argument is the
same :class:`InvalidOperation` on every backend and costs no round trip),
then sends one script that does every state check and then every write.
``raise_status`` maps a refusal to the oracle's typed error; a success is
decoded into the same frozen values ``memory://`` returns. Counters and
expiries travel as decimal / ``repr`` strings (see ``codec``). The reminder steps are
``reminders``' (:class:`RedisReminders`; Redis Cluster puts its own in their place),
and Release deletes a closed Spot's reminders with its record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zlink_trio.core._checks import check_finite, check_generation, check_int
from zlink_trio.core._json_fields import encode_kind
from zlink_trio.core.descriptor import NodeClaim, NodeDescriptor
from zlink_trio.core.errors import InvalidOperation, Unavailable
from zlink_trio.core.identity import (
    SpotKind,
    validate_node_id,
    validate_spot_id,
)
from zlink_trio.core.placement import reminder_partition
from zlink_trio.core.records import (
    AuthorityFence,
    AuthorityRecord,
    CreationIntent,
    OwnerFence,
    RecoveryPointer,
    ReservationFence,
    RootReceipt,
)
from zlink_trio.store.redis.codec import (
    claim_args,
    decode_claim,
    decode_record,
    optional_fields,
    raise_status,
    raise_writer,
    text,
)
from zlink_trio.store.redis.recovery import redis_adopt_orphan, redis_orphans
from zlink_trio.store.redis.reminders import RedisReminders
from zlink_trio.store.rules.claims import select_claims
from zlink_trio.store.rules.location import check_reserve_args, page_of, parse_cursor
from zlink_trio.store.rules.membership import check_move_args, move_refusal
from zlink_trio.store.rules.operator import release_expired_refusal
from zlink_trio.store.rules.relocation_steps import (
    check_member_options,
    check_payload,
    check_target,
    container_mismatch,
    members_refusal,
)
from zlink_trio.store.rules.state import check_state_args
from zlink_trio.store.values import (
    MAX_PAGE_BYTES,
    MAX_PAGE_SIZE,
    LocationStatistics,
    NodeIdInUse,
    OwnerAlive,
    Page,
    SavedState,
    StoredReminder,
    TargetAlive,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from zlink_trio.core.identity import NodeRid
    from zlink_trio.store.redis.client import ScriptRunner
    from zlink_trio.store.redis.codec import Keys
    from zlink_trio.store.reminder_steps import ReminderSteps

__all__ = ("RedisLocationStore",)


def _lease(now: float, lease: float) -> str:
    return repr(check_finite(now, "now") + check_finite(lease, "lease", positive=True))


def _fence_args(fence: AuthorityFence | ReservationFence) -> list[str | int]:
    return [fence.object_generation, fence.owner_generation, str(fence.owner.node_rid),
            fence.owner.lifecycle_generation]


def _relocation_args(fence: AuthorityFence, target: OwnerFence, now: float,
                     container: str | None, members_stay: bool,
                     carry_members: bool) -> list[str | int]:
    """BeginRelocation's script arguments (Redis Cluster adds its own after them)."""
    check_member_options(members_stay=members_stay, carry_members=carry_members)
    members = "1" if members_stay else "c" if carry_members else ""
    return [*_fence_args(fence), str(target.node_rid), target.lifecycle_generation,
            repr(float(now)), container or "", members]


def _seq(value: object) -> Sequence[Any]:
    assert isinstance(value, list), value
    return value


class RedisLocationStore:
    """A :class:`~zlink_trio.store.LocationStore` on Redis; see the protocol for contracts."""

    def __init__(self, runner: ScriptRunner, keys: Keys) -> None:
        self._run = runner
        self._keys = keys
        #: The reminder steps (``reminders``; Redis Cluster puts its own here).
        self._reminder_steps: ReminderSteps = RedisReminders(runner, keys)

    async def _script(self, what: str, name: str, key: str, *args: str | int | bytes,
                      write: bool = True) -> Sequence[Any]:
        reply = await self._run.script(what, name, [key], args, write=write)
        return _seq(reply)

    async def _record(self, what: str, name: str, key: str,
                      *args: str | int) -> AuthorityRecord:
        reply = await self._script(what, name, key, *args)
        raise_status(reply, what)
        return await self._stepped(name, reply[1])

    async def _stepped(self, name: str, flat: Sequence[Any]) -> AuthorityRecord:
        """The record script ``name`` answered (``flat``, its ``HGETALL``). Here all of a
        step is in its script; the cluster store's members follow their Spot's step here."""
        return decode_record(flat)

    # -- descriptor claims -----------------------------------------------------------------

    async def new_claim(self, descriptor: NodeDescriptor, *, now: float,
                        lease: float) -> NodeClaim:
        """NewClaim (one script); see ``LocationStore.new_claim``."""
        if not isinstance(descriptor, NodeDescriptor):
            raise InvalidOperation(f"new_claim takes a NodeDescriptor, got {type(descriptor)}")
        expires = _lease(now, lease)
        what = f"new_claim of node {descriptor.node_rid} in mesh {descriptor.mesh!r}"
        reply = await self._run.script(
            what, "new_claim",
            [self._keys.claim(descriptor.mesh, descriptor.node_rid),
             self._keys.spot(descriptor.entry_spot_id)],
            [repr(float(now)), expires, descriptor.node_id, str(descriptor.node_rid),
             descriptor.mesh, descriptor.entry_spot_id,
             *claim_args(descriptor)])
        reply = _seq(reply)
        if text(reply[0]) == "NODE_LIVE":
            raise NodeIdInUse(decode_claim(reply[1]), now)
        raise_status(reply, what)
        return NodeClaim(descriptor=descriptor, lifecycle_generation=int(text(reply[1])),
                         lease_expires_at=float(expires))

    async def renew(self, mesh: str, node_rid: NodeRid, lifecycle_generation: int, *,
                    now: float, lease: float) -> NodeClaim:
        """Renew (one script); see ``LocationStore.renew``."""
        expires = _lease(now, lease)
        what = f"renew of node {node_rid} lifecycle {lifecycle_generation}"
        reply = await self._script(what, "renew", self._keys.claim(mesh, node_rid),
                                   str(lifecycle_generation), repr(float(now)), expires)
        if text(reply[0]) == "STALE_OWNER":
            reply = ["STALE_OWNER", str(node_rid), str(lifecycle_generation), mesh]
        raise_status(reply, what)
        return decode_claim(reply[1])

    async def close_placement(self, mesh: str, node_rid: NodeRid,
                              lifecycle_generation: int) -> bool:
        """ClosePlacement (one script); see ``LocationStore.close_placement``."""
        return await self._mark_placement("close_placement", mesh, node_rid,
                                          lifecycle_generation, closed=True)

    async def open_placement(self, mesh: str, node_rid: NodeRid,
                             lifecycle_generation: int) -> bool:
        """OpenPlacement (one script); see ``LocationStore.open_placement``."""
        return await self._mark_placement("open_placement", mesh, node_rid,
                                          lifecycle_generation, closed=False)

    async def _mark_placement(self, name: str, mesh: str, node_rid: NodeRid,
                              lifecycle_generation: int, *, closed: bool) -> bool:
        what = f"{name} of node {node_rid} lifecycle {lifecycle_generation}"
        reply = await self._script(what, "mark_placement", self._keys.claim(mesh, node_rid),
                                   str(lifecycle_generation), "1" if closed else "0")
        raise_status(reply, what)
        return bool(reply[1])

    async def remove(self, mesh: str, node_rid: NodeRid, lifecycle_generation: int) -> bool:
        """Remove (one script); see ``LocationStore.remove``."""
        reply = await self._run.script(
            f"remove of node {node_rid}", "remove", [self._keys.claim(mesh, node_rid)],
            [str(lifecycle_generation)])
        return bool(reply)

    async def descriptors(self, mesh: str | None = None, *, now: float) -> list[NodeClaim]:
        """Live claims (one read-only script); see ``LocationStore.descriptors``."""
        return select_claims(await self._every_claim("descriptors", now), mesh, now=now,
                             live=True)

    async def dead_claims(self, mesh: str | None = None, *, now: float) -> list[NodeClaim]:
        """Claims whose lease is over (one read-only script); see the protocol."""
        return select_claims(await self._every_claim("dead_claims", now), mesh, now=now,
                             live=False)

    async def _every_claim(self, what: str, now: float) -> list[NodeClaim]:
        check_finite(now, "now")
        reply = await self._script(what, "descriptors", self._keys.meta("claims"),
                                   write=False)
        return [decode_claim(values) for values in reply]

    # -- authority -------------------------------------------------------------------------

    async def find(self, spot_id: str) -> AuthorityRecord | None:
        """The record or ``None`` (one ``HGETALL``); see ``LocationStore.find``."""
        try:
            validate_spot_id(spot_id)
        except InvalidOperation:
            return None  # no record can hold an invalid ID
        key = self._keys.spot(spot_id)
        flat = await self._run.command(f"find of {spot_id!r}", ["HGETALL", key])
        return decode_record(flat) if flat else None

    async def reserve(self, spot_id: str, *, kind: SpotKind, stable_type: str, mesh: str,
                      owner: OwnerFence, now: float,
                      creation_intent: CreationIntent | None = None,
                      recovery_pointer: RecoveryPointer | None = None,
                      container: str | None = None) -> ReservationFence:
        """Reserve (one script; an Actor's checks and joins its container in it too);
        see ``LocationStore.reserve``."""
        check_reserve_args(spot_id, kind=kind, stable_type=stable_type, mesh=mesh, owner=owner,
                           now=now, creation_intent=creation_intent,
                           recovery_pointer=recovery_pointer, container=container)
        what = f"reserve of {spot_id!r}"
        reply = await self._script(
            what, "reserve", self._keys.spot(spot_id), spot_id, encode_kind(kind), stable_type,
            mesh, str(owner.node_rid), owner.lifecycle_generation, repr(float(now)),
            container or "", *optional_fields(creation_intent, recovery_pointer))
        raise_status(reply, what)
        return ReservationFence(spot_id=spot_id, store_version=1,
                                object_generation=int(text(reply[1])), owner_generation=1,
                                owner=owner, owner_lease_expires_at=float(text(reply[2])))

    async def commit_ready(self, fence: ReservationFence, *, now: float) -> AuthorityRecord:
        """CommitReady (one script); see ``LocationStore.commit_ready``."""
        check_finite(now, "now")
        return await self._record(
            f"commit_ready of {fence.spot_id!r}", "commit_ready", self._keys.spot(fence.spot_id),
            *_fence_args(fence), fence.store_version, fence.store_version + 1, repr(float(now)))

    async def abort_creating(self, fence: ReservationFence) -> bool:
        """AbortCreating (one script); see ``LocationStore.abort_creating``."""
        what = f"abort_creating of {fence.spot_id!r}"
        reply = await self._script(what, "abort_creating", self._keys.spot(fence.spot_id),
                                   *_fence_args(fence), fence.store_version)
        raise_status(reply, what)
        return bool(reply[1])

    async def begin_close(self, spot_id: str, *, object_generation: int, owner: OwnerFence,
                          now: float, expected_owner_generation: int | None = None,
                          expected_store_version: int | None = None
                          ) -> AuthorityRecord | None:
        """BeginClose (one script); see ``LocationStore.begin_close``."""
        validate_spot_id(spot_id)
        check_generation(object_generation, "object_generation")
        check_finite(now, "now")
        what = f"begin_close of {spot_id!r}"
        reply = await self._script(
            what, "begin_close", self._keys.spot(spot_id), object_generation,
            str(owner.node_rid), owner.lifecycle_generation, repr(float(now)),
            "" if expected_owner_generation is None else str(expected_owner_generation),
            "" if expected_store_version is None else str(expected_store_version))
        if text(reply[0]) == "NONE":
            return None
        raise_status(reply, what)
        return decode_record(reply[1])

    async def move_membership(self, actor_id: str, *, object_generation: int,
                              owner: OwnerFence, container: str,
                              now: float) -> AuthorityRecord:
        """MoveMembership (one script); see ``LocationStore.move_membership``."""
        check_move_args(actor_id, object_generation=object_generation, owner=owner,
                        container=container, now=now)
        what = f"move_membership of {actor_id!r} to {container!r}"
        reply = await self._script(what, "move_membership", self._keys.spot(actor_id),
                                   object_generation, str(owner.node_rid),
                                   owner.lifecycle_generation, container, repr(float(now)))
        return self._moved(reply, what, actor_id, object_generation, owner)

    @staticmethod
    def _moved(reply: Sequence[Any], what: str, actor_id: str, object_generation: int,
               owner: OwnerFence) -> AuthorityRecord:
        """The record of a ``move_membership`` reply, or its refusal raised."""
        if text(reply[0]) == "MOVE_REFUSED":
            found = reply[1]
            refusal = move_refusal(actor_id, decode_record(found) if found else None,
                                   object_generation=object_generation, owner=owner)
            if refusal is not None:
                raise refusal
            raise Unavailable(f"{what}: the Redis script refused a record the rules accept; "
                              "check that every process runs the same zlink_trio")
        raise_status(reply, what)
        return decode_record(reply[1])

    async def members(self, container: str) -> list[AuthorityRecord]:
        """The Actor records naming ``container`` (one read-only script); see the protocol."""
        validate_spot_id(container)
        reply = await self._script(f"members of {container!r}", "members",
                                   self._keys.members(container), write=False)
        found = (decode_record(flat) for flat in reply if flat)
        return sorted((r for r in found if container in (r.container, r.next_container)),
                      key=lambda r: r.spot_id)

    async def release(self, fence: AuthorityFence) -> bool:
        """Release (one script); see ``LocationStore.release``."""
        what = f"release of {fence.spot_id!r}"
        spot_id = fence.spot_id
        reply = _seq(await self._run.script(
            what, "release", [self._keys.spot(spot_id), self._keys.state(spot_id),
                              self._keys.reminders(spot_id)],
            [*_fence_args(fence), reminder_partition(spot_id)]))
        raise_status(reply, what)
        return bool(reply[1])

    async def release_expired(self, spot_id: str, *, object_generation: int,
                              owner_generation: int, now: float) -> AuthorityRecord:
        """ReleaseExpired (one script); see ``LocationStore.release_expired``."""
        validate_spot_id(spot_id)
        check_generation(object_generation, "object_generation")
        check_generation(owner_generation, "owner_generation")
        check_finite(now, "now")
        what = f"release_expired of {spot_id!r}"
        reply = await self._script(what, "release_expired", self._keys.spot(spot_id),
                                   object_generation, owner_generation, repr(float(now)))
        code = text(reply[0])
        if code == "OK":
            return decode_record(reply[1])
        if code == "OWNER_ALIVE":
            raise OwnerAlive(decode_record(reply[1]), float(text(reply[2])), now)
        if code in ("NONE", "REFUSED"):
            refusal = release_expired_refusal(
                spot_id, None if code == "NONE" else decode_record(reply[1]),
                object_generation=object_generation, owner_generation=owner_generation)
            if refusal is not None:
                raise refusal
        raise Unavailable(f"{what}: the Redis script answered {code!r}, which this version "
                          "does not know; check that every process runs the same zlink_trio")

    async def remove_recovery_pointer(self, spot_id: str, *, object_generation: int,
                                      expected_version: int) -> bool:
        """RemoveRecoveryPointer (one script); see the protocol."""
        validate_spot_id(spot_id)
        check_generation(object_generation, "object_generation")
        check_generation(expected_version, "expected_version")
        what = f"remove_recovery_pointer of {spot_id!r}"
        reply = await self._script(what, "remove_recovery_pointer", self._keys.spot(spot_id),
                                   object_generation, expected_version)
        raise_status(reply, what)
        return bool(reply[1])

    # -- relocation steps ------------------------------------------------------------------

    async def _toward(self, name: str, fence: AuthorityFence, target: OwnerFence,
                      now: float) -> AuthorityRecord:
        """A step that names the target: the source's fence, the target, ``now``."""
        check_finite(now, "now")
        check_target(target)
        return await self._record(
            f"{name} of {fence.spot_id!r}", name, self._keys.spot(fence.spot_id),
            *_fence_args(fence), str(target.node_rid), target.lifecycle_generation,
            repr(float(now)))

    async def _write_state(self, what: str, fence: AuthorityFence, now: float,
                           mode: str, data: bytes = b"") -> Sequence[Any]:
        """``write_state``: the record's check and the state's write in one script."""
        spot_id = fence.spot_id
        reply = _seq(await self._run.script(
            what, "write_state", [self._keys.spot(spot_id), self._keys.state(spot_id)],
            [*_fence_args(fence), repr(float(now)), mode, data]))
        raise_writer(reply, what, fence)
        return reply

    async def save_state(self, fence: AuthorityFence, data: bytes, *,
                         now: float) -> SavedState:
        """SaveState (one script); see ``StateSteps.save_state``."""
        raw = check_state_args(fence, now, data)
        reply = await self._write_state(f"save_state of {fence.spot_id!r}", fence, now,
                                        "save", raw)
        return SavedState(spot_id=fence.spot_id, data=raw, version=int(reply[1]),
                          object_generation=int(text(reply[2])))

    async def load_state(self, spot_id: str) -> SavedState | None:
        """LoadState (one ``HGETALL``); see ``StateSteps.load_state``."""
        validate_spot_id(spot_id)
        flat = await self._run.command(f"load_state of {spot_id!r}",
                                       ["HGETALL", self._keys.state(spot_id)])
        if not flat:
            return None
        f = dict(zip(flat[0::2], flat[1::2], strict=True))
        return SavedState(spot_id=spot_id, data=bytes(f[b"d"]), version=int(f[b"v"]),
                          object_generation=int(f[b"g"]))

    async def clear_state(self, fence: AuthorityFence, *, now: float) -> bool:
        """ClearState (one script); see ``StateSteps.clear_state``."""
        check_state_args(fence, now)
        reply = await self._write_state(f"clear_state of {fence.spot_id!r}", fence, now,
                                        "clear")
        return int(reply[1]) > 0

    # -- reminders (``reminders``) ----------------------------------------------------------

    async def set_reminder(self, fence: AuthorityFence, name: str, *, due: float,
                           period: float | None, now: float) -> StoredReminder:
        """SetReminder; see ``ReminderSteps.set_reminder``."""
        return await self._reminder_steps.set_reminder(fence, name, due=due, period=period,
                                                       now=now)

    async def cancel_reminder(self, fence: AuthorityFence, name: str, *,
                              now: float) -> bool:
        """CancelReminder; see ``ReminderSteps.cancel_reminder``."""
        return await self._reminder_steps.cancel_reminder(fence, name, now=now)

    async def reminders(self, spot_id: str) -> tuple[StoredReminder, ...]:
        """Reminders; see ``ReminderSteps.reminders``."""
        return await self._reminder_steps.reminders(spot_id)

    async def take_due_reminders(self, mesh: str, partitions: Sequence[int],
                                 taker: OwnerFence, *, now: float, hold: float,
                                 limit: int) -> list[StoredReminder]:
        """TakeDueReminders; see ``ReminderSteps.take_due_reminders``."""
        return await self._reminder_steps.take_due_reminders(mesh, partitions, taker,
                                                             now=now, hold=hold, limit=limit)

    async def reminder_done(self, taken: StoredReminder, *, now: float) -> bool:
        """ReminderDone; see ``ReminderSteps.reminder_done``."""
        return await self._reminder_steps.reminder_done(taken, now=now)

    async def drop_reminders(self, spot_id: str) -> int:
        """DropReminders; see ``ReminderSteps.drop_reminders``."""
        return await self._reminder_steps.drop_reminders(spot_id)

    async def begin_relocation(self, fence: AuthorityFence, *, target: OwnerFence,
                               now: float, container: str | None = None,
                               members_stay: bool = False,
                               carry_members: bool = False) -> AuthorityRecord:
        """BeginRelocation (one script; an Actor's checks its next container and joins it
        there too; a Spot's with members only when they stay or are carried -- then each
        step of the move steps them in the same script); see the protocol."""
        check_finite(now, "now")
        check_target(target)
        if container is not None:
            validate_spot_id(container)
        what = f"begin_relocation of {fence.spot_id!r}"
        reply = await self._script(what, "begin_relocation", self._keys.spot(fence.spot_id),
                                   *_relocation_args(fence, target, now, container,
                                                     members_stay, carry_members))
        return self._relocating(reply, what, fence)

    @staticmethod
    def _relocating(reply: Sequence[Any], what: str, fence: AuthorityFence) -> AuthorityRecord:
        """The record of a ``begin_relocation`` reply, or its refusal raised (the two of
        membership worded by the oracle)."""
        code = text(reply[0])
        if code == "MOVE_CONTAINER":
            raise container_mismatch(fence.spot_id)
        if code == "MEMBERS":
            raise members_refusal(fence.spot_id)
        raise_status(reply, what)
        return decode_record(reply[1])

    async def seal_relocation(self, fence: AuthorityFence, *, now: float) -> AuthorityRecord:
        """Seal (one script); see the protocol."""
        check_finite(now, "now")
        return await self._record(f"seal_relocation of {fence.spot_id!r}", "seal_relocation",
                                  self._keys.spot(fence.spot_id), *_fence_args(fence),
                                  repr(float(now)))

    async def accept_relay_ready(self, fence: AuthorityFence, *, target: OwnerFence,
                                 now: float) -> AuthorityRecord:
        """AcceptRelayReady (one script); see the protocol."""
        return await self._toward("accept_relay_ready", fence, target, now)

    async def commit_relocation(self, fence: AuthorityFence, *, now: float) -> AuthorityRecord:
        """CommitRelocation (one script); see the protocol."""
        check_finite(now, "now")
        return await self._record(f"commit_relocation of {fence.spot_id!r}",
                                  "commit_relocation", self._keys.spot(fence.spot_id),
                                  *_fence_args(fence), repr(float(now)))

    async def abort_relocation(self, fence: AuthorityFence) -> AuthorityRecord:
        """AbortRelocation (one script); see the protocol."""
        return await self._record(f"abort_relocation of {fence.spot_id!r}", "abort_relocation",
                                  self._keys.spot(fence.spot_id), *_fence_args(fence))

    async def record_relocation_payload(self, fence: AuthorityFence, *, payload: RootReceipt,
                                        now: float) -> AuthorityRecord:
        """RecordRelocationPayload (one script); see the protocol."""
        check_finite(now, "now")
        check_payload(payload)
        return await self._record(f"record_relocation_payload of {fence.spot_id!r}",
                                  "record_relocation_payload", self._keys.spot(fence.spot_id),
                                  *_fence_args(fence), payload.ref, payload.sha256,
                                  payload.size, repr(float(now)))

    async def release_relay_ready(self, fence: AuthorityFence, *, target: OwnerFence,
                                  now: float) -> AuthorityRecord | None:
        """ReleaseRelayReady (one script); see the protocol."""
        check_finite(now, "now")
        check_target(target)
        what = f"release_relay_ready of {fence.spot_id!r}"
        reply = await self._script(what, "release_relay_ready", self._keys.spot(fence.spot_id),
                                   *_fence_args(fence), str(target.node_rid),
                                   target.lifecycle_generation, repr(float(now)))
        if text(reply[0]) == "TARGET_ALIVE":
            raise TargetAlive(decode_record(reply[1]), float(text(reply[2])), now)
        raise_status(reply, what)
        return await self._stepped("release_relay_ready", reply[2]) if int(reply[1]) else None

    # -- reads -----------------------------------------------------------------------------

    async def query(self, *, page_size: int, cursor: str | None = None,
                    max_bytes: int = MAX_PAGE_BYTES) -> Page:
        """One Query page (one read-only script); ``max_bytes`` is lowered only by tests."""
        check_int(page_size, "page_size", 1, MAX_PAGE_SIZE)
        after = parse_cursor(cursor) or ""
        reply = await self._script("query", "query", self._keys.meta("ids"), after,
                                   page_size + 1, page_size, write=False)
        return page_of((decode_record(flat) for flat in reply[1:]), listed=int(reply[0]),
                       max_bytes=max_bytes)

    async def statistics(self) -> LocationStatistics:
        """A snapshot of counts (one read-only script); see ``LocationStore.statistics``."""
        reply = await self._script("statistics", "statistics", self._keys.meta("ids"),
                                   write=False)
        claims, counts, seq = reply
        n = [0 if v is None else int(text(v)) for v in counts]
        return LocationStatistics(
            claims=int(claims), creating=n[0], ready=n[1], closing=n[2], relocating=n[3],
            sealed=n[4], relay_ready=n[5],
            last_object_generation=0 if seq is None else int(text(seq)))

    async def orphans(self, node_id: str, *, now: float, after: str | None = None,
                      limit: int = 1000) -> list[AuthorityRecord]:
        """Incomplete activations of a dead lifecycle (paged read scripts); see the protocol."""
        return await redis_orphans(self._run, self._keys, node_id, now=now, after=after,
                                   limit=limit)

    async def dead_owned(self, node_id: str, *, now: float, after: str | None = None,
                         limit: int = 1000) -> list[AuthorityRecord]:
        """Every record of a dead lifecycle (paged read scripts); see the protocol."""
        return await redis_orphans(self._run, self._keys, node_id, now=now, after=after,
                                   limit=limit, every_state=True)

    async def remove_dead_claims(self, node_id: str, *, now: float) -> int:
        """RemoveDeadClaims (one script over every claim); see the protocol."""
        validate_node_id(node_id)
        check_finite(now, "now")
        reply = await self._script(f"remove_dead_claims of NodeId {node_id!r}",
                                   "remove_dead_claims", self._keys.meta("ids"), node_id,
                                   repr(float(now)))
        return int(reply[1])

    async def adopt_orphan(self, spot_id: str, *, object_generation: int,
                           owner_generation: int, old_owner: OwnerFence,
                           new_owner: OwnerFence, now: float) -> AuthorityRecord:
        """AdoptOrphan (one script); see ``LocationStore.adopt_orphan``."""
        return await redis_adopt_orphan(self._run, self._keys, spot_id,
                                        object_generation=object_generation,
                                        owner_generation=owner_generation,
                                        old_owner=old_owner, new_owner=new_owner, now=now)


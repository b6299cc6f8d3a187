"""The Redis Cluster Location Store: bucket scripts, node scripts, and reads over buckets.

Theory of operation
-------------------
:class:`ClusterLocationStore` is the single-Redis :class:`RedisLocationStore` on a
:class:`ClusterRunner`: every authority transaction of one Spot (Reserve, CommitReady,
BeginClose, Release, the relocation steps, ReleaseExpired, AdoptOrphan, ...) is the
same script in the Spot's bucket, with the owner's claim passed in as facts
(``runner``). What touches the nodes slot and buckets is split here, each part one
script, in the oracle's order of checks:

- **NewClaim**: the node checks (ALREADY, NodeIdInUse) read-only; the Entry check in
  the Entry's bucket (ENTRY_TAKEN, GEN_SPENT) read-only; LC_SPENT; then the claim is
  written in the nodes slot (its checks again, and the old claim must be the one
  checked -- else start over), then the Entry record in its bucket (an Entry ID taken
  in between removes the new claim again and raises ENTRY_TAKEN), then the old
  claim's own Entry record is dropped in its bucket.
- **Remove** / **RemoveDeadClaims**: the claim(s) in the nodes slot, then each
  linked Entry record in its bucket (fenced by owner, so a replacement is never touched).
- **Actor membership** -- Reserve of an Actor, MoveMembership, BeginClose, members --
  spans the Actor's bucket and its container's: the member marks and their protocol
  are ``membership``'s; a SpotWide move's members follow its steps in their own buckets
  (``carry``).
- **Reminders** live in the Spot's bucket, their due index in each reminder partition's
  slot as hints written before the bucket script; a take reads the hints, takes in the
  buckets and fixes the hints (``reminders``).
- **Query**, **statistics**, **orphans**, **dead_owned**: every bucket is read and
  merged in Spot ID order -- Query's listing and the statistics by one read-only
  script per master over all of its buckets (``sweep``), orphans by one script per
  bucket, all in flight together. They are not one snapshot across buckets; each
  bucket's part is.

Between the parts of a split a reader may see the claim without its Entry record (or
the reverse); the runtime never relies on reading both at once.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from zlink_trio.core._checks import check_finite, check_int
from zlink_trio.core._json_fields import encode_kind
from zlink_trio.core.descriptor import NodeClaim, NodeDescriptor
from zlink_trio.core.errors import InvalidOperation, StoreUnavailable, Unavailable
from zlink_trio.core.identity import validate_node_id, validate_spot_id
from zlink_trio.core.records import ReservationFence
from zlink_trio.store.redis.codec import (
    claim_args,
    decode_claim,
    decode_record,
    optional_fields,
    raise_status,
)
from zlink_trio.store.redis.codec import text as _text
from zlink_trio.store.redis.location import RedisLocationStore, _lease, _relocation_args
from zlink_trio.store.redis.recovery import SCAN_BUDGET
from zlink_trio.store.redis_cluster.carry import ClusterCarry, group_of
from zlink_trio.store.redis_cluster.keys import claim_field
from zlink_trio.store.redis_cluster.membership import ClusterMembership
from zlink_trio.store.redis_cluster.reminders import ClusterReminders
from zlink_trio.store.redis_cluster.sweep import LISTING, STATISTICS, TOTALS, Sweep, gather
from zlink_trio.store.rules.location import check_reserve_args, page_of, parse_cursor
from zlink_trio.store.rules.membership import check_move_args
from zlink_trio.store.rules.recovery import check_orphans_args
from zlink_trio.store.rules.relocation_steps import (
    check_member_options,
    check_target,
    is_carried,
)
from zlink_trio.store.values import (
    MAX_PAGE_BYTES,
    MAX_PAGE_SIZE,
    LocationStatistics,
    NodeIdInUse,
    Page,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from zlink_trio.core.identity import NodeRid, SpotKind
    from zlink_trio.core.records import (
        AuthorityFence,
        AuthorityRecord,
        CreationIntent,
        OwnerFence,
        RecoveryPointer,
    )
    from zlink_trio.store.redis_cluster.keys import ClusterKeys
    from zlink_trio.store.redis_cluster.runner import ClusterRunner

__all__ = ("ClusterLocationStore", "gather")

#: NewClaim starts over at most this often when the old claim changes under it.
_CLAIM_ROUNDS = 3


def _claims(flat: Sequence[Any] | None) -> list[dict[str, Any]]:
    flat = flat or []
    return [json.loads(flat[i + 1]) for i in range(0, len(flat), 2)]


def _claim(c: dict[str, Any]) -> NodeClaim:
    return decode_claim([c["desc"], c["lc"], c["exp"], c["ver"], c.get("closed")])


class ClusterLocationStore(RedisLocationStore):
    """A :class:`~zlink_trio.store.LocationStore` on Redis Cluster; see the protocol."""

    _run: ClusterRunner  # type: ignore[assignment]
    _keys: ClusterKeys

    def __init__(self, runner: ClusterRunner, keys: ClusterKeys) -> None:
        super().__init__(runner, keys)  # type: ignore[arg-type]  # same interface
        self.sweep: Final = Sweep(runner.router,
                                  [keys.bucket_tag(b) for b in range(keys.buckets)])
        self.membership: Final = ClusterMembership(runner, keys)
        self.carry: Final = ClusterCarry(runner, keys)
        self._reminder_steps = ClusterReminders(runner, keys)

    async def _stepped(self, name: str, flat: Sequence[Any]) -> AuthorityRecord:
        """The Spot's record after its script; its carried members follow (``carry``)."""
        record = decode_record(flat)
        await self.carry.stepped(name, flat, record)
        return record

    async def _node(self, what: str, name: str, keys: Sequence[str],
                    *args: str | int | bytes, write: bool = True) -> Any:
        return await self._run.bounded(what, lambda: self._run.node(name, keys, args,
                                                                     write=write))

    async def _all_claims(self, what: str) -> list[dict[str, Any]]:
        return _claims(await self._run.command(what, ["HGETALL", self._keys.nodes("claims")]))

    # -- descriptor claims -----------------------------------------------------------------

    async def new_claim(self, descriptor: NodeDescriptor, *, now: float,
                        lease: float) -> NodeClaim:
        """NewClaim (node and bucket scripts, see the module docstring)."""
        if not isinstance(descriptor, NodeDescriptor):
            raise InvalidOperation(f"new_claim takes a NodeDescriptor, got {type(descriptor)}")
        expires = _lease(now, lease)
        rid, mesh, entry = str(descriptor.node_rid), descriptor.mesh, descriptor.entry_spot_id
        what = f"new_claim of node {rid} in mesh {mesh!r}"
        nodes = [self._keys.nodes("claims"), self._keys.nodes("lifecycles")]
        field = claim_field(mesh, rid)
        base = [repr(float(now)), descriptor.node_id, rid, field]
        entry_key = self._keys.spot(entry)
        for _ in range(_CLAIM_ROUNDS):
            check = await self._node(what, "n_new_claim", nodes, *base, write=False)
            self._claim_refusal(check, what, now)
            old_lc, old_entry, spent = _text(check[1]), _text(check[2]), int(check[3])
            raise_status(await self._script(what, "entry", entry_key, entry, rid, old_lc,
                                            "check"), what)
            if spent:
                raise_status(["LC_SPENT"], what)
            written = await self._node(what, "n_new_claim", nodes, *base, old_lc, expires,
                                       entry, mesh, *claim_args(descriptor))
            if _text(written[0]) == "RETRY":
                continue
            self._claim_refusal(written, what, now)
            lc = _text(written[1])
            made = await self._script(what, "entry", entry_key, entry, rid, old_lc, "write",
                                      lc, mesh)
            if _text(made[0]) != "OK":
                await self._node(what, "n_remove", nodes[:1], field, lc)
                raise_status(made, what)
            if old_lc and old_entry and old_entry != entry:
                await self._script(what, "entry_drop", self._keys.spot(old_entry), rid, old_lc)
            self._run.own(mesh, rid, int(lc))
            return NodeClaim(descriptor=descriptor, lifecycle_generation=int(lc),
                             lease_expires_at=float(expires))
        raise StoreUnavailable(f"{what}: the claim kept changing under NewClaim; nothing "
                               "was written, retry")

    @staticmethod
    def _claim_refusal(reply: Sequence[Any], what: str, now: float) -> None:
        if _text(reply[0]) == "NODE_LIVE":
            raise NodeIdInUse(decode_claim(reply[1]), now)
        raise_status(reply, what)

    async def renew(self, mesh: str, node_rid: NodeRid, lifecycle_generation: int, *,
                    now: float, lease: float) -> NodeClaim:
        """Renew (one node script); see ``LocationStore.renew``."""
        expires = _lease(now, lease)
        what = f"renew of node {node_rid} lifecycle {lifecycle_generation}"
        reply = await self._node(what, "n_renew", [self._keys.nodes("claims")],
                                 claim_field(mesh, node_rid), str(lifecycle_generation),
                                 repr(float(now)), expires)
        if _text(reply[0]) == "STALE_OWNER":
            reply = ["STALE_OWNER", str(node_rid), str(lifecycle_generation), mesh]
        raise_status(reply, what)
        return decode_claim(reply[1])

    async def _mark_placement(self, name: str, mesh: str, node_rid: NodeRid,
                              lifecycle_generation: int, *, closed: bool) -> bool:
        """Close- or OpenPlacement (one node script); see ``LocationStore.close_placement``."""
        what = f"{name} of node {node_rid} lifecycle {lifecycle_generation}"
        reply = await self._node(what, "n_mark_placement", [self._keys.nodes("claims")],
                                 claim_field(mesh, node_rid), str(lifecycle_generation),
                                 "1" if closed else "0")
        raise_status(reply, what)
        return bool(reply[1])

    async def remove(self, mesh: str, node_rid: NodeRid, lifecycle_generation: int) -> bool:
        """Remove (node script, then the Entry record's bucket); see the protocol."""
        what = f"remove of node {node_rid}"
        reply = await self._node(what, "n_remove", [self._keys.nodes("claims")],
                                 claim_field(mesh, node_rid), str(lifecycle_generation))
        await self._run.disown(mesh, node_rid, lifecycle_generation)  # its units in hand
        if not int(reply[0]):
            return False
        entry = _text(reply[1])
        await self._script(what, "entry_drop", self._keys.spot(entry), str(node_rid),
                           str(lifecycle_generation))
        return True

    async def _every_claim(self, what: str, now: float) -> list[NodeClaim]:
        """Every claim, live or not (one read of the claims hash); ``descriptors`` and
        ``dead_claims`` filter it."""
        check_finite(now, "now")
        return [_claim(c) for c in await self._all_claims(what)]

    async def remove_dead_claims(self, node_id: str, *, now: float) -> int:
        """RemoveDeadClaims (every bucket's units, a node script, then the Entry
        records); see the protocol.

        A dead claim goes when no record holds a unit of it: the buckets count each
        lifecycle's units beside its records (the layout's ``shift``, ``lua``), so every
        bucket first marks the NodeId's lifecycles in each Mesh up to the newest expired
        one there dead -- from then on no script there gives one of them a unit, so a
        count read after the mark only falls -- and answers its counts (``dead_mark``).
        A mark covers every older lifecycle of that NodeId and Mesh too, all dead: the
        NodeId's lifecycle generations only grow, and a claim replaces or is refused
        beside another of its NodeId in that Mesh only once that one expired. The units
        in the nodes slot are capacity only (a node takes some ahead, ``runner``): a
        removed claim's go with it. A deployment created before the buckets counted units
        removes only a claim with no unit in the nodes slot, as before
        (``ClusterRunner.counted``).
        """
        validate_node_id(node_id)
        check_finite(now, "now")
        what = f"remove_dead_claims of NodeId {node_id!r}"
        dead = [c for c in await self._all_claims(what)
                if c["node"] == node_id and not float(c["exp"]) > now]
        if not dead:
            return 0
        counted = self._run.counted
        if counted:
            dead = await self._owning_nothing(what, node_id, dead)
            if not dead:
                return 0
        loads = [self._keys.load(c["mesh"], c["rid"], int(c["lc"])) for c in dead]
        pairs = [v for c in dead for v in (claim_field(c["mesh"], c["rid"]), str(c["lc"]))]
        removed = await self._node(what, "n_remove_dead", [self._keys.nodes("claims"), *loads],
                                   repr(float(now)), "1" if counted else "0", *pairs)
        for _, entry, rid, lc in ([_text(v) for v in r] for r in removed):
            await self._script(what, "entry_drop", self._keys.spot(entry), rid, lc)
        return len(removed)

    async def _owning_nothing(self, what: str, node_id: str, dead: list[dict[str, Any]]
                              ) -> list[dict[str, Any]]:
        """Of the expired claims ``dead`` of ``node_id``, those that hold no unit in any
        bucket, each bucket marking them dead first (``dead_mark``)."""
        newest: dict[str, int] = {}
        for c in dead:
            newest[c["mesh"]] = max(newest.get(c["mesh"], 0), int(c["lc"]))
        marks = [v for mesh, lc in sorted(newest.items()) for v in (mesh, str(lc))]
        fields = [f'{c["mesh"]}|{c["rid"]}|{c["lc"]}' for c in dead]
        run, keys = self._run, self._keys

        def mark(b: int) -> Callable[[], Awaitable[Any]]:
            return lambda: run.script(what, "dead_mark", [keys.dead(b)],
                                      [node_id, len(newest), *marks, *fields])

        totals = [0] * len(dead)
        for counts in await self._each_bucket(mark):
            _add(totals, counts)
        return [c for c, units in zip(dead, totals, strict=True) if units <= 0]

    # -- authority -------------------------------------------------------------------------

    async def reserve(self, spot_id: str, *, kind: SpotKind, stable_type: str, mesh: str,
                      owner: OwnerFence, now: float,
                      creation_intent: CreationIntent | None = None,
                      recovery_pointer: RecoveryPointer | None = None,
                      container: str | None = None) -> ReservationFence:
        """Reserve: an Actor's mark in its container's bucket first (``membership``), the
        owner's unit (nodes slot), then the bucket script."""
        check_reserve_args(spot_id, kind=kind, stable_type=stable_type, mesh=mesh, owner=owner,
                           now=now, creation_intent=creation_intent,
                           recovery_pointer=recovery_pointer, container=container)
        what = f"reserve of {spot_id!r}"
        mark = (None if container is None
                else await self.membership.mark(what, container, spot_id, owner))
        reply = _seq(await self._run.script(
            what, "reserve", [self._keys.spot(spot_id), self._keys.bans(spot_id)],
            [spot_id, encode_kind(kind), stable_type, mesh, str(owner.node_rid),
             owner.lifecycle_generation, repr(float(now)), container or "",
             "" if mark is None else mark.token,
             *optional_fields(creation_intent, recovery_pointer)]))
        if mark is not None:
            await self.membership.conclude(mark, reply, what, used=_text(reply[0]) == "OK")
        raise_status(reply, what)
        return ReservationFence(spot_id=spot_id, store_version=1,
                                object_generation=int(_text(reply[1])), owner_generation=1,
                                owner=owner, owner_lease_expires_at=float(_text(reply[2])))

    async def begin_close(self, spot_id: str, *, object_generation: int, owner: OwnerFence,
                          now: float, expected_owner_generation: int | None = None,
                          expected_store_version: int | None = None
                          ) -> AuthorityRecord | None:
        """BeginClose, checking the member marks (``membership``); see the protocol."""
        return await self.membership.begin_close(
            spot_id, object_generation=object_generation, owner=owner, now=now,
            expected_owner_generation=expected_owner_generation,
            expected_store_version=expected_store_version)

    async def move_membership(self, actor_id: str, *, object_generation: int,
                              owner: OwnerFence, container: str,
                              now: float) -> AuthorityRecord:
        """MoveMembership: the new container's mark, the record, the old mark dropped
        (``membership``); see ``LocationStore.move_membership``."""
        check_move_args(actor_id, object_generation=object_generation, owner=owner,
                        container=container, now=now)
        what = f"move_membership of {actor_id!r} to {container!r}"
        mark = await self.membership.mark(what, container, actor_id, owner)
        reply = _seq(await self._run.script(
            what, "move_membership", [self._keys.spot(actor_id), self._keys.bans(actor_id)],
            [object_generation, str(owner.node_rid), owner.lifecycle_generation, container,
             repr(float(now)), mark.token]))
        used = _text(reply[0]) == "OK" and mark.token != "" and _field(reply[1], "mt") == (
            mark.token)
        await self.membership.conclude(mark, reply, what, used=used)
        return self._moved(reply, what, actor_id, object_generation, owner)

    async def members(self, container: str) -> list[AuthorityRecord]:
        """The Actors whose records name ``container`` (marks, then records)."""
        return await self.membership.members(container)

    async def begin_relocation(self, fence: AuthorityFence, *, target: OwnerFence,
                               now: float, container: str | None = None,
                               members_stay: bool = False,
                               carry_members: bool = False) -> AuthorityRecord:
        """BeginRelocation: an Actor's mark in its next container's bucket first (checked
        for the target), then the bucket script, which checks a Spot's own marks as
        BeginClose does unless its members stay (``membership``); a Spot that carries its
        members writes them as its group, and they follow (``carry``); see the protocol."""
        check_finite(now, "now")
        check_target(target)
        check_member_options(members_stay=members_stay, carry_members=carry_members)
        if container is not None:
            validate_spot_id(container)
        spot_id = fence.spot_id
        what = f"begin_relocation of {spot_id!r}"
        for _ in range(2):  # a group an ended move left is resolved once, then again
            mark = (None if container is None
                    else await self.membership.mark(what, container, spot_id, target))
            reply = await self.membership.settle(
                what, "begin_relocation", spot_id,
                [self._keys.spot(spot_id), self._keys.bans(spot_id),
                 self._keys.members(spot_id)],
                [*_relocation_args(fence, target, now, container, members_stay,
                                   carry_members), "" if mark is None else mark.token],
                carry=fence.owner if carry_members else None)
            if mark is not None:
                used = _text(reply[0]) == "OK" and mark.token != "" and _field(
                    reply[1], "nmt") == mark.token
                await self.membership.conclude(mark, reply, what, used=used)
            if _text(reply[0]) != "GROUP":
                break
            await self.carry.settle(reply[1])
        if carry_members and _text(reply[0]) == "MEMBERS":
            raise Unavailable(f"{spot_id!r} moves with its members, and Actors kept joining "
                              "or leaving it while the move began; retry")
        record = self._relocating(reply, what, fence)
        group = group_of(reply[1])
        if group:
            await self.carry.begin(record, group, target=target,
                                   abort=lambda: self.abort_relocation(record.fence()))
        return record

    async def find(self, spot_id: str) -> AuthorityRecord | None:
        """The record or ``None``; a carried member left behind by its Spot's move is
        resolved first (``carry``)."""
        record = await super().find(spot_id)
        if record is not None and is_carried(record) and await self.carry.resolve(spot_id):
            record = await super().find(spot_id)
        return record

    # -- reads over every bucket -----------------------------------------------------------

    def _each_bucket(self, make: Callable[[int], Callable[[], Awaitable[Any]]]
                     ) -> Awaitable[list[Any]]:
        return gather([make(b) for b in range(self._keys.buckets)])

    async def query(self, *, page_size: int, cursor: str | None = None,
                    max_bytes: int = MAX_PAGE_BYTES) -> Page:
        """One Query page: the next IDs of every bucket, merged, then their records."""
        check_int(page_size, "page_size", 1, MAX_PAGE_SIZE)
        after = parse_cursor(cursor)
        low = "-" if after is None else "(" + after
        run, keys = self._run, self._keys

        def listing(b: int) -> Awaitable[Any]:
            return run.command("query", ["ZRANGEBYLEX", keys.ids(b), low, "+", "LIMIT", 0,
                                         page_size + 1])

        alone, merged = await run.bounded("query", lambda: self.sweep.parts(
            LISTING, lambda b: (keys.ids(b),), [low, page_size + 1], listing, whole=True))
        ids = sorted({bytes(i) for part in (*alone, *merged) if part for i in part})
        ids = ids[:page_size + 1]
        def record(spot_id: bytes) -> Callable[[], Awaitable[Any]]:
            return lambda: run.command("query", ["HGETALL", self._keys.spot(spot_id.decode())])

        flats = await gather([record(i) for i in ids[:page_size]])
        return page_of((decode_record(f) for f in flats if f), listed=len(ids),
                       max_bytes=max_bytes)

    async def bucket_statistics(self) -> list[Any]:
        """Per bucket: its counts per state, last ObjectGeneration and Relocation counts."""
        run, keys = self._run, self._keys

        def stats(b: int) -> Awaitable[Any]:
            return run.script("statistics", "bucket_statistics", [keys.ids(b)], [],
                              write=False)

        return await run.bounded("statistics", lambda: self.sweep.each(
            STATISTICS, self._counters, [], stats))

    def _counters(self, bucket: int) -> Sequence[str]:
        return self._keys.bucket_meta(bucket)[1:4]  # counts, gen, Relocation stats

    async def totals(self) -> tuple[list[int], list[int], int]:
        """Every bucket's counts summed (Location, Relocation) and the largest generation."""
        run, keys = self._run, self._keys

        def stats(b: int) -> Awaitable[Any]:
            return run.script("statistics", "bucket_statistics", [keys.ids(b)], [],
                              write=False)

        parts, summaries = await run.bounded("statistics", lambda: self.sweep.parts(
            TOTALS, self._counters, [], stats, whole=True))
        loc, rel, gens = [0] * 6, [0] * 4, [0]
        for counts, rcounts, issued in summaries:
            _add(loc, counts)
            _add(rel, rcounts)
            gens += (int(_text(g)) for g in issued)
        for part in parts:
            if part is not None:  # a bucket read alone
                counts, gen, rcounts = part
                _add(loc, counts)
                _add(rel, rcounts)
                gens.append(0 if gen is None else int(_text(gen)))
        return loc, rel, max(gens)

    async def statistics(self) -> LocationStatistics:
        """Counts summed over every bucket; the largest ObjectGeneration any issued."""
        claims = await self._run.command("statistics", ["HLEN", self._keys.nodes("claims")])
        n, _, last = await self.totals()
        return LocationStatistics(
            claims=int(claims), creating=n[0], ready=n[1], closing=n[2], relocating=n[3],
            sealed=n[4], relay_ready=n[5], last_object_generation=last)

    async def _owned(self, node_id: str, *, now: float, after: str | None, limit: int,
                     mode: str) -> list[AuthorityRecord]:
        check_orphans_args(node_id, now=now, after=after, limit=limit)
        owners: list[str | int] = []
        for c in await self._all_claims("orphans (claims)"):
            claim = _claim(c)
            if claim.descriptor.node_id == node_id and not claim.is_live(now):
                owners += [str(claim.descriptor.node_rid), str(claim.lifecycle_generation)]
        if not owners:
            return []
        run = self._run

        def scan(b: int) -> Callable[[], Awaitable[Any]]:
            async def pages() -> list[AuthorityRecord]:
                found: list[AuthorityRecord] = []
                cursor = after or ""
                while len(found) < limit:
                    reply = _seq(await run.script(
                        f"orphans of NodeId {node_id!r}", "recovery_orphans",
                        [self._keys.ids(b)], [cursor, SCAN_BUDGET, limit - len(found), mode,
                                              *owners], write=False))
                    found += [decode_record(flat) for flat in reply[2:]]
                    cursor = _text(reply[0])
                    if int(reply[1]) == 1 or not cursor:
                        break
                return found
            return pages

        found = [r for part in await self._each_bucket(scan) for r in part]
        return sorted(found, key=lambda r: r.spot_id.encode())[:limit]

    async def orphans(self, node_id: str, *, now: float, after: str | None = None,
                      limit: int = 1000) -> list[AuthorityRecord]:
        """Incomplete activations of a dead lifecycle (every bucket); see the protocol."""
        return await self._owned(node_id, now=now, after=after, limit=limit, mode="orphans")

    async def dead_owned(self, node_id: str, *, now: float, after: str | None = None,
                         limit: int = 1000) -> list[AuthorityRecord]:
        """Every record of a dead lifecycle (every bucket), carried members left behind
        by their Spot's move resolved first (``carry``); see the protocol."""
        found = await self._owned(node_id, now=now, after=after, limit=limit, mode="owned")
        left = [r.spot_id for r in found if is_carried(r)]
        if left and any(await gather([self._resolver(i) for i in left])):
            found = await self._owned(node_id, now=now, after=after, limit=limit, mode="owned")
        return found

    def _resolver(self, actor_id: str) -> Callable[[], Awaitable[bool]]:
        return lambda: self.carry.resolve(actor_id)


def _add(totals: list[int], values: Sequence[Any]) -> None:
    for i, v in enumerate(values):
        totals[i] += 0 if v is None else int(_text(v))


def _field(flat: Sequence[Any], name: str) -> str | None:
    """The value of field ``name`` in an ``HGETALL`` reply, or ``None``."""
    for i in range(0, len(flat) - 1, 2):
        if _text(flat[i]) == name:
            return _text(flat[i + 1])
    return None


def _seq(value: object) -> list[Any]:
    assert isinstance(value, list), value
    return value


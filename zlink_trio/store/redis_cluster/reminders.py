"""Durable reminders on Redis Cluster: the reminders in their Spot's bucket, due hints apart.

Theory of operation
-------------------
A Spot's reminders are a hash in its bucket (``keys``: ``{b<k>}:reminders:<spot_id>``), so
SetReminder, CancelReminder, ReminderDone, DropReminders and Release stay one bucket script
each, fenced in the same script exactly as on one Redis (``store.redis.lua.reminders``;
the owner's claim comes in as facts, ``runner``). The **due index** of a (Mesh, reminder
partition) is a sorted set in the partition's own slot (``{rp<p>}:due:<mesh>``, score a
wake, member ``store.redis.reminders.index_member``), which no bucket script can write.
So the index is a **hint**: the invariant this module keeps is

    **every stored reminder has an entry in the due hints of its Mesh and partition whose
    score is at most its wake** -- a hint may be *early* (its reminder is due later, or
    gone), never *late* (scored after the wake) and never *missing*.

A take reads every hint due at ``now``, so under the invariant it never misses a due
reminder; an early hint costs a take one look at the bucket, never a delivery.

**Hint writes** (``h_hint``, one script in the partition's slot) only lower: ``ZADD LT``,
a new entry or the lower of the two scores. Each also issues a **token** -- the partition's
counter, ``{rp<p>}:seq``, strictly increasing -- and records it as the member's last
token (``{rp<p>}:tok:<mesh>``).

**Writes that set a wake** -- SetReminder (the wake is the due) and the ReminderDone of a
repeating reminder (its next due) -- write a hint for that wake *first*, then send their
bucket script with the hint's Mesh, score and token. The script makes every check of the
oracle's, and then (``rem_hint_refusal``, the bucket layout's) stands on the hint only if
it is for the reminder's Mesh, at most the wake it writes, and its token is above the
bucket's **watermark** for the partition (``{b<k>}:rwm``); otherwise it writes nothing and
asks for a (new) hint (``REM_HINT`` / ``REM_BANNED``), and the call writes one and sends
the script again (a few rounds). SetReminder reads the Spot's record first for its Mesh.
A crash between the hint and the bucket script leaves an early hint (for a reminder that
is due later, or not there): harmless. Writes that only delete (CancelReminder, a
one-shot's ReminderDone, DropReminders, Release) write no hint and leave the old one:
an early hint of a reminder that is gone.

**A take** checks the taker's own claim first (one read of the claims hash in the nodes
slot, with ``check_owner``'s refusals; a claim's expiry only grows while it lives and an
ended lifecycle never returns, so the check holds when the takes run, ``runner``). Then,
per round: it reads the due hints of every partition it scans with their tokens (one
read-only ``h_due`` per master over all of its partitions, ``sweep``; one per partition
where that cannot run), merges them by (score, member) and,
for the first ``limit`` it still needs, runs ``reminder_take`` in each hint's bucket:
that script first raises the bucket's watermark of the partition to the hint's token,
then takes the reminder only if it is there (of that Mesh), due and not held -- it
answers the reminder taken, its real wake, or ``GONE``. Then the hint is **fixed**
(``h_fix``) -- set to the real wake (after a take: the end of the hold), or removed when
the reminder is gone -- only if the member's token is still the one read. A round that
took fewer than needed while hints were left unread starts another; the reminders are
returned in ``scan_order`` of their wakes before the take. When hints are early, which
``limit`` of more due reminders one take gets may differ from one Redis's; every due
reminder is still taken by some take. A take of one partition may therefore be several
round trips; that is accepted.

**Why a fix never makes a hint late or missing.** Say a take read the member with token
``c`` (time *r*), its bucket script raised the watermark to at least ``c`` and saw wake
``w`` or nothing (time *b*), and its fix applies at time *f*. Any write that can *lower*
the wake (SetReminder, a repeating ReminderDone) wrote its hint before its bucket script:

- hint written before *r*: its token is at most ``c`` (tokens grow, and ``c`` was the
  member's last), so if its bucket script comes after *b* it is refused (the watermark)
  and must write a new hint -- that is, a hint after *r*, below; if it came before *b*,
  ``w`` already is its wake (or later, a take's);
- hint written between *r* and *f*: the member's token changed, so the fix does nothing;
- hint written after *f*: it lowers the fixed score to at most its own wake itself.

Every other change of a reminder only raises its wake (a take) or deletes it. So after
the fix the score is at most the wake, and a removed hint had no reminder that could
come back without writing a hint of its own after *r*. Were the fix conditional on the
score alone, a SetReminder whose ``ZADD LT`` changed nothing (its due not below the hint)
and whose bucket script ran after the take's would be left with a late or missing
hint: the token and the watermark are what close that window. A refused write costs
one more hint and script; a watermark is one field per bucket and partition.

Round trips: SetReminder 4 (the record, the hint, the claims read for facts and the
bucket script); CancelReminder 2 (facts, script); ReminderDone 1 (a repeating one: 2,
the hint first); DropReminders 1; ``reminders`` 1; a take 1 for the claim, then 3 per
round (hints read, bucket takes, fixes, each all in flight together) -- one round when
the hints are exact or fewer than ``limit`` are due.
"""

from __future__ import annotations

import json
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final

from zlink_trio.core.errors import StoreUnavailable, Unavailable
from zlink_trio.core.placement import REMINDER_PARTITIONS, reminder_partition
from zlink_trio.store.redis.codec import decode_record, raise_status, text
from zlink_trio.store.redis.reminders import (
    RedisReminders,
    decode_reminder,
    index_member,
    parse_member,
    reply_parts,
)
from zlink_trio.store.redis_cluster.keys import claim_field
from zlink_trio.store.redis_cluster.lua import HINT_SCRIPTS
from zlink_trio.store.redis_cluster.sweep import Sweep, gather
from zlink_trio.store.rules.reminders import check_take_args

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from zlink_trio.core.records import AuthorityFence, OwnerFence
    from zlink_trio.store.redis_cluster.keys import ClusterKeys
    from zlink_trio.store.redis_cluster.runner import ClusterRunner
    from zlink_trio.store.values import StoredReminder

__all__ = ("ClusterReminders",)

#: Hints one write makes before it gives up (takes kept sweeping them).
_HINT_ROUNDS: Final = 4
#: Rounds of one take (each reads the due hints again).
_TAKE_ROUNDS: Final = 8

#: A candidate of a take: hint score, member, partition, token.
_Candidate = tuple[float, bytes, int, str]

#: The due-hint read (``h_due``): one partition's keys declared, or a master's partitions
#: as arguments (``sweep``).
_DUE: Final = HINT_SCRIPTS["h_due"]


def _seq(value: object, what: str) -> Sequence[Any]:
    if not isinstance(value, list) or not value:
        raise Unavailable(f"{what}: Redis Cluster answered {value!r}, which this version does "
                          "not know; check that every process runs the same zlink_trio")
    return value


def _score(value: object, what: str) -> float:
    """A score or wake a script answered, as a float (strictly)."""
    try:
        return float(text(value))
    except ValueError as error:
        raise Unavailable(f"{what}: Redis Cluster answered the score {value!r}; check that "
                          "every process runs the same zlink_trio") from error


class ClusterReminders(RedisReminders):
    """The ``ReminderSteps`` of a Redis Cluster store (the module docstring)."""

    _run: ClusterRunner  # type: ignore[assignment]
    _keys: ClusterKeys

    def __init__(self, runner: ClusterRunner, keys: ClusterKeys) -> None:
        super().__init__(runner, keys)  # type: ignore[arg-type]  # same interface
        #: The due hints of a take's partitions, one script per master.
        self.sweep: Final = Sweep(runner.router, [keys.partition_tag(p)
                                                  for p in range(REMINDER_PARTITIONS)])

    # -- the hooks of RedisReminders -------------------------------------------------------

    def _write_keys(self, spot_id: str) -> list[str]:
        return [*super()._write_keys(spot_id), self._keys.watermarks(spot_id)]

    def _done_keys(self, spot_id: str) -> list[str]:
        return [*super()._done_keys(spot_id), self._keys.watermarks(spot_id)]

    async def _mesh_of(self, what: str, fence: AuthorityFence) -> str:
        """The Mesh of the record ``fence`` owns (one read), ``""`` when it owns none: the
        bucket script then refuses, or asks for the hint (``REM_HINT``)."""
        flat = await self._run.command(what, ["HGETALL", self._keys.spot(fence.spot_id)])
        if not flat:
            return ""
        record = decode_record(flat)
        if (record.object_generation, record.owner_generation, record.owner) != (
                fence.object_generation, fence.owner_generation, fence.owner):
            return ""
        return record.mesh

    async def _hinted(self, what: str, name: str, keys: Sequence[str],
                      args: Sequence[str | int], *, spot_id: str, reminder: str,
                      partition: int, mesh: str, score: str | None) -> Sequence[Any]:
        """The hint first (when the wake is known), then the bucket script standing on it;
        a new hint for each ``REM_HINT`` / ``REM_BANNED`` (the module docstring)."""
        member = index_member(spot_id, reminder)
        hint: list[str] = ["", "", ""]
        if score is not None and mesh:
            hint = [mesh, score, await self._hint(what, mesh, partition, member, score)]
        for _ in range(_HINT_ROUNDS):
            reply = _seq(await self._run.script(what, name, keys, [*args, *hint]), what)
            code = text(reply[0])
            if code == "REM_HINT":  # none yet, or for another Mesh or a later wake
                _, wake, mesh = reply_parts(reply, 3, what)
                mesh, score = text(mesh), text(wake)
            elif code == "REM_BANNED":  # a take swept past its token: a new one
                mesh, score = hint[0], hint[1]
            else:
                return reply
            hint = [mesh, score, await self._hint(what, mesh, partition, member, score)]
        raise StoreUnavailable(f"{what}: takes kept sweeping the reminder's due hint while it "
                               "was written; nothing was written, retry")

    async def _hint(self, what: str, mesh: str, partition: int, member: bytes,
                    score: str) -> str:
        """Write the due hint of ``member`` at most ``score`` (``h_hint``); its token."""
        keys = self._keys
        token = await self._run.bounded(what, lambda: self._run.node(
            "h_hint", [keys.reminder_index(mesh, partition),
                       keys.reminder_tokens(mesh, partition),
                       keys.reminder_tokens_issued(partition)], [member, score]))
        if type(token) is not int or token < 1:
            raise Unavailable(f"{what}: the hint script answered {token!r}; check that every "
                              "process runs the same zlink_trio")
        return str(token)

    # -- the take --------------------------------------------------------------------------

    async def take_due_reminders(self, mesh: str, partitions: Sequence[int],
                                 taker: OwnerFence, *, now: float, hold: float,
                                 limit: int) -> list[StoredReminder]:
        """TakeDueReminders by the due hints (the module docstring)."""
        wanted = check_take_args(mesh, partitions, taker, now, hold, limit)
        what = (f"take_due_reminders of mesh {mesh!r} by node {taker.node_rid} lifecycle "
                f"{taker.lifecycle_generation}")
        await self._check_taker(what, mesh, taker, now)
        args: list[str | int] = [mesh, repr(float(now)), str(taker.node_rid),
                                 taker.lifecycle_generation, repr(float(now) + float(hold))]
        taken: list[tuple[float, StoredReminder]] = []
        seen: dict[int, set[bytes]] = {p: set() for p in wanted}
        for _ in range(_TAKE_ROUNDS):
            need = limit - len(taken)
            pages = await self._due(what, mesh, wanted, now,
                                    need + max((len(s) for s in seen.values()), default=0))
            more = False
            candidates: list[_Candidate] = []
            for partition, page in zip(wanted, pages, strict=True):
                page = _seq(page, what) if page else []
                more = more or len(page) >= need + len(seen[partition])
                for entry in page:
                    member, score, token = reply_parts(_seq(entry, what), 3, what)
                    raw = member if isinstance(member, bytes) else text(member).encode()
                    if raw not in seen[partition]:
                        candidates.append((_score(score, what), raw, partition, text(token)))
            candidates.sort(key=lambda c: (c[0], c[1]))
            batch = candidates[:need]
            more = more or len(candidates) > need
            for _, raw, partition, _ in batch:
                seen[partition].add(raw)
            done = await gather([self._taker(what, c, args) for c in batch])
            taken += (t for t in done if t is not None)
            if len(taken) >= limit or not more or not batch:
                break
        taken.sort(key=lambda t: (t[0], t[1].spot_id, t[1].name))
        return [reminder for _, reminder in taken]

    async def _check_taker(self, what: str, mesh: str, taker: OwnerFence,
                           now: float) -> None:
        """``check_owner`` of ``taker`` in ``mesh`` on its claim (one read, nodes slot)."""
        rid, lc = str(taker.node_rid), str(taker.lifecycle_generation)
        raw = await self._run.command(what, ["HGET", self._keys.nodes("claims"),
                                             claim_field(mesh, rid)])
        try:
            claim = None if raw is None else json.loads(raw)
            found = None if claim is None else (str(claim["lc"]), str(claim["exp"]))
            expires = None if found is None else float(found[1])
        except (ValueError, TypeError, KeyError) as error:
            raise Unavailable(f"{what}: the claim of node {rid} in mesh {mesh!r} does not "
                              f"decode ({error}); check that every process runs the same "
                              "zlink_trio") from error
        if found is None or found[0] != lc:
            raise_status(["STALE_OWNER", rid, lc, mesh], what)
        elif expires is not None and not float(now) < expires:
            raise_status(["EXPIRED", rid, lc, found[1]], what)

    async def _due(self, what: str, mesh: str, wanted: Sequence[int], now: float,
                   count: int) -> list[Any]:
        """The first ``count`` hints due at ``now`` of each of the ``wanted`` partitions, in
        their order: one read-only script per master (``sweep``), or one per partition
        where that cannot run."""
        keys, run = self._keys, self._run
        args: list[str | int] = [repr(float(now)), count]

        def names(partition: int) -> tuple[str, str]:
            return keys.reminder_index(mesh, partition), keys.reminder_tokens(mesh, partition)

        async def alone(partition: int) -> Any:
            return _seq(await run.node("h_due", names(partition), args, write=False), what)[0]

        pages, _ = await run.bounded(what, lambda: self.sweep.parts(
            _DUE, names, args, alone, only=wanted, variant=mesh))
        return [pages[p] for p in wanted]

    def _taker(self, what: str, candidate: _Candidate, args: Sequence[str | int]
               ) -> Callable[[], Awaitable[tuple[float, StoredReminder] | None]]:
        return lambda: self._take_one(what, candidate, args)

    async def _take_one(self, what: str, candidate: _Candidate, args: Sequence[str | int]
                        ) -> tuple[float, StoredReminder] | None:
        """``reminder_take`` of one hint in its bucket, then its fix: the reminder taken
        (with its wake before), or ``None``."""
        _, member, partition, token = candidate
        mesh, now, rid, lc, until = args
        spot_id, name = parse_member(member)
        if reminder_partition(spot_id) != partition:  # not a hint of ours: leave it
            return None
        reply = _seq(await self._run.script(
            what, "reminder_take",
            [self._keys.reminders(spot_id), self._keys.watermarks(spot_id)],
            [name, mesh, now, rid, lc, until, partition, token]), what)
        code = text(reply[0])
        result = None
        if code == "TOOK":
            _, raw, before, after = reply_parts(reply, 4, what)
            result, fix = (_score(before, what), decode_reminder(spot_id, name, raw)), text(after)
        elif code == "WAKE":
            fix = text(reply_parts(reply, 2, what)[1])
        elif code == "GONE":
            reply_parts(reply, 1, what)
            fix = ""
        else:
            raise_status(reply, what)
            raise Unavailable(f"{what}: the take script answered {code!r}, which this "
                              "version does not know; check that every process runs the "
                              "same zlink_trio")
        await self._fix(what, str(mesh), partition, member, token, fix)
        return result

    async def _fix(self, what: str, mesh: str, partition: int, member: bytes, token: str,
                   score: str) -> None:
        """Set the hint of ``member`` to ``score`` (``""``: remove it) while its token is
        still ``token`` (``h_fix``). Best effort: a fix that fails leaves the hint early,
        which the next take fixes."""
        keys = self._keys
        with suppress(StoreUnavailable):
            await self._run.bounded(what, lambda: self._run.node(
                "h_fix", [keys.reminder_index(mesh, partition),
                          keys.reminder_tokens(mesh, partition)], [member, token, score]))

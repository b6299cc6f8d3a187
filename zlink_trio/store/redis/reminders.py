"""Durable reminders on one Redis: each step one script (``lua.reminders``), or one read.

Theory of operation
-------------------
:class:`RedisReminders` is the ``ReminderSteps`` part of :class:`RedisLocationStore`.
Each method checks its arguments with the oracle's own checks first
(``store.rules.reminders``: ``check_set_args``, ``check_take_args``, ...; a bad argument
costs no round trip), then sends one script that makes every state check and then every
write. Keys (``codec``)::

    P reminders:{<spot_id>}              hash: name -> the reminder (``lua.reminders``)
    P meta:{m}:due:<partition>:<mesh>    zset: score the wake, member spot ID + NUL NUL +
                                         name (NUL in the ID escaped as NUL 1)

The reminder's partition (``core.placement.reminder_partition``) is computed here and
passed in; its Mesh is its record's, which the script reads. On one Redis the index is
written in the same script as the reminder, so it holds exactly one entry per reminder,
scored with its wake, and one script per take reads each scanned partition's first
``limit`` due entries, merges them in ``scan_order`` and takes them -- its cost is bounded
by what it takes.

Round trips: set, cancel, done, drop and take one script each; ``reminders`` one
``HGETALL``; Release deletes a closed Spot's reminders and their entries in its own
script (``lua.location``). Refusals are the oracle's: the fence's through
``codec.raise_writer`` (``rules.state.stale_writer`` / ``not_serving``), the taker's claim
through ``codec.raise_status`` (``check_owner``'s), the kind and count refusals worded as
``rules.reminders.txn_set_reminder`` words them. A stored reminder that does not decode
raises :class:`Unavailable`.

The Redis Cluster backend subclasses this (``store.redis_cluster.reminders``): the index
lives in another slot there and becomes a hint, written before the reminder; the hooks
:meth:`RedisReminders._hinted`, :meth:`RedisReminders._mesh_of` and the key lists are
where it differs.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from zlink_trio.core._json_fields import decode_kind
from zlink_trio.core.errors import Unavailable, ZLinkError
from zlink_trio.core.identity import NodeRid, validate_spot_id
from zlink_trio.core.placement import reminder_partition
from zlink_trio.core.records import AuthorityFence, OwnerFence
from zlink_trio.store.redis.codec import decode_record, raise_status, raise_writer, text
from zlink_trio.store.rules.reminders import (
    check_cancel_args,
    check_done_args,
    check_set_args,
    check_take_args,
    next_due,
    not_for_kind,
    too_many,
)
from zlink_trio.store.values import StoredReminder

if TYPE_CHECKING:
    from collections.abc import Sequence

    from zlink_trio.store.redis.client import ScriptRunner
    from zlink_trio.store.redis.codec import Keys

__all__ = ("RedisReminders", "decode_reminder", "index_member", "parse_member",
           "reply_count", "reply_parts", "set_refusal")

#: Fields of a stored reminder (``lua.reminders``).
_FIELDS: Final = 9


def index_member(spot_id: str, name: str) -> bytes:
    """The due-index member of reminder ``name`` of ``spot_id`` (the prelude's
    ``rem_member``): its byte order is the order of ``(spot_id, name)``."""
    return (spot_id.encode("utf-8").replace(b"\x00", b"\x00\x01") + b"\x00\x00"
            + name.encode("utf-8"))


def parse_member(member: object) -> tuple[str, str]:
    """``(spot_id, name)`` of a due-index member; :class:`Unavailable` when malformed."""
    raw = member if isinstance(member, bytes) else text(member).encode("utf-8")
    spot, sep, name = raw.partition(b"\x00\x00")
    try:
        if not sep:
            raise ValueError("no separator")
        return spot.replace(b"\x00\x01", b"\x00").decode("utf-8"), name.decode("utf-8")
    except ValueError as error:
        raise Unavailable(f"a reminder index holds the malformed member {raw!r} ({error}); "
                          "check that every process runs the same zlink_trio") from error


def decode_reminder(spot_id: str, name: str, raw: object) -> StoredReminder:
    """The :class:`StoredReminder` stored as ``raw`` (``lua.reminders``' encoding);
    :class:`Unavailable` when it is not one."""
    try:
        fields = json.loads(raw if isinstance(raw, (bytes, str)) else text(raw))
        if (type(fields) is not list or len(fields) != _FIELDS
                or not all(type(f) is str for f in fields)):
            raise ValueError(f"expected {_FIELDS} texts")
        mesh, kind, stable_type, due, period, version, rid, lc, until = fields
        return StoredReminder(
            spot_id=spot_id, name=name, mesh=mesh, kind=decode_kind(kind),
            stable_type=stable_type, due=float(due),
            period=None if period == "" else float(period), version=int(version),
            taker=None if rid == "" else OwnerFence(NodeRid.parse(rid), int(lc)),
            taken_until=float(until))
    except (ValueError, TypeError, ZLinkError) as error:
        raise Unavailable(f"the stored reminder {name!r} of {spot_id!r} does not decode "
                          f"({error}); check that every process runs the same "
                          "zlink_trio") from error


def _fence_args(fence: AuthorityFence) -> list[str | int]:
    return [fence.object_generation, fence.owner_generation, str(fence.owner.node_rid),
            fence.owner.lifecycle_generation]


def _seq(value: object) -> Sequence[Any]:
    if not isinstance(value, list) or not value:
        raise Unavailable(f"a reminder script answered {value!r}, which this version does "
                          "not know; check that every process runs the same zlink_trio")
    return value


def reply_parts(reply: Sequence[Any], count: int, what: str) -> Sequence[Any]:
    """``reply`` when it has ``count`` parts (its code first); :class:`Unavailable` when
    not, as for any answer this version does not know."""
    if len(reply) != count:
        raise Unavailable(f"{what}: the script answered {list(reply)!r}, which this version "
                          "does not know; check that every process runs the same zlink_trio")
    return reply


def reply_count(reply: Sequence[Any], what: str) -> int:
    """The count of an ``{'OK', n}`` reply (strictly: one integer, at least 0)."""
    n = reply_parts(reply, 2, what)[1]
    if type(n) is not int or n < 0:
        raise Unavailable(f"{what}: the script answered the count {n!r}; check that every "
                          "process runs the same zlink_trio")
    return n


def set_refusal(reply: Sequence[Any], what: str, fence: AuthorityFence) -> None:
    """Raise the refusal of a ``set_reminder`` reply (the oracle's order and wording);
    returns only on ``OK``."""
    code = text(reply[0])
    if code == "REM_KIND":
        raise not_for_kind(decode_record(reply_parts(reply, 2, what)[1]))
    if code == "REM_FULL":
        raise too_many(fence.spot_id, reply_count(reply, what))
    raise_writer(reply, what, fence)


class RedisReminders:
    """The ``ReminderSteps`` of one Redis (the module docstring)."""

    def __init__(self, runner: ScriptRunner, keys: Keys) -> None:
        self._run = runner
        self._keys = keys

    # -- where Redis Cluster differs ---------------------------------------------------------

    async def _hinted(self, what: str, name: str, keys: Sequence[str],
                      args: Sequence[str | int], *, spot_id: str, reminder: str,
                      partition: int, mesh: str, score: str | None) -> Sequence[Any]:
        """Run write script ``name`` whose reminder of ``mesh`` gets the wake ``score``
        (``None``: it gets none, or one only the script knows). One Redis writes the index
        in the script: no hint (its three hint arguments are empty)."""
        return _seq(await self._run.script(what, name, keys, [*args, "", "", ""]))

    async def _mesh_of(self, what: str, fence: AuthorityFence) -> str:
        """The Mesh of the Spot ``fence`` writes for, when the caller must know it before
        the script (Redis Cluster); here ``""``: the script reads it."""
        return ""

    def _write_keys(self, spot_id: str) -> list[str]:
        """Keys of a fenced write (set): the record, the reminders."""
        return [self._keys.spot(spot_id), self._keys.reminders(spot_id)]

    def _done_keys(self, spot_id: str) -> list[str]:
        """Keys of a ReminderDone: the reminders."""
        return [self._keys.reminders(spot_id)]

    # -- the steps -------------------------------------------------------------------------

    async def set_reminder(self, fence: AuthorityFence, name: str, *, due: float,
                           period: float | None, now: float) -> StoredReminder:
        """SetReminder (one script); see ``ReminderSteps.set_reminder``."""
        check_set_args(fence, name, due, period, now)
        spot_id = fence.spot_id
        what = f"set_reminder {name!r} of {spot_id!r}"
        partition = reminder_partition(spot_id)
        due_text = repr(float(due))
        mesh = await self._mesh_of(what, fence)
        reply = await self._hinted(
            what, "set_reminder", self._write_keys(spot_id),
            [*_fence_args(fence), repr(float(now)), name, due_text,
             "" if period is None else repr(float(period)), partition],
            spot_id=spot_id, reminder=name, partition=partition, mesh=mesh, score=due_text)
        set_refusal(reply, what, fence)
        return decode_reminder(spot_id, name, reply_parts(reply, 2, what)[1])

    async def cancel_reminder(self, fence: AuthorityFence, name: str, *,
                              now: float) -> bool:
        """CancelReminder (one script); see ``ReminderSteps.cancel_reminder``."""
        check_cancel_args(fence, name, now)
        spot_id = fence.spot_id
        what = f"cancel_reminder {name!r} of {spot_id!r}"
        reply = _seq(await self._run.script(
            what, "cancel_reminder", [self._keys.spot(spot_id), self._keys.reminders(spot_id)],
            [*_fence_args(fence), repr(float(now)), name, reminder_partition(spot_id)]))
        raise_writer(reply, what, fence)
        return bool(reply_count(reply, what))

    async def reminders(self, spot_id: str) -> tuple[StoredReminder, ...]:
        """Reminders (one ``HGETALL``); see ``ReminderSteps.reminders``."""
        validate_spot_id(spot_id)
        flat = await self._run.command(f"reminders of {spot_id!r}",
                                       ["HGETALL", self._keys.reminders(spot_id)])
        if not isinstance(flat, list) or len(flat) % 2:
            raise Unavailable(f"reminders of {spot_id!r}: Redis answered {flat!r} to HGETALL")
        found = [decode_reminder(spot_id, text(flat[i]), flat[i + 1])
                 for i in range(0, len(flat), 2)]
        return tuple(sorted(found, key=lambda r: r.name))

    async def take_due_reminders(self, mesh: str, partitions: Sequence[int],
                                 taker: OwnerFence, *, now: float, hold: float,
                                 limit: int) -> list[StoredReminder]:
        """TakeDueReminders (one script); see ``ReminderSteps.take_due_reminders``."""
        wanted = check_take_args(mesh, partitions, taker, now, hold, limit)
        what = (f"take_due_reminders of mesh {mesh!r} by node {taker.node_rid} lifecycle "
                f"{taker.lifecycle_generation}")
        reply = _seq(await self._run.script(
            what, "take_reminders", [self._keys.reminder_index(mesh, p) for p in wanted],
            [mesh, str(taker.node_rid), taker.lifecycle_generation, repr(float(now)),
             repr(float(now) + float(hold)), limit]))
        raise_status(reply, what)
        taken = []
        for entry in reply[1:]:
            if not isinstance(entry, list) or len(entry) != 3:
                raise Unavailable(f"{what}: the script answered the entry {entry!r}; check "
                                  "that every process runs the same zlink_trio")
            spot_id, name, raw = entry
            taken.append(decode_reminder(text(spot_id), text(name), raw))
        return taken

    async def reminder_done(self, taken: StoredReminder, *, now: float) -> bool:
        """ReminderDone (one script); see ``ReminderSteps.reminder_done``."""
        check_done_args(taken, now)
        assert taken.taker is not None
        spot_id, name = taken.spot_id, taken.name
        what = f"reminder_done {name!r} of {spot_id!r}"
        partition = reminder_partition(spot_id)
        score = (None if taken.period is None
                 else repr(next_due(taken.due, taken.period, now)))
        reply = await self._hinted(
            what, "reminder_done", self._done_keys(spot_id),
            [spot_id, name, taken.version, repr(taken.due), str(taken.taker.node_rid),
             taken.taker.lifecycle_generation, repr(float(now)), partition,
             repr(float(taken.taken_until))],
            spot_id=spot_id, reminder=name, partition=partition, mesh=taken.mesh,
            score=score)
        raise_status(reply, what)
        return bool(reply_count(reply, what))

    async def drop_reminders(self, spot_id: str) -> int:
        """DropReminders (one script); see ``ReminderSteps.drop_reminders``."""
        validate_spot_id(spot_id)
        what = f"drop_reminders of {spot_id!r}"
        reply = _seq(await self._run.script(
            what, "drop_reminders", [self._keys.spot(spot_id), self._keys.reminders(spot_id)],
            [spot_id, reminder_partition(spot_id)]))
        raise_status(reply, what)
        return reply_count(reply, what)

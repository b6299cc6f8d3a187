"""SpotWide moves on Redis Cluster: the Spot's record decides, its carried members follow.

Theory of operation
-------------------
On one Redis a SpotWide move steps the Spot's record and its carried members' records
in one script (``store.rules.relocation_steps``). On a cluster the members' records
live in other buckets than the Spot's, so each step is split, the Spot's record first:

- **BeginRelocation** checks the Spot's member marks as BeginClose does
  (``membership``), accepting each mark whose Actor names the Spot, and writes the move
  with its **group** -- the accepted Actor IDs -- on the Spot's record (``grp``), with
  one pending unit per member. Then each member **follows** in its own bucket
  (``carry_follow``, ``lua``): it must be a Ready member of the Spot at the source, in
  no move of its own and served by the target, and it stores the move's identity, the
  Spot's ObjectGeneration and owner generation (``cgen``, ``cog``). A member that
  refuses ends the whole move (the Spot's AbortRelocation and every member's follow of
  it), and BeginRelocation raises the refusal the rules raise (:class:`Unavailable`).
- **Every later step** (Seal, AcceptRelayReady, CommitRelocation, AbortRelocation,
  ReleaseRelayReady) is the Spot's script -- the decision, every unit of the group
  shifted there -- then each member's follow of it. A follow walks the chart from where
  the member stands, so a retried step makes up a follow that failed halfway.
- Once every member followed a commit or an abort, ``group_done`` drops the group from
  the Spot's record. A Spot whose record still holds a group begins no other move
  (``GROUP``): its group is resolved first.

A carried member is frozen: its own steps are refused (``is_carried``), a join, leave
or close needs its Ready record, and no Actor joins a Spot that moves.

**Resolution.** A crash or a store failure between the parts leaves members behind
their Spot; the move's outcome can always be read from the Spot's record (the member
names the Spot and the move's generations):

- the Spot's record is gone, or holds another ObjectGeneration: the move ended with its
  Spot -- ReleaseRelayReady, or a commit or abort whose owner then died and whose
  records were released -- and the member ends too (its owner, the source or the target,
  is dead);
- its owner generation is past the move's: the move committed (only a commit raises
  it), and the member moves to the target with its own owner generation + 1;
- the Spot still moves toward the member's target with its group: the move is in
  flight, and the member is left alone;
- otherwise the move aborted, and the member is Ready at the source again.

Whoever meets a carried member left behind resolves it (:meth:`ClusterCarry.resolve`):
``find`` and ``dead_owned`` of the cluster store, and a BeginRelocation that meets a
group. Why this is sound: each step's decision is made once, in the Spot's record; a
member's state is a function of it; and every follow is idempotent, because a member is
the move's only while it is carried with the move's generations, which no other move of
that Spot shares (it begins no other move while a group is left). The commit's follows
run after the Spot's record is Ready at the target, so no member's record names the
target before the Spot's commit. Capacity: the Spot's scripts shift every unit of the
group (ReleaseRelayReady gives back the members' units at the source), a follow shifts
none, so a member ended by resolution leaves its unit with a dead lifecycle -- one too
many, never too few (docs/stores.md, "Redis Cluster", says how cleanup bounds it).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from zlink_trio.core.errors import Unavailable
from zlink_trio.core.records import MOVING_STATES, AuthorityState
from zlink_trio.store.redis.codec import decode_record, raise_status, text
from zlink_trio.store.redis_cluster.sweep import gather
from zlink_trio.store.rules.relocation_steps import member_refusal

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from zlink_trio.core.records import AuthorityRecord, OwnerFence
    from zlink_trio.store.redis_cluster.keys import ClusterKeys
    from zlink_trio.store.redis_cluster.runner import ClusterRunner

__all__ = ("FOLLOWS", "ClusterCarry", "Move", "group_of")

LOGGER = logging.getLogger("zlink_trio.store")

#: The Spot's relocation scripts whose step its carried members follow, and the step.
FOLLOWS: Final = {"seal_relocation": "sealing", "accept_relay_ready": "relay",
                  "commit_relocation": "commit", "abort_relocation": "abort",
                  "release_relay_ready": "releasing"}

_MOVING: Final = frozenset(s.value for s in MOVING_STATES)


def _fields(flat: Sequence[Any] | None) -> dict[str, str]:
    items = [text(v) for v in flat or ()]
    return dict(zip(items[0::2], items[1::2], strict=True))


def group_of(flat: Sequence[Any]) -> list[str]:
    """The Actor IDs of the group a Spot's record (an ``HGETALL`` reply) holds."""
    raw = _fields(flat).get("grp")
    return [str(i) for i in json.loads(raw)] if raw else []


@attrs.frozen
class Move:
    """A SpotWide move's identity, as its carried members store it."""

    spot_id: str
    object_generation: int
    #: The Spot's owner generation when the move began.
    owner_generation: int

    @classmethod
    def of(cls, record: AuthorityRecord, *, committed: bool = False) -> Move:
        """The move of the Spot's ``record`` (``committed``: the record after its commit)."""
        return cls(record.spot_id, record.object_generation,
                   record.owner_generation - (1 if committed else 0))


class ClusterCarry:
    """The split steps of SpotWide moves on one cluster store (the module docstring)."""

    def __init__(self, runner: ClusterRunner, keys: ClusterKeys) -> None:
        self._run = runner
        self._keys = keys

    async def _follow(self, step: str, move: Move, ids: Sequence[str],
                      *extra: str | int) -> list[Sequence[Any]]:
        """Each of ``ids`` follows ``step`` of ``move`` in its bucket (shielded from the
        caller's cancellation, each script bounded by the store timeout)."""
        what = f"the {step} of Spot {move.spot_id!r}'s carried members"

        def one(actor_id: str) -> Callable[[], Awaitable[Any]]:
            return lambda: self._run.script(
                what, "carry_follow", [self._keys.spot(actor_id)],
                [step, move.spot_id, move.object_generation, move.owner_generation, *extra])

        with trio.CancelScope(shield=True):
            replies = await gather([one(i) for i in ids])
        return replies

    async def begin(self, record: AuthorityRecord, ids: Sequence[str], *,
                    target: OwnerFence,
                    abort: Callable[[], Awaitable[object]]) -> None:
        """The members' part of BeginRelocation of the Spot's ``record`` (Relocating, its
        group ``ids``): each follows; on a refusal ``abort`` ends the move and the refusal
        is raised."""
        owner = record.owner
        try:
            replies = await self._follow(
                "begin", Move.of(record), ids, str(owner.node_rid), owner.lifecycle_generation,
                str(target.node_rid), target.lifecycle_generation)
            refusal = next((r for r in replies if text(r[0]) != "OK"), None)
        except BaseException:
            with trio.CancelScope(shield=True):
                await abort()
            raise
        if refusal is None:
            return
        with trio.CancelScope(shield=True):
            await abort()
        what = f"begin_relocation of {record.spot_id!r}"
        if text(refusal[0]) == "MEMBER":
            member = decode_record(refusal[1]) if refusal[1] else None
            why = None if member is None else member_refusal(record.spot_id, member, owner)
            raise why or Unavailable(
                f"{record.spot_id!r} moves with its members, and one of them changed while "
                "the move began (it left, or ended); retry")
        raise_status(refusal, what)

    async def stepped(self, name: str, flat: Sequence[Any], record: AuthorityRecord) -> None:
        """After the Spot's script ``name`` answered ``flat`` (its record): the group
        follows. A seal a member cannot follow raises (the move is not sealed whole);
        after a decision (a relay-ready, a commit, an abort, a release) a follow that
        fails is logged and left to resolution (the decision stands)."""
        step = FOLLOWS.get(name)
        ids = group_of(flat) if step is not None else []
        if step is None or not ids:
            return
        move = Move.of(record, committed=step == "commit")
        if step == "sealing":
            for reply in await self._follow(step, move, ids):
                if text(reply[0]) == "MEMBER":
                    raise Unavailable(f"{record.spot_id!r} was sealed, but a member it "
                                      "carries no longer moves with it; abort the move")
                raise_status(reply, f"seal_relocation of {record.spot_id!r}")
            return
        try:
            replies = await self._follow(step, move, ids)
        except Exception as exc:  # the decision stands: whoever reads a member resolves it
            LOGGER.warning("the %s of Spot %r is made, but its members did not all follow "
                           "(%s); whoever reads one resolves it", step, record.spot_id, exc)
            return
        failed = [i for i, r in zip(ids, replies, strict=True) if text(r[0]) != "OK"]
        if failed:
            LOGGER.warning("the %s of Spot %r is made, but members %s refused to follow; "
                           "whoever reads one resolves it", step, record.spot_id, failed)
        elif step in ("commit", "abort"):
            await self.done(record)

    async def done(self, record: AuthorityRecord) -> None:
        """``group_done``: the Spot's record of ``record``'s generations drops its group."""
        with trio.CancelScope(shield=True):
            reply = await self._run.script(
                f"group_done of {record.spot_id!r}", "group_done",
                [self._keys.spot(record.spot_id)],
                [record.object_generation, record.owner_generation])
        raise_status(reply, f"group_done of {record.spot_id!r}")

    async def settle(self, flat: Sequence[Any]) -> None:
        """A Spot's record ``flat`` holds the group of a move that ended: resolve every
        member, then drop the group."""
        ids = group_of(flat)
        await gather([self._resolver(i) for i in ids])
        await self.done(decode_record(flat))

    def _resolver(self, actor_id: str) -> Callable[[], Awaitable[bool]]:
        return lambda: self.resolve(actor_id)

    async def resolve(self, actor_id: str) -> bool:
        """Bring the carried member ``actor_id`` to its move's outcome, read from its
        Spot's record (the module docstring); whether it wrote."""
        what = f"the resolution of carried member {actor_id!r}"
        m = _fields(await self._run.command(what, ["HGETALL", self._keys.spot(actor_id)]))
        if "cgen" not in m or m.get("state") not in _MOVING:
            return False
        spot_id, cgen, cog = m["container"], m["cgen"], m["cog"]
        s = _fields(await self._run.command(what, ["HGETALL", self._keys.spot(spot_id)]))
        if not s or s["gen"] != cgen:
            step = "releasing"
        elif int(s["ogen"]) > int(cog):
            step = "commit"
        elif (s.get("grp") and s["state"] != AuthorityState.READY.value
              and s.get("trid") == m.get("trid") and s.get("tlc") == m.get("tlc")):
            return False  # in flight: the Spot's steps move it
        else:
            step = "abort"
        reply = (await self._follow(step, Move(spot_id, int(cgen), int(cog)), [actor_id]))[0]
        raise_status(reply, what)
        return bool(int(reply[1]))

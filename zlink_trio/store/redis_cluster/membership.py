"""Actor membership on Redis Cluster: the container's marks and the Actor's record, split.

Theory of operation
-------------------
An Actor's record names its container (docs/actors.md), and BeginClose of the container
must refuse while any record does (``MembersRemain``). On one Redis a script writes the
record and the container's members set together (``store.redis``); on a cluster the
Actor's record and its container's record live in different buckets, so no script
sees both. The container's bucket keeps **member marks** instead, ``<token>:<actor_id>``
(``keys``), and the protocol keeps one invariant:

    **every Actor record that names a container -- as its container, or as its next
    container while it moves to another node -- has a mark in that container's bucket,
    carrying the token the record stores for it** (its ``mt`` field; ``nmt`` for the
    next container).

Marks may be more than the truth (a part that never ran leaves a stale one), never
less. Each transaction is split in ordered parts, each one script in one bucket:

(a) **Reserve of an Actor** -- first the mark, in the container's bucket, in one
    script with the container check (``member_mark``: the Ready record of an Entry or
    User Spot of the same owner, ``check_container``); it issues a fresh token (unique
    store-wide: the bucket's tag and counter). Then the Reserve in the Actor's bucket,
    which writes the token with the record; it is given the container's verdict as a
    fact and makes every check in the oracle's order (an Actor ID that exists, the
    owner's claim, then the verdict: a refused container raises its refusal there).
    Only when that Reserve **answers** a refusal is the mark removed again; when its
    outcome is unknown (a timeout, a cancelled caller) the mark stays.
(b) **MoveMembership** marks the new container first (the same ``member_mark``), then
    changes the record in the Actor's bucket (the oracle's checks; the new token),
    then drops the old container's mark. A refused or no-op move removes the new mark.
(c) **Deleting an Actor's record** (AbortCreating, Release, ReleaseExpired,
    ReleaseRelayReady) deletes it in its bucket, then drops its marks -- in its
    container and, while it moves, its next container (the bucket script hands the
    marks back, the runner removes them: ``runner``).
(d) **BeginClose** of a container with marks checks each mark against its Actor's
    bucket (``member_verify``): a record that names the container (as container or
    next container) is a member; for any other mark the check **bans its token in the
    Actor's bucket** in the same script, so no join still in flight with that token
    can write a record any more (its Reserve or move answers ``JOIN_REVOKED``,
    :class:`Unavailable`). Then the BeginClose script drops the marks found gone
    (exactly those, each once banned) and decides: marks left are members
    (``MembersRemain``), none is Closing. A mark that appeared meanwhile is checked in
    the next round (a few rounds, then the close is refused as if it were a member).
    **BeginRelocation of a Spot** checks its marks the same way (:meth:`settle`): a Spot
    does not move with members (the oracle's :class:`InvalidOperation`), and it becomes
    Relocating in the script that found no mark left -- unless its members stay
    (``members_stay``, a PerActor Spot): then its marks are not checked and stay as they
    are (the Spot's ID, and so its bucket, does not change) -- or are carried
    (``carry_members``, a SpotWide Spot): then each mark checked as a member must be one
    a move can carry, and the script takes the marks so checked as the move's group
    (``carry``); a mark it has not seen checked is checked in the next round.
(e) **An Actor's move to another node** (BeginRelocation naming its container at the
    target) marks the **next** container first -- ``member_mark`` with the *target* as
    the owner, so the mark script makes the oracle's ``check_container(container,
    target)`` -- then begins the move in the Actor's bucket: every check of the
    oracle's in its order, the verdict where ``check_container`` stands (last), a banned
    token refused as a join's (``JOIN_REVOKED``); the record stores the next container
    and the token (``nc``, ``nmt``): a member of both. CommitRelocation makes the next
    container the container in the Actor's bucket (``nmt`` becomes ``mt``: the mark
    already there is its mark now) and hands back the old container's mark;
    AbortRelocation hands back the next container's; a deletion both (c). A refused or
    idempotent BeginRelocation removes the mark it added. A member following its
    PerActor Spot moves into the container it has (``nc`` = ``container``): it adds a
    mark there like any move, so its record holds two marks in one container (``mt``,
    ``nmt``) until the move ends, and the end hands back the one whose field no longer
    names it -- commit the old ``mt``, abort the ``nmt`` -- leaving exactly the mark the
    record stores (``leave``'s ``stays``: one Redis keeps the Actor a member).

Why this is sound: a record comes to name a container only by a join (Reserve,
MoveMembership, BeginRelocation), with a token whose mark it added first and which is
not banned -- a commit only turns the next container the record already names, with
its token, into its container. A mark is removed only (1) by its own join after that
join was refused, (2) after its record was deleted or stopped naming the container
(moved away, committed or aborted; tokens are never reused, so no other record carries
it), or (3) by a BeginClose or a Spot's BeginRelocation after its token was banned
while no record named the container. So at the moment BeginClose finds no mark left, no
record names the container, as container or as next container, and none can be written
later: a new join needs a new mark, and the container's bucket refuses that once it is
Closing (or Relocating: so a Spot never moves away from a member either). A crash
between parts leaves only stale marks (never a record without its mark), which the next
BeginClose (or the Spot's BeginRelocation) drops. A ban outlives only a join that
crashed or lost a race with a close; it is a few bytes in the Actor's bucket, and the
join that meets it removes it.

``members`` reads the marks, then each marked Actor's record, and lists the records
that name the container, as container or next container (a read: it drops nothing, so
it never refuses a join in flight). Like the other reads over buckets it is no snapshot
across buckets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs

from zlink_trio.core._checks import check_finite, check_generation
from zlink_trio.core.identity import validate_spot_id
from zlink_trio.store.redis.codec import decode_record, raise_status, text
from zlink_trio.store.redis_cluster.sweep import gather
from zlink_trio.store.rules.relocation_steps import member_refusal

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from zlink_trio.core.records import AuthorityRecord, OwnerFence
    from zlink_trio.store.redis_cluster.keys import ClusterKeys
    from zlink_trio.store.redis_cluster.runner import ClusterRunner

__all__ = ("ClusterMembership", "Mark", "actor_of")

#: Rounds of mark checks one BeginClose (or a Spot's BeginRelocation) makes before it
#: refuses (marks kept appearing).
CLOSE_ROUNDS: Final = 4


def actor_of(mark: str) -> str:
    """The Actor ID of a mark ``<token>:<actor_id>`` (a token has no ``:``)."""
    return mark.partition(":")[2]


@attrs.frozen
class Mark:
    """Part (a)'s answer: the token of the mark it added, or the container's refusal."""

    container: str
    actor_id: str
    #: The mark's token; ``""`` when the container refused (nothing was added).
    token: str
    #: The container's refusal reply (``CONTAINER``), empty when a mark was added.
    refusal: Sequence[Any] = ()

    @property
    def member(self) -> str:
        """The mark as stored in the container's set."""
        return f"{self.token}:{self.actor_id}"


class ClusterMembership:
    """The parts of the membership protocol (the module docstring) on one cluster store."""

    def __init__(self, runner: ClusterRunner, keys: ClusterKeys) -> None:
        self._run = runner
        self._keys = keys

    # -- the parts ---------------------------------------------------------------------

    async def mark(self, what: str, container: str, actor_id: str,
                   owner: OwnerFence) -> Mark:
        """Part (a) / (b) / (e): check ``container`` for ``owner`` (a move's: the target)
        and add a mark for ``actor_id`` (its bucket, one script); the refusal is
        returned, not raised."""
        keys = self._keys
        reply: Sequence[Any] = await self._run.script(
            what, "member_mark", [keys.spot(container), keys.members(container),
                                  keys.tokens(container)],
            [container, actor_id, str(owner.node_rid), owner.lifecycle_generation])
        if text(reply[0]) == "OK":
            return Mark(container, actor_id, text(reply[1]))
        if text(reply[0]) != "CONTAINER":
            raise_status(reply, what)
        return Mark(container, actor_id, "", reply)

    async def undo(self, mark: Mark) -> None:
        """Remove ``mark`` after its join was refused (shielded, bounded, best effort: a
        mark that stays is stale, and the next BeginClose drops it)."""
        if mark.token:
            await self._run.drop_marks([(mark.container, mark.member)])

    async def conclude(self, mark: Mark, reply: Sequence[Any], what: str, *,
                       used: bool) -> None:
        """After the Actor's part answered ``reply``: remove the mark unless the record
        now carries its token (``used``); when the container refused the join, raise
        that refusal (the Actor's part reached the container check: ``JOIN_REFUSED``)."""
        if not used:
            await self.undo(mark)
        if text(reply[0]) == "JOIN_REFUSED":
            raise_status(mark.refusal, what)

    async def verify(self, what: str, container: str, member: str) -> Sequence[Any] | None:
        """Part (d): the record of the Actor of mark ``member`` when it names ``container``
        (as container or next container); when not, ``None``, and its token is banned in
        the Actor's bucket (one script there)."""
        token, _, actor_id = member.partition(":")
        reply: Sequence[Any] = await self._run.script(
            what, "member_verify", [self._keys.spot(actor_id), self._keys.bans(actor_id)],
            [container, token])
        raise_status(reply, what)
        return reply[2] if int(reply[1]) else None

    # -- the transactions --------------------------------------------------------------

    async def begin_close(self, spot_id: str, *, object_generation: int, owner: OwnerFence,
                          now: float, expected_owner_generation: int | None = None,
                          expected_store_version: int | None = None
                          ) -> AuthorityRecord | None:
        """BeginClose with part (d); see ``LocationStore.begin_close``."""
        validate_spot_id(spot_id)
        check_generation(object_generation, "object_generation")
        check_finite(now, "now")
        what = f"begin_close of {spot_id!r}"
        reply = await self.settle(
            what, "begin_close", spot_id, [self._keys.spot(spot_id),
                                           self._keys.members(spot_id)],
            [object_generation, str(owner.node_rid), owner.lifecycle_generation,
             repr(float(now)),
             "" if expected_owner_generation is None else str(expected_owner_generation),
             "" if expected_store_version is None else str(expected_store_version)])
        if text(reply[0]) == "NONE":
            return None
        raise_status(reply, what)
        return decode_record(reply[1])

    async def settle(self, what: str, name: str, spot_id: str, keys: Sequence[str],
                     args: Sequence[str | int], *,
                     carry: OwnerFence | None = None) -> Sequence[Any]:
        """Run bucket script ``name`` on ``spot_id``, whose members check answers the
        marks it finds (``MARKS``), until no mark is left unchecked: part (d) between
        the rounds (the marks checked gone are dropped by the next round's script, after
        ``args``; when the Spot owned by ``carry`` moves with its members, each member
        checked must be one a move can carry (``member_refusal`` is raised before the
        next round), and its mark follows, ``+``-prefixed, for the script to take it into
        its group: ``carry``)
        The script's last reply; when marks are left, ``{'MEMBERS', record, Actors
        marked}`` as one Redis answers (BeginClose, BeginRelocation of a Spot)."""
        members: set[str] = set()  # marks checked: their Actors name the Spot
        drop: list[str] = []  # marks checked gone (their tokens banned)
        marks: list[str] = []
        reply: Sequence[Any] = ()
        for _ in range(CLOSE_ROUNDS):
            accepted = [] if carry is None else [f"+{m}" for m in sorted(members)]
            reply = await self._run.script(what, name, keys, [*args, *drop, *accepted])
            if text(reply[0]) != "MARKS":
                return reply
            marks = [text(m) for m in reply[2]]
            unchecked = [m for m in marks if m not in members]
            if not unchecked:
                break
            found = await gather([self._verifier(what, spot_id, m) for m in unchecked])
            drop = [m for m, flat in zip(unchecked, found, strict=True) if flat is None]
            checked = [(m, flat) for m, flat in zip(unchecked, found, strict=True) if flat]
            refusals = [] if carry is None else [
                member_refusal(spot_id, decode_record(flat), carry) for _, flat in checked]
            for refusal in refusals:
                if refusal is not None:
                    raise refusal
            members.update(m for m, _ in checked)
        return ["MEMBERS", reply[1], len({actor_of(m) for m in marks})]

    def _verifier(self, what: str, container: str,
                  member: str) -> Callable[[], Awaitable[Sequence[Any] | None]]:
        return lambda: self.verify(what, container, member)

    async def members(self, container: str) -> list[AuthorityRecord]:
        """The records of the marked Actors that name ``container``; see the protocol."""
        validate_spot_id(container)
        what = f"members of {container!r}"
        marks = await self._run.command(what, ["SMEMBERS", self._keys.members(container)])
        ids = sorted({actor_of(text(m)) for m in marks or []})

        def read(actor_id: str) -> Callable[[], Awaitable[Any]]:
            return lambda: self._run.command(what, ["HGETALL", self._keys.spot(actor_id)])

        flats = await gather([read(i) for i in ids])
        found = (decode_record(flat) for flat in flats if flat)
        return sorted((r for r in found if container in (r.container, r.next_container)),
                      key=lambda r: r.spot_id)

"""The relocation steps of the Location Store protocol: one planned move (docs/relocation.md).

Theory of operation
-------------------
A planned move of a Ready Spot from its owner (the *source*) to another node of
the same Mesh (the *target*) is five store transactions, each one atomic and
checking everything before its first write, like every Location Store method::

    READY --begin_relocation--> RELOCATING --seal_relocation--> SEALED
      ^                              |                            |
      +-------abort_relocation-------+----------------------------+
                                                                  |
                                                        accept_relay_ready
                                                                  v
    READY at the target <-------commit_relocation------------ RELAY_READY

- ``begin_relocation`` (the source) names the target and reserves one pending
  capacity unit on it; the source keeps serving (the unit waits for a permit).
- ``seal_relocation`` (the source) records that admission stopped: ingress on
  the source route goes to the relocation hold.
- ``accept_relay_ready`` (the *target*, once it can take the relayed ingress)
  is the point of no return: from here the source is never restored, so
  ``abort_relocation`` refuses the record with
  :class:`InvalidOperation`, and only ``commit_relocation`` ends the move.
- ``commit_relocation`` (the target) makes the target the owner, one owner
  generation higher; its pending unit becomes active and the source's active
  unit is released.
- ``abort_relocation`` (either side, before relay-ready) returns the record to
  Ready at the source and releases the target's pending unit.
- ``record_relocation_payload`` (the source, Sealed) names the receipt of the
  move's payload root on the record *before* the root is written, so a move that
  dies after its capture leaves no root nobody can find: whoever ends the move
  deletes it. Commit and abort clear the receipt.
- ``release_relay_ready`` (restart recovery of the target's NodeId, or an
  operator) ends a RelayReady move whose target's lifecycle is over: the record
  is deleted (the incarnation ends) and both capacity units are returned. The
  move is not resumed by the target's next lifecycle (no move resumes
  automatically) and the source is not restored.

Until the commit the record stays owned by the source, so every step takes the
:class:`AuthorityFence` of the Ready record the move began from (the source's
fence; the target learns it with the move). A record moving in any of the three
states keeps ``relocation_target``, counts active at the source and pending at
the target, refuses BeginClose (:class:`Unavailable`) and a second
BeginRelocation (:class:`StaleFence`), and is returned by ``find`` and
``query`` like any other. The oracle is ``store.rules.relocation_steps``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from zlink_trio.core.records import AuthorityFence, AuthorityRecord, OwnerFence, RootReceipt

__all__ = ("RelocationSteps",)


class RelocationSteps(Protocol):
    """The transactions of a planned move; part of every ``LocationStore``."""

    async def begin_relocation(self, fence: AuthorityFence, *, target: OwnerFence,
                               now: float, container: str | None = None,
                               members_stay: bool = False,
                               carry_members: bool = False) -> AuthorityRecord:
        """BeginRelocation: Ready -> Relocating toward ``target`` (same Mesh); the source's call.

        Checks, in order (nothing written on any refusal): ``now`` is finite and
        ``target`` an :class:`OwnerFence` (:class:`InvalidOperation`); a record
        already Relocating toward ``target`` (and ``container``) under the fence is
        returned unchanged (idempotent); the record matches the fence and is Ready
        (:class:`StaleFence`, gone included); it is not an Entry claim, a
        ``container`` is named exactly for an Actor, at most one of ``members_stay`` and
        ``carry_members``, the record has no Actor members unless one of them is set
        (``members_stay``: a PerActor Spot, whose members follow it one by one;
        ``carry_members``: a SpotWide Spot, whose members move with it -- each must be a
        Ready Actor of the same owner in no move of its own, else :class:`Unavailable`)
        and ``target`` is another node (:class:`InvalidOperation`); the source's and then
        the target's claim are those lifecycles (:class:`StaleFence`) with live leases at ``now``
        (:class:`Unavailable`); the target serves the type as that kind, and each carried
        member's type as an Actor (:class:`InvalidOperation`); the target has room for
        the record and its carried members (:class:`CapacityExceeded`);
        for an Actor, ``container`` is a Ready Entry or User Spot the target owns
        (``store.rules.location.check_container``). Then the record names the target
        (and an Actor's its ``next_container``, of which it is a member too until the
        move ends: commit makes it the container, abort drops it), one pending unit is
        reserved on it, StoreVersion + 1. Each carried member's record steps likewise, in
        the same transaction, and so it does at every later step of this move (seal,
        relay-ready, commit -- each member's owner generation + 1 --, abort, release):
        the Spot's steps are its only steps (``store.rules.relocation_steps``); its own
        fence is refused with :class:`InvalidOperation` while it is carried. Redis Cluster
        keeps a Spot's members in other buckets than its record and refuses
        ``carry_members`` for a Spot with members (docs/decisions.md).
        """

    async def seal_relocation(self, fence: AuthorityFence, *, now: float) -> AuthorityRecord:
        """Seal: Relocating -> Sealed; the source's call.

        Checks, in order: ``now`` is finite (:class:`InvalidOperation`); the
        record matches the fence and is Relocating or Sealed
        (:class:`StaleFence`; a RelayReady record too); already Sealed is
        returned unchanged (idempotent); the source's claim is that lifecycle
        (:class:`StaleFence`) with a live lease (:class:`Unavailable`).
        StoreVersion + 1; capacity does not change.
        """

    async def accept_relay_ready(self, fence: AuthorityFence, *, target: OwnerFence,
                                 now: float) -> AuthorityRecord:
        """AcceptRelayReady: Sealed -> RelayReady, the point of no return; the target's call.

        ``fence`` is the source's fence (the record is still the source's);
        ``target`` is the calling target's own :class:`OwnerFence`, which must
        be the one the move names. Checks, in order (nothing written on any
        refusal): ``now`` is finite and ``target`` an :class:`OwnerFence`
        (:class:`InvalidOperation`); a record already RelayReady toward
        ``target`` under the fence is returned unchanged (idempotent, even once
        a lease expired); the record matches the fence (ObjectGeneration, owner
        generation, owner = the source) and is Sealed -- Relocating, Ready,
        Closing, gone or another incarnation is :class:`StaleFence` -- with
        ``relocation_target == target`` (:class:`StaleFence` for any other
        node or lifecycle); the target's claim is that lifecycle
        (:class:`StaleFence`) with a live lease at ``now``
        (:class:`Unavailable`). Then the record is RelayReady, StoreVersion +
        1; owner, generations, ``relocation_target`` and capacity (active at
        the source, pending at the target) are kept. From here the move cannot
        be aborted: only :meth:`commit_relocation` ends it.
        """

    async def commit_relocation(self, fence: AuthorityFence, *, now: float) -> AuthorityRecord:
        """CommitRelocation: RelayReady -> Ready at the target, owner generation + 1.

        Checks, in order: ``now`` is finite (:class:`InvalidOperation`); the
        record matches the fence and is RelayReady (:class:`StaleFence`:
        Sealed must first pass :meth:`accept_relay_ready`; a retry after a
        successful commit meets the new owner generation and is refused, having
        written nothing); the target's claim is still that lifecycle
        (:class:`StaleFence`) with a live lease (:class:`Unavailable`). Then the
        owner is the target, the owner generation and StoreVersion grow by one,
        ``relocation_target`` is cleared, and the target's pending unit becomes
        active while the source's active unit is released.
        """

    async def abort_relocation(self, fence: AuthorityFence) -> AuthorityRecord:
        """AbortRelocation: Relocating or Sealed -> Ready at the source.

        Checks, in order: a record that matches the fence but is RelayReady is
        :class:`InvalidOperation` (past relay-ready the source is never
        restored: finish the move with :meth:`commit_relocation`);
        the record matches the fence and is Relocating or Sealed
        (:class:`StaleFence`, gone included). No lease is needed. Then the
        record is Ready at the source without a target, StoreVersion + 1, and
        the target's pending unit is released.
        """

    async def record_relocation_payload(self, fence: AuthorityFence, *, payload: RootReceipt,
                                        now: float) -> AuthorityRecord:
        """RecordRelocationPayload: name the move's payload root on the Sealed record.

        The source's call, after its capture and *before* it writes the root (the
        receipt is the content address of the bytes), so a process that dies
        after the capture leaves a root the record names. Checks, in order
        (nothing written on any refusal): ``now`` is finite and ``payload`` a
        :class:`RootReceipt` (:class:`InvalidOperation`); the record matches the
        fence and is Sealed (:class:`StaleFence`, gone included); a record that
        already names ``payload`` is returned unchanged (idempotent); the
        source's claim is that lifecycle (:class:`StaleFence`) with a live lease
        (:class:`Unavailable`). Then ``relocation_payload`` is ``payload``,
        StoreVersion + 1. AcceptRelayReady keeps it; CommitRelocation and
        AbortRelocation clear it (the root's deletion is the caller's).
        """

    async def release_relay_ready(self, fence: AuthorityFence, *, target: OwnerFence,
                                  now: float) -> AuthorityRecord | None:
        """ReleaseRelayReady: RelayReady -> Missing once the move's target is dead.

        Past relay-ready the source is never restored and a move is
        never resumed by another process; when the target's lifecycle
        ended before it committed, this ends the incarnation instead. Taken by
        restart recovery of the target's NodeId (``store.dead_lifecycle``) or an
        operator, never by another node on its own. ``fence`` is the source's
        fence (the record is the source's until a commit), ``target`` the move's
        target as the record names it.

        Checks, in order (nothing written on any refusal): ``now`` is finite and
        ``target`` an :class:`OwnerFence` (:class:`InvalidOperation`); no record,
        or another ObjectGeneration, is ``None`` (idempotent: that incarnation
        is gone); the record matches the fence and is RelayReady
        (:class:`StaleFence`) toward ``target`` (:class:`StaleFence`); the
        target's lease is over at ``now``: no claim at ``(mesh, target
        node_rid)``, a claim of another lifecycle, or ``lease_expires_at <=
        now`` -- otherwise :class:`~zlink_trio.store.values.TargetAlive` (an
        InvalidOperation: a live target commits). Then the record is deleted,
        the source's active unit and the target's pending unit are released,
        and the record as it was just before is returned (its
        ``relocation_payload`` names the root to delete). The ID can be
        reserved again with a larger ObjectGeneration.
        """

"""Release what dead lifecycles of one NodeId still own: restart recovery and the operator.

Theory of operation
-------------------
A process that died (SIGKILL, power loss) leaves its records owned by a lifecycle whose
lease runs out. An expired owner may not act (docs/concepts.md, "Fences"), and *another*
node may not take the Spots over (a stalled owner looks exactly like a dead one), so
without help those IDs stay ``Unavailable`` for ever. :func:`release_dead_node` is the
help, used by two callers:

- ``open_node``, after its startup authority scan (docs/stores.md, "Crash recovery")
  resumed the incomplete activations: a node started under a NodeId releases everything
  the dead lifecycles of *that same* NodeId still own, before admission opens;
- ``zlink-trio release --node NODE_ID``, for a NodeId that will not come back
  (refused while the NodeId holds a live claim).

It pages :meth:`LocationStore.dead_owned` and ends each record with the ordinary
fenced transaction of its state -- nothing new is allowed to an expired owner:

=================  =====================================================================
state              transaction
=================  =====================================================================
Ready              ``release_expired`` (ObjectGeneration + owner generation fence; the
                   store re-checks that the owner's lease is over)
Closing            ``release`` with the Closing fence (the close had begun)
Relocating/Sealed  ``abort_relocation`` (the move had not reached relay-ready, so the
                   source is restored), then ``release_expired``
Creating           ``abort_creating`` with the record's own reservation fence
RelayReady         ``release_relay_ready``: a move whose target is a dead lifecycle of
                   that NodeId (``dead_owned`` lists those too) or whose source is one;
                   the store refuses it while the target's lease is live
                   (:class:`~zlink_trio.store.values.TargetAlive`: a live target
                   commits), so a move toward a live target is left to it
=================  =====================================================================

A RelayReady move is *released*, not resumed (docs/decisions.md, "A move whose target
died past relay-ready"): past relay-ready a move continues only on the target process
chosen for it, and a move whose target terminated is not resumed automatically; a
restarted target is another process (a new NodeRid and lifecycle), and stored intent
lets only the same node *and lifecycle* resume what it began. The source is never
restored, so the incarnation ends, like any Spot whose owner died: an Instance Spot
activates anew on its next call, a User Spot is Missing.

Then the durable inbox of the released incarnation and its roots (recovery pointer,
creation request, the payload root of a move that died after its capture) are
deleted, and :meth:`LocationStore.remove_dead_claims` deletes the dead claims that own
nothing any more, with their Entry claims. Every step is
fenced by the generations it read, so a zombie of the old lifecycle (a paused process
that wakes up) can never act on a record again -- its own steps need a live lease --
and a record that changed meanwhile is skipped, not overwritten. A record whose
release fails is reported in :attr:`DeadRelease.left` with the reason, and the rest
go on. Records are released :data:`RELEASES_IN_FLIGHT` at a time, so a store that
batches concurrent calls batches these.

The in-memory state of a released Spot died with its process: an Instance Spot's next
Instance-intent call activates a new incarnation (a larger ObjectGeneration); a User
Spot is Missing (``NotFound``) until it is created again (docs/decisions.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs
import trio

from zlink_trio.core.errors import ZLinkError
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import (
    MOVING_STATES,
    AuthorityRecord,
    AuthorityState,
    ReservationFence,
)
from zlink_trio.store.rules.relocation_steps import is_carried
from zlink_trio.store.values import TargetAlive

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.store.protocol import StorePair

__all__ = ("RELEASES_IN_FLIGHT", "DeadRelease", "release_dead_node", "reservation_fence")

_PAGE: Final = 1000
#: Records released at once (each its own fenced transaction).
RELEASES_IN_FLIGHT: Final = 64


def reservation_fence(record: AuthorityRecord) -> ReservationFence:
    """The reservation fence of a Creating record as it is stored now."""
    return ReservationFence(spot_id=record.spot_id, store_version=record.store_version,
                            object_generation=record.object_generation,
                            owner_generation=record.owner_generation, owner=record.owner,
                            owner_lease_expires_at=0.0)


@attrs.frozen
class DeadRelease:
    """What :func:`release_dead_node` did."""

    #: The records released, as they were read (state before the release).
    released: tuple[AuthorityRecord, ...]
    #: Records left owned by a dead lifecycle, each with why.
    left: tuple[tuple[AuthorityRecord, str], ...]
    #: Dead claims deleted (with their Entry claims).
    claims_removed: int


async def release_dead_node(store: StorePair, node_id: str, *,
                            now: Callable[[], float]) -> DeadRelease:
    """Release every record the expired lifecycles of ``node_id`` own; see the module doc.

    ``now`` reads the clock leases are stamped with. Store errors of one record are
    caught and reported in ``left``; an error of the listing itself propagates.
    """
    released: list[AuthorityRecord] = []
    left: list[tuple[AuthorityRecord, str]] = []
    after: str | None = None
    while True:
        page = await store.location.dead_owned(node_id, now=now(), after=after, limit=_PAGE)
        for record, why, ended in await _release_page(store, page, now):
            if why is None:
                released.extend(ended)
            else:
                left.append((record, why))
        if len(page) < _PAGE:
            break
        after = page[-1].spot_id
    removed = await store.location.remove_dead_claims(node_id, now=now())
    return DeadRelease(released=tuple(released), left=tuple(left), claims_removed=removed)


_Outcome = tuple[AuthorityRecord, str | None, tuple[AuthorityRecord, ...]]


async def _release_page(store: StorePair, page: list[AuthorityRecord],
                        now: Callable[[], float]) -> list[_Outcome]:
    """:func:`_release_one` for each record of ``page``, :data:`RELEASES_IN_FLIGHT` at a
    time (independent fenced transactions, so the stores batch them: one at a time, a
    restart that found 100,000 Spots of a dead lifecycle spent minutes here); the
    outcomes in ``page``'s order: each record, why it was left (``None``: released) and
    the records its release ended (a SpotWide move's carried members end with it)."""
    outcomes: list[_Outcome] = [(record, None, ()) for record in page]
    queue = iter(enumerate(page))  # shared: each releaser takes the next record

    async def releaser() -> None:
        for i, record in queue:
            try:
                ended = await _release_one(store, record, now)
            except ZLinkError as exc:
                outcomes[i] = (record, f"{type(exc).__name__}: {exc.message}", ())
            else:
                outcomes[i] = ((record, ended, ()) if isinstance(ended, str)
                               else (record, None, ended))

    async with trio.open_nursery() as nursery:
        for _ in range(min(RELEASES_IN_FLIGHT, len(page))):
            nursery.start_soon(releaser)
    return outcomes


async def _release_one(store: StorePair, record: AuthorityRecord,
                       now: Callable[[], float]) -> tuple[AuthorityRecord, ...] | str:
    """End ``record`` with its state's transaction: the records that ended, or why it
    was left.

    A member a SpotWide move carries takes only its Spot's steps (``is_carried``): it is
    skipped here and ends with its Spot -- RelayReady released together, a move not
    past relay-ready aborted together and then each released like any Ready record.
    """
    if is_carried(record):
        return ()
    location = store.location
    state = record.state
    carried: list[AuthorityRecord] = []
    if state in MOVING_STATES and record.kind is not SpotKind.ACTOR:
        carried = [m for m in await location.members(record.spot_id) if is_carried(m)]
    if state is AuthorityState.RELAY_READY:
        target = record.relocation_target
        assert target is not None
        try:
            # ``None``: that incarnation is gone already (a retry): the leftovers go too.
            await location.release_relay_ready(record.fence(), target=target, now=now())
        except TargetAlive:
            return (f"RelayReady toward the live target {target}: the move is past "
                    "relay-ready and its target commits it (commit_relocation)")
    elif state is AuthorityState.CREATING:
        await location.abort_creating(reservation_fence(record))
    elif state is AuthorityState.CLOSING:
        await location.release(record.fence())
    else:
        if state in (AuthorityState.RELOCATING, AuthorityState.SEALED):
            # Back at the source without the payload receipt: its root goes below.
            kept = await location.abort_relocation(record.fence())
            for back in (kept, *carried):  # (each member's owner generation is unchanged)
                await location.release_expired(back.spot_id,
                                               object_generation=back.object_generation,
                                               owner_generation=back.owner_generation,
                                               now=now())
        else:
            await location.release_expired(record.spot_id,
                                           object_generation=record.object_generation,
                                           owner_generation=record.owner_generation,
                                           now=now())
    for ended in (record, *carried):
        await _drop_leftovers(store, ended)
    return (record, *carried)


async def _drop_leftovers(store: StorePair, record: AuthorityRecord) -> None:
    """The released incarnation's inbox and roots: nobody can read them any more."""
    relocation = store.relocation
    await relocation.inbox_drop(record.spot_id, record.object_generation)
    for ref in (record.recovery_pointer, record.creation_intent):
        if ref is not None:
            await relocation.delete_root(ref.receipt())
    if record.relocation_payload is not None:
        await relocation.delete_root(record.relocation_payload)

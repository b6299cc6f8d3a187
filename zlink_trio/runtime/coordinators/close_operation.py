"""Closing one User Spot incarnation on this node, stepping ``CloseOperation``.

Theory of operation
-------------------
:func:`close_here` is the close both ``spots.close`` (:mod:`.close`) and the target
of a command 48 (:mod:`zlink_trio.runtime.coordinators.remote_close`) run.  It verifies
before it acts, in one read of the authority: gone -> ``False`` (idempotent, never
retargeted to a newer incarnation); another generation -> InvalidOperation; not a
User Spot (or, for ``actors.close``, an Actor) -> InvalidOperation (Instance Spots close
themselves with ``ctx.close()``); the target of a command 48 closes either, since the
source checked the kind and a generation names one incarnation of one kind;
owned by another live node -> that node closes it (command 48, whose command 20 is
the result; the owner also checks the owner generation and StoreVersion the
source read); owned by an earlier lifecycle of this node -> Unavailable.  Then BeginClose (the
Closing CAS with this lifecycle as the owner, shielded) and the local host seals
admission; its task finishes the turns accepted before the seal, runs ``on_close(CLOSED)``
and cancels timers once, releases with the Closing record's fence and leaves the catalog
and route cache in one continuation.  A second close of the same incarnation meets
Closing, merges with the first and returns ``True`` once that one released.

A User Spot with a current Actor member does not close: the Closing CAS itself refuses
(``MembersRemain``, checked in the same store transaction as the other fences, so a
member that joined after the read is seen too), the chart goes ``cas_conflict`` ->
``active_membership`` and the close ends ``False`` with admission and authority kept.
The framework never moves or destroys a member on its own (docs/actors.md).

Once the CAS succeeded the close runs to the end even if the caller's deadline passes
(the host task owns it); the caller alone then sees DeadlineExceeded.  If the node
loses its lease meanwhile, the host stops without releasing and the close raises
Unavailable (the Spot stays Closing until an operator cleans it up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.core.errors import InvalidOperation, Unavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import MOVING_STATES, AuthorityState
from zlink_trio.runtime.charts import CLOSE, step
from zlink_trio.runtime.declaration.policies import CloseReason
from zlink_trio.store import MembersRemain

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from statecharts.names import CloseOperationState
    from zlink_trio.core.deadline import Deadline
    from zlink_trio.core.records import AuthorityRecord, SpotRef
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.incarnation.incarnation import Incarnation

    #: Closes a Spot owned by another node (``coordinators.remote_close.close_remote``).
    RemoteClose = Callable[[NodeRuntime, SpotRef, AuthorityRecord, Deadline],
                           Awaitable[bool]]

__all__ = ("ACTOR_ONLY", "SPOT_OR_ACTOR", "USER_ONLY", "close_here")

#: The kinds ``spots.close`` closes.
USER_ONLY: Final = frozenset({SpotKind.USER})
#: The kinds ``actors.close`` closes.
ACTOR_ONLY: Final = frozenset({SpotKind.ACTOR})
#: The kinds the target of a command 48 closes (the source checked which it meant).
SPOT_OR_ACTOR: Final = USER_ONLY | ACTOR_ONLY


def _check_released(rt: NodeRuntime, host: Incarnation) -> None:
    """Unavailable if the host stopped because the lease was lost (nothing was released)."""
    if host.ownership_lost:
        raise rt.lease_lost_error()


async def close_here(rt: NodeRuntime, ref: SpotRef, state: CloseOperationState,
                     deadline: Deadline, *,
                     remote: RemoteClose | None = None,
                     expected: tuple[int, int] | None = None,
                     kinds: frozenset[SpotKind] = USER_ONLY) -> bool:
    """Close ``ref``: verify, BeginClose, seal, wait for the release (module docstring).

    A Spot Ready on another live node is closed there by ``remote`` (the source side of
    command 48); without ``remote`` -- on the target of a 48, which passes the owner
    generation and StoreVersion the source read as ``expected`` -- that is
    Unavailable.
    """
    location = rt.store.location
    record = await location.find(ref.spot_id)
    if record is None:
        step(CLOSE, state, CLOSE.ev.incarnation_gone)
        return False
    if record.object_generation != ref.generation:
        step(CLOSE, state, CLOSE.ev.other_generation)
        raise InvalidOperation(
            f"Spot {ref.spot_id!r} now has generation {record.object_generation}, not the "
            f"ref's {ref.generation}; close() never retargets a newer incarnation. Call "
            "find() and decide again"
        )
    if record.kind not in kinds:
        if kinds is ACTOR_ONLY:
            raise InvalidOperation(
                f"{ref.spot_id!r} is {_article(record.kind.name.title())} Spot, not an "
                "Actor; actors.close() closes Actors only")
        what = ("an Actor" if record.kind is SpotKind.ACTOR
                else f"{_article(record.kind.name.title())} Spot")
        raise InvalidOperation(
            f"{ref.spot_id!r} is {what}; spots.close() closes User Spots only (an Instance "
            "Spot closes itself with ctx.close(), an Actor is closed with actors.close())"
        )
    if record.owner != rt.owner:
        if remote is not None and record.owner.node_rid != rt.node_rid:
            return await remote(rt, ref, record, deadline)
        step(CLOSE, state, CLOSE.ev.owner_fence_mismatch)
        raise Unavailable(
            f"Spot {ref.spot_id!r} is owned by {record.owner}, not by this node's current "
            "lifecycle; nothing was closed. It becomes closable when its owner restarts or "
            "after an operator releases it"
        )
    if record.state in MOVING_STATES:
        step(CLOSE, state, CLOSE.ev.sealed_for_move)
        raise Unavailable(f"Spot {ref.spot_id!r} is sealed for relocation; nothing was "
                          "closed. Close it once the move committed or aborted")
    if expected is not None and record.state is not AuthorityState.CLOSING and (
            record.owner_generation, record.store_version) != expected:
        step(CLOSE, state, CLOSE.ev.owner_fence_mismatch)
        raise Unavailable(
            f"Spot {ref.spot_id!r} changed since the closing node read it (owner generation "
            f"{record.owner_generation}, StoreVersion {record.store_version}, expected "
            f"{expected[0]}, {expected[1]}); nothing was closed. Close it again"
        )
    host = rt.catalog.hosts.get(ref.spot_id)
    if record.state is AuthorityState.CLOSING:
        state = step(CLOSE, state, CLOSE.ev.already_closing)
        if host is not None and host.generation == ref.generation:
            await host.finished.wait()
            _check_released(rt, host)
        step(CLOSE, state, CLOSE.ev.release)
        return True
    state = step(CLOSE, state, CLOSE.ev.verified)
    with trio.CancelScope(shield=True):
        try:
            closing = await location.begin_close(
                ref.spot_id, object_generation=ref.generation, owner=rt.owner,
                now=rt.now(), expected_owner_generation=record.owner_generation)
        except MembersRemain:
            # The CAS found a member (the read before it could not see one that joined
            # since): admission and authority stay; the application decides.
            state = step(CLOSE, state, CLOSE.ev.cas_conflict)
            step(CLOSE, state, CLOSE.ev.active_membership)
            return False
    if closing is None:  # released between the read and the CAS
        return False
    state = step(CLOSE, state, CLOSE.ev.begin_close)
    if host is None or host.generation != ref.generation:
        with trio.CancelScope(shield=True):  # no local instance left: just release
            await location.release(closing.fence())
        return True
    host.request_close(CloseReason.CLOSED, closing.fence())
    state = step(CLOSE, state, CLOSE.ev.admission_sealed)
    await host.finished.wait()
    _check_released(rt, host)
    for event in (CLOSE.ev.turns_finished, CLOSE.ev.cleanup_done, CLOSE.ev.release):
        state = step(CLOSE, state, event)
    return True


def _article(word: str) -> str:
    """``word`` with its indefinite article ("an Instance", "an Entry", "a User")."""
    return f"{'an' if word[:1] in 'AEIOU' else 'a'} {word}"

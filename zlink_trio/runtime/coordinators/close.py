"""``spots.close(ref)``: closing one User Spot incarnation (06 §7), stepping ``CloseOperation``.

Theory of operation
-------------------
The close verifies before it acts, in one read of the authority: gone -> ``False``
(idempotent, never retargeted to a newer incarnation); another generation ->
InvalidOperation; not a User Spot -> InvalidOperation (Instance Spots close themselves
with ``ctx.close()``); owned by another live node -> command 48 to that node, whose
command 20 is the result (06 §7.1; :func:`serve_remote_close` is the owner's side, which
also checks the owner generation and StoreVersion the source read); owned by an earlier
lifecycle of this node -> Unavailable.  Then BeginClose (the
Closing CAS with this lifecycle as the owner, shielded) and the local host seals
admission; its task finishes the turns accepted before the seal, runs ``on_close(CLOSED)``
and cancels timers once, releases with the Closing record's fence and leaves the catalog
and route cache in one continuation.  A second close of the same incarnation meets
Closing, merges with the first and returns ``True`` once that one released.

Once the CAS succeeded the close runs to the end even if the caller's deadline passes
(the host task owns it); the caller alone then sees DeadlineExceeded.  If the node
loses its lease meanwhile, the host stops without releasing and the close raises
Unavailable (the Spot stays Closing until an operator cleans it up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from zlink_trio.core.errors import (
    DeadlineExceeded,
    InvalidOperation,
    RemoteProtocolError,
    StaleRoute,
    Unavailable,
)
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState, SpotRef
from zlink_trio.runtime.charts import CLOSE, step
from zlink_trio.runtime.declaration.policies import CloseReason
from zlink_trio.runtime.mesh.peers import from_wall_ms, wall_ms
from zlink_trio.runtime.mesh.remote_calls import operation_number, round_trip
from zlink_trio.wire.frames import CloseOutcome, Failure, UserSpotClose

if TYPE_CHECKING:
    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.incarnation.host import Host
    from zlink_trio.wire.frames import Outcome

__all__ = ("close_user_spot", "serve_remote_close")


async def close_user_spot(rt: NodeRuntime, ref: SpotRef, deadline: float) -> bool:
    """Close the incarnation ``ref`` names; see the module docstring."""
    if not isinstance(ref, SpotRef):
        raise InvalidOperation(
            f"close() takes the SpotRef of a User Spot (from create, get_or_create or find), "
            f"got {type(ref).__name__}"
        )
    state = CLOSE.initial
    with trio.move_on_at(deadline):
        return await _close(rt, ref, state, deadline)
    raise DeadlineExceeded(
        f"closing Spot {ref.spot_id!r} generation {ref.generation} did not finish before its "
        "deadline; if it began, it still completes. Check with find()"
    )


def _check_released(rt: NodeRuntime, host: Host) -> None:
    """Unavailable if the host stopped because the lease was lost (nothing was released)."""
    if host.ownership_lost:
        raise rt.lease_lost_error()


async def serve_remote_close(rt: NodeRuntime, frame: UserSpotClose) -> Outcome:
    """Run command 48 here (06 §7.1): the terminal outcome, retained per operation ID.

    The frame's target lifecycle must be this one; the authority is read from the store
    and checked against the frame's generation, owner generation and StoreVersion before
    the Closing CAS. A redelivery of the same operation gets the retained outcome.
    """
    async def run() -> Outcome:
        rt.check_admission()
        if frame.target != rt.owner:
            raise StaleRoute(f"the close of Spot {frame.ref.spot_id!r} was addressed to "
                             f"{frame.target}, not to this lifecycle ({rt.owner}); nothing "
                             "was closed")
        deadline = from_wall_ms(frame.deadline_ms)
        expected = (frame.expected_owner_generation, frame.expected_store_version)
        with trio.move_on_at(deadline):
            return CloseOutcome(
                closed=await _close(rt, frame.ref, CLOSE.initial, deadline, expected))
        raise DeadlineExceeded(f"closing Spot {frame.ref.spot_id!r} did not finish before "
                               "its deadline; if it began, it still completes")

    return await rt.peers.retained.run_once(
        frame.source, frame.operation_id, f"the close of Spot {frame.ref.spot_id!r}", run)


async def _close_remote(rt: NodeRuntime, ref: SpotRef, record: AuthorityRecord,
                        deadline: float) -> bool:
    """Command 48 to the owner; its command 20 is the result (never a Location read)."""
    link = await rt.peers.link_to_owner(record.owner, f"Spot {ref.spot_id!r}")
    operation = operation_number(rt.new_uuid4())

    def frame(correlation: int) -> UserSpotClose:
        return UserSpotClose(
            correlation=correlation, operation_id=operation, source=rt.owner, ref=ref,
            target=record.owner, expected_owner_generation=record.owner_generation,
            expected_store_version=record.store_version, deadline_ms=wall_ms(deadline))

    reply = await round_trip(rt, link, deadline, frame, f"closing Spot {ref.spot_id!r}")
    outcome = reply.outcome
    if isinstance(outcome, Failure):
        raise outcome.to_error()
    if not isinstance(outcome, CloseOutcome):
        raise RemoteProtocolError(f"the owner answered a close with {outcome!r}; the peer is "
                                  "broken or speaks another protocol version")
    return outcome.closed


async def _close(rt: NodeRuntime, ref: SpotRef, state: str, deadline: float,
                 expected: tuple[int, int] | None = None) -> bool:
    """Close ``ref`` here; ``expected`` (owner generation, StoreVersion) comes from a 48."""
    location = rt.store.location
    record = await location.find(ref.spot_id)
    if record is None:
        step(CLOSE, state, "incarnation_gone")
        return False
    if record.object_generation != ref.generation:
        step(CLOSE, state, "other_generation")
        raise InvalidOperation(
            f"Spot {ref.spot_id!r} now has generation {record.object_generation}, not the "
            f"ref's {ref.generation}; close() never retargets a newer incarnation. Call "
            "find() and decide again"
        )
    if record.kind is not SpotKind.USER:
        raise InvalidOperation(
            f"Spot {ref.spot_id!r} is a {record.kind.name.title()} Spot; spots.close() closes "
            "User Spots only (an Instance Spot closes itself with ctx.close())"
        )
    if record.owner != rt.owner:
        if expected is None and record.owner.node_rid != rt.node_rid:
            return await _close_remote(rt, ref, record, deadline)
        step(CLOSE, state, "owner_fence_mismatch")
        raise Unavailable(
            f"Spot {ref.spot_id!r} is owned by {record.owner}, not by this node's current "
            "lifecycle; nothing was closed. It becomes closable when its owner restarts or "
            "after an operator releases it"
        )
    if record.state in (AuthorityState.RELOCATING, AuthorityState.SEALED):
        step(CLOSE, state, "sealed_for_move")
        raise Unavailable(f"Spot {ref.spot_id!r} is sealed for relocation; nothing was "
                          "closed. Close it once the move committed or aborted")
    if expected is not None and record.state is not AuthorityState.CLOSING and (
            record.owner_generation, record.store_version) != expected:
        step(CLOSE, state, "owner_fence_mismatch")
        raise Unavailable(
            f"Spot {ref.spot_id!r} changed since the closing node read it (owner generation "
            f"{record.owner_generation}, StoreVersion {record.store_version}, expected "
            f"{expected[0]}, {expected[1]}); nothing was closed. Close it again"
        )
    host = rt.catalog.hosts.get(ref.spot_id)
    if record.state is AuthorityState.CLOSING:
        state = step(CLOSE, state, "already_closing")
        if host is not None and host.generation == ref.generation:
            await host.finished.wait()
            _check_released(rt, host)
        step(CLOSE, state, "release")
        return True
    state = step(CLOSE, state, "verified")
    with trio.CancelScope(shield=True):
        closing = await location.begin_close(
            ref.spot_id, object_generation=ref.generation, owner=rt.owner, now=rt.now(),
            expected_owner_generation=record.owner_generation)
    if closing is None:  # released between the read and the CAS
        return False
    state = step(CLOSE, state, "begin_close")
    if host is None or host.generation != ref.generation:
        with trio.CancelScope(shield=True):  # no local instance left: just release
            await location.release(closing.fence())
        return True
    host.request_close(CloseReason.CLOSED, closing.fence())
    state = step(CLOSE, state, "admission_sealed")
    await host.finished.wait()
    _check_released(rt, host)
    for event in ("turns_finished", "cleanup_done", "release"):
        state = step(CLOSE, state, event)
    return True

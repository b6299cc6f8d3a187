"""``spots.close(ref)``: closing one User Spot incarnation (06 §7), stepping ``CloseOperation``.

Theory of operation
-------------------
The close verifies before it acts, in one read of the authority: gone -> ``False``
(idempotent, never retargeted to a newer incarnation); another generation ->
InvalidOperation; not a User Spot -> InvalidOperation (Instance Spots close themselves
with ``ctx.close()``); owned by another node -> Unavailable.  Then BeginClose (the
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

from zlink_trio.core.errors import DeadlineExceeded, InvalidOperation
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState, SpotRef
from zlink_trio.runtime._charts import CLOSE, step
from zlink_trio.runtime._policies import CloseReason

if TYPE_CHECKING:
    from zlink_trio.runtime._host import Host
    from zlink_trio.runtime._runtime import NodeRuntime

__all__ = ("close_user_spot",)


async def close_user_spot(rt: NodeRuntime, ref: SpotRef, deadline: float) -> bool:
    """Close the incarnation ``ref`` names; see the module docstring."""
    if not isinstance(ref, SpotRef):
        raise InvalidOperation(
            f"close() takes the SpotRef of a User Spot (from create, get_or_create or find), "
            f"got {type(ref).__name__}"
        )
    state = CLOSE.initial
    with trio.move_on_at(deadline):
        return await _close(rt, ref, state)
    raise DeadlineExceeded(
        f"closing Spot {ref.spot_id!r} generation {ref.generation} did not finish before its "
        "deadline; if it began, it still completes. Check with find()"
    )


def _check_released(rt: NodeRuntime, host: Host) -> None:
    """Unavailable if the host stopped because the lease was lost (nothing was released)."""
    if host.ownership_lost:
        raise rt.lease_lost_error()


async def _close(rt: NodeRuntime, ref: SpotRef, state: str) -> bool:
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
        step(CLOSE, state, "owner_fence_mismatch")
        raise rt.cross_node(f"Spot {ref.spot_id!r}", record.owner.node_rid)
    if record.state in (AuthorityState.RELOCATING, AuthorityState.SEALED):
        step(CLOSE, state, "sealed_for_move")
        raise rt.cross_node(f"Spot {ref.spot_id!r}", record.owner.node_rid)
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

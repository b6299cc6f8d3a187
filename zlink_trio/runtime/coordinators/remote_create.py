"""Remote User Spot creation: command 47 and its command 20 reply.

Theory of operation
-------------------
Source (:func:`compete_remote`, when placement chose another node):

1. The target's live claim gives its lifecycle fence; the link to it is opened
   *before* anything is written, so an unreachable target costs no store write.
2. The creation request root is stored and Reserve names the **target** as the owner
   (its lifecycle, lease and capacity are checked by the store).  Losing Reserve is
   handled exactly as for a local create (EXISTING, wait, AlreadyExists, TypeMismatch).
3. Command 47 carries the reservation fence -- StoreVersion, ObjectGeneration, owner
   generation, target lifecycle, owner lease, pending capacity -- and the deadline; the
   request bytes are *not* resent.  The command 20 reply is the terminal result:
   CREATED / REJECTED with the SpotRef and the optional ``on_create`` reply, or a typed
   failure.  A Location row is never read as the result.
4. No reply (the link closed, the deadline passed, the caller was cancelled): the source
   withdraws the reservation with the same fence (AbortCreating).  The fence makes this
   safe whatever the target did: a commit that already happened refuses the abort and
   stands; a factory still running sees its own CommitReady refused and cleans up.

Target (:func:`serve_remote_create`): verifies the frame's target lifecycle is this one,
reads the Creating record **from the store** and checks every fence field against it and
the creation intent's root (SHA-256 and size are checked by the store), decodes the
request, and runs the same factory / CommitReady / AbortCreating code as a local create
(:func:`~zlink_trio.runtime.coordinators.create_operation.build_reserved`).  The
operation's terminal reply is kept for a while
(:class:`~zlink_trio.runtime.mesh.retained.RetainedResults`), so a redelivery of the
same operation ID gets the same reply and never a second factory run.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.core.errors import (
    DeadlineExceeded,
    InvalidOperation,
    RemoteProtocolError,
    StaleFence,
    Unavailable,
    ZLinkError,
)
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState, OwnerFence
from zlink_trio.runtime.calls.deadlines import deadline_from_wall_ms
from zlink_trio.runtime.charts import CREATE, step
from zlink_trio.runtime.coordinators.create_operation import (
    CreateOperation,
    Reserved,
    build_reserved,
    reserve,
)
from zlink_trio.runtime.declaration.message_classes import message_class
from zlink_trio.runtime.mesh.remote_calls import operation_number, round_trip
from zlink_trio.runtime.observe.logs import CREATE as LOGGER
from zlink_trio.runtime.results import CreateResult, CreateState
from zlink_trio.store.dead_lifecycle import reservation_fence
from zlink_trio.wire.frames import (
    CreateOutcome,
    EncodedMessage,
    Failure,
    Reply,
    UserSpotCreate,
    WireCreateState,
)

if TYPE_CHECKING:
    from zlink_trio.core.placement import PlacementCandidate
    from zlink_trio.core.records import AuthorityRecord, ReservationFence, RootReceipt
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.wire.frames import Outcome

__all__ = ("compete_remote", "serve_remote_create")

_STATES: Final = {WireCreateState.CREATED: CreateState.CREATED,
                  WireCreateState.REJECTED: CreateState.REJECTED,
                  WireCreateState.EXISTING: CreateState.EXISTING}


# --------------------------------------------------------------------------- source


async def compete_remote(op: CreateOperation, data: bytes, mesh: str, node: PlacementCandidate
                         ) -> CreateResult | None:
    """Reserve for ``node`` and have it build the Spot (see the module docstring)."""
    rt = op.rt
    claim = rt.peers.placed_claim(node.node_rid, node.node_id, f"Spot {op.spot_id!r}",
                                  "nothing was created. Try again")
    target = OwnerFence(node.node_rid, claim.lifecycle_generation)
    link = await rt.peers.link_to(claim)
    op.state = step(CREATE, op.state, CREATE.ev.placement_selected)
    reserved = await reserve(op, data, mesh, target)
    if not isinstance(reserved, Reserved):
        return reserved
    op.state = step(CREATE, op.state, CREATE.ev.reserve_won)
    fence = reserved.fence

    def frame(correlation: int) -> UserSpotCreate:
        return UserSpotCreate(
            correlation=correlation, operation_id=operation_number(op.op_id),
            source=rt.owner, spot_id=op.spot_id, stable_type=op.stable_type,
            expected_store_version=fence.store_version,
            object_generation=fence.object_generation,
            owner_generation=fence.owner_generation, target=target,
            owner_lease_expires_ms=max(0, int(fence.owner_lease_expires_at * 1000)),
            pending_capacity=fence.pending_capacity, deadline_ms=op.deadline.wall_ms)

    try:
        what = f"creating Spot {op.spot_id!r} on node {claim.descriptor.node_id!r}"
        reply = await round_trip(rt, rt.peers, link, op.deadline, frame, what)
    except BaseException as exc:
        expired = isinstance(exc, trio.Cancelled | DeadlineExceeded)
        op.state = step(CREATE, op.state, CREATE.ev.deadline_expired if expired
                        else CREATE.ev.factory_failed)
        with trio.CancelScope(shield=True):
            await _withdraw(rt, fence, reserved.receipt)
        op.state = step(CREATE, op.state, CREATE.ev.abort_creating)
        raise
    if isinstance(reply.outcome, Failure):
        # The target may have refused before touching the reservation (a stale fence, a
        # draining node...): withdraw it; if the target already aborted, this is a no-op.
        op.state = step(CREATE, op.state, CREATE.ev.factory_failed)
        with trio.CancelScope(shield=True):
            await _withdraw(rt, fence, reserved.receipt)
        op.state = step(CREATE, op.state, CREATE.ev.abort_creating)
        raise reply.outcome.to_error()
    return _result(op, reply)


def _result(op: CreateOperation, reply: Reply) -> CreateResult:
    outcome = reply.outcome
    if not isinstance(outcome, CreateOutcome) or outcome.state is WireCreateState.EXISTING:
        raise RemoteProtocolError(
            f"the target answered a remote create with {outcome!r}; the peer is broken or "
            "speaks another protocol version"
        )
    created = outcome.state is WireCreateState.CREATED
    op.state = step(CREATE, op.state, CREATE.ev.create_accepted if created
                    else CREATE.ev.create_rejected)
    op.state = step(CREATE, op.state, CREATE.ev.commit_ready if created
                    else CREATE.ev.abort_creating)
    value = None
    if outcome.reply is not None:
        encoded = outcome.reply
        cls = message_class(op.rt.peers.known_classes, encoded.type_name)
        value = op.rt.codec.decode(encoded.type_name, encoded.body, cls)
    return CreateResult(state=_STATES[outcome.state], ref=outcome.ref, reply=value)


async def _withdraw(rt: NodeRuntime, fence: ReservationFence, receipt: RootReceipt) -> None:
    """AbortCreating with the source's fence; a committed Spot refuses it and stands."""
    try:
        await rt.store.location.abort_creating(fence)
    except StaleFence:
        return  # the target committed (or already aborted and cleaned up itself)
    except ZLinkError as exc:
        LOGGER.error("Spot %r: withdrawing an unanswered remote creation failed: %s",
                     fence.spot_id, exc)
        return
    try:
        await rt.store.relocation.delete_root(receipt)
    except ZLinkError as exc:
        LOGGER.warning("could not delete creation request root %s: %s", receipt.ref, exc)


# --------------------------------------------------------------------------- target


#: The reason of :func:`_stale` that names a lifecycle, worded once it is known.
_RESERVED_FOR: Final = "it is reserved for another node"


def _stale(frame: UserSpotCreate, record: AuthorityRecord | None, rt: NodeRuntime) -> str:
    """Why the store's record does not match the frame's fence ('' when it does)."""
    if record is None:
        return "the store has no record of it (the reservation was withdrawn)"
    checks = (
        (record.state is AuthorityState.CREATING, f"it is {record.state.value}"),
        (record.object_generation == frame.object_generation,
         f"its generation is {record.object_generation}"),
        (record.owner_generation == frame.owner_generation,
         f"its owner generation is {record.owner_generation}"),
        (record.store_version == frame.expected_store_version,
         f"its StoreVersion is {record.store_version}"),
        (record.owner == rt.owner, _RESERVED_FOR),
        (record.matches(SpotKind.USER, frame.stable_type),
         f"it is {record.kind.name.title()} type {record.stable_type!r}"),
        (record.creation_intent is not None, "it carries no creation request"),
    )
    return next((why for ok, why in checks if not ok), "")


def _request(rt: NodeRuntime, data: bytes, frame: UserSpotCreate) -> object | None:
    try:
        fields = json.loads(data)
        if fields["spotId"] != frame.spot_id or fields["stableType"] != frame.stable_type:
            raise ValueError("the request names another Spot or type")
        body = fields["request"]
        if body is None:
            return None
        encoded = EncodedMessage(body["type"], base64.b64decode(body["body"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidOperation(f"the creation request of Spot {frame.spot_id!r} in the store "
                               f"is not readable ({exc}); nothing was created") from exc
    cls = message_class(rt.peers.known_classes, encoded.type_name)
    return rt.codec.decode(encoded.type_name, encoded.body, cls)


async def _create_here(rt: NodeRuntime, frame: UserSpotCreate) -> CreateOutcome:
    rt.check_admission()
    if frame.target != rt.owner:
        raise rt.not_addressed_here(f"the create of Spot {frame.spot_id!r}", frame.target,
                                    "nothing was created")
    spot_type = rt.registry.lookup(frame.stable_type, SpotKind.USER)
    record = await rt.store.location.find(frame.spot_id)
    why = _stale(frame, record, rt)
    if why == _RESERVED_FOR and record is not None:
        why = f"it is reserved for {await rt.peers.name_owner(record.owner)}"
    if why:
        raise Unavailable(f"the reservation of Spot {frame.spot_id!r} in command 47 no longer "
                          f"matches the store: {why}; nothing was created. Try again")
    assert record is not None
    assert record.creation_intent is not None
    receipt = record.creation_intent.receipt()
    request = _request(rt, await rt.store.relocation.get_root(receipt), frame)
    op = CreateOperation(rt, frame.spot_id, spot_type.stable_type, request, None,
             deadline_from_wall_ms(frame.deadline_ms), False, state=CREATE.st.running_factory,
             op_id=f"{frame.operation_id:016x}")
    with trio.move_on_at(op.deadline.at) as scope:
        # A local create of the same ID may hold the attempt; the store says this
        # reservation is ours, so that one loses its Reserve and ends its attempt soon.
        while (attempt := rt.catalog.begin_attempt(frame.spot_id)) is None:
            await rt.catalog.attempts[frame.spot_id].done.wait()
        try:
            rt.catalog.pending += 1
            try:
                result = await build_reserved(op, reservation_fence(record), receipt, record.mesh)
            finally:
                rt.catalog.pending -= 1
        finally:
            rt.catalog.end_attempt(attempt)
    if scope.cancelled_caught:
        raise DeadlineExceeded(f"creating Spot {frame.spot_id!r} did not finish before its "
                               "deadline; nothing was created")
    reply = None if result.reply is None else rt.codec.encode(result.reply)
    state = (WireCreateState.CREATED if result.state is CreateState.CREATED
             else WireCreateState.REJECTED)
    return CreateOutcome(state=state, ref=result.ref, reply=reply)


async def serve_remote_create(rt: NodeRuntime, frame: UserSpotCreate) -> Outcome:
    """Run command 47 here; its terminal outcome, retained per operation ID."""
    return await rt.peers.retained.run_once(
        frame.source, frame.operation_id, f"the create of Spot {frame.spot_id!r}",
        lambda: _create_here(rt, frame))

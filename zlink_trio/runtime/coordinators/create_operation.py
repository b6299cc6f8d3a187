"""One User Spot creation operation: its request, reservation and factory.

Theory of operation
-------------------
A Create / GetOrCreate is one :class:`CreateOperation` (Spot ID, stable type, the
creation request, the optional Mesh, its one deadline, its ``UserCreate`` chart state
and operation ID).  Two coordinators compete for it -- :mod:`.create` when placement
chose this node, :mod:`zlink_trio.runtime.coordinators.remote_create` when it chose another --
and both go through the steps here, so a local and a remote creation cannot differ:

* :func:`encode_request` -- the creation request root (<= 1 MiB encoded, with the
  operation ID and Spot ID so roots never collide).
* :func:`reserve` -- the root is stored and Reserve records its receipt as the
  CreationIntent, for this node or for the remote target (shielded).  Losing Reserve
  to an existing authority is :func:`lost`: EXISTING for a Ready match, ``None`` (wait
  and look again) for Creating/Closing, TypeMismatch, or AlreadyExists for ``create``.
* :func:`build_reserved` -- on the node that owns the reservation: the factory
  (``cls(ctx, request)``, ``on_activate``, ``on_create``); accept -> CommitReady, then
  the host is registered and served in the same continuation -> CREATED (+ reply);
  ``Reject(reply)`` -> ``on_close(ACTIVATION_FAILED)``, AbortCreating with the same fence
  -> REJECTED with the declined attempt's SpotRef (+ reply).  Any failure or the
  deadline after Reserve aborts with the same fence (:func:`abort`); the request root
  is deleted after commit or abort.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING

import attrs
import trio

from zlink_trio.core.errors import (
    AlreadyExists,
    HandlerError,
    InvalidOperation,
    TypeMismatch,
    Unavailable,
    ZLinkError,
)
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import (
    MAX_CREATION_REQUEST_BYTES,
    MOVING_STATES,
    AuthorityState,
    CreationIntent,
    SpotRef,
)
from zlink_trio.runtime import crash_points
from zlink_trio.runtime.charts import CREATE, step
from zlink_trio.runtime.declaration.policies import Reject
from zlink_trio.runtime.incarnation.incarnation import Incarnation
from zlink_trio.runtime.observe.fields import Operation, spot_fields
from zlink_trio.runtime.observe.logs import CREATE as LOGGER
from zlink_trio.runtime.results import CreateResult, CreateState
from zlink_trio.store import AuthorityExists

if TYPE_CHECKING:
    from statecharts.names import UserCreateState
    from zlink_trio.core.deadline import Deadline
    from zlink_trio.core.records import (
        AuthorityRecord,
        OwnerFence,
        ReservationFence,
        RootReceipt,
    )
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.wire.codec import EncodedMessage

__all__ = (
    "CreateOperation",
    "Reserved",
    "abort",
    "build_reserved",
    "classify",
    "delete_root",
    "encode_request",
    "lost",
    "reserve",
)


@attrs.define(eq=False)
class CreateOperation:
    rt: NodeRuntime
    spot_id: str
    stable_type: str
    request: object | None
    in_mesh: str | None
    deadline: Deadline
    create_only: bool
    state: UserCreateState = CREATE.initial
    op_id: str = ""


def encode_request(rt: NodeRuntime, op: CreateOperation) -> bytes:
    """The creation request root: operation, Spot ID, type and the encoded request."""
    body = None
    if op.request is not None:
        encoded = rt.codec.encode(op.request)
        body = {"type": encoded.type_name, "body": base64.b64encode(encoded.body).decode()}
    data = json.dumps({"operationId": op.op_id, "spotId": op.spot_id,
                       "stableType": op.stable_type, "request": body},
                      separators=(",", ":"), sort_keys=True).encode("utf-8")
    if len(data) > MAX_CREATION_REQUEST_BYTES:
        raise InvalidOperation(
            f"the encoded creation request is {len(data)} bytes, above the "
            f"{MAX_CREATION_REQUEST_BYTES}-byte bound; send less data at creation "
            "and the rest in a message"
        )
    return data


def classify(op: CreateOperation, record: AuthorityRecord) -> CreateResult | None:
    """EXISTING for a Ready match; None to wait; TypeMismatch otherwise."""
    if not record.matches(SpotKind.USER, op.stable_type):
        raise TypeMismatch(
            f"Spot {record.spot_id!r} exists as {record.kind.name.title()} Spot type "
            f"{record.stable_type!r}, not User type {op.stable_type!r}; use another ID or "
            "its own type"
        )
    if record.state is AuthorityState.READY or record.state in MOVING_STATES:
        return CreateResult(state=CreateState.EXISTING, ref=record.ref())
    return None


@attrs.frozen
class Reserved:
    """Reserve succeeded: the fence and the creation request root it names."""

    fence: ReservationFence
    receipt: RootReceipt


async def reserve(op: CreateOperation, data: bytes, mesh: str, owner: OwnerFence
                  ) -> Reserved | CreateResult | None:
    """Store the request root and Reserve for ``owner`` (shielded).

    Lost to an existing authority: :func:`lost`'s result (EXISTING, ``None`` = wait,
    or its error), and the root is deleted again.
    """
    rt = op.rt
    location, relocation = rt.store.location, rt.store.relocation
    current: AuthorityRecord | None
    with trio.CancelScope(shield=True):
        receipt = await relocation.put_root(data)
        try:
            fence = await location.reserve(
                op.spot_id, kind=SpotKind.USER, stable_type=op.stable_type, mesh=mesh,
                owner=owner, now=rt.now(),
                creation_intent=CreationIntent.from_receipt(receipt))
        except AuthorityExists as exc:
            await relocation.delete_root(receipt)
            current = exc.current
        except BaseException:
            await relocation.delete_root(receipt)
            raise
        else:
            current = None
    if current is not None:
        return lost(op, current)
    return Reserved(fence, receipt)


async def build_reserved(op: CreateOperation, fence: ReservationFence, receipt: RootReceipt,
                         mesh: str) -> CreateResult:
    """Factory, hooks and CommitReady (or AbortCreating) for a reservation this node owns.

    ``op.state`` is ``running_factory``. Runs on the node that won Reserve, and on the
    target of a remote create (command 47) with the fence the source reserved.
    """
    rt = op.rt
    location = rt.store.location
    host = Incarnation(rt, rt.registry.lookup(op.stable_type, SpotKind.USER), op.spot_id,
                fence.object_generation, mesh)
    declined = SpotRef(spot_id=op.spot_id, generation=fence.object_generation, mesh=mesh,
                       node_rid=rt.node_rid)
    try:
        # The factory and hooks get their own copy of the caller's request, and the caller
        # its own copy of the reply (``MessageCodec.isolated``), as across nodes.
        outcome = await host.build(rt.codec.isolated(op.request))
        encoded = _check_outcome(rt, op, outcome)
    except BaseException as exc:
        event = (CREATE.ev.deadline_expired if isinstance(exc, trio.Cancelled)
                 else CREATE.ev.factory_failed)
        op.state = step(CREATE, op.state, event)
        with trio.CancelScope(shield=True):
            await host.activation_failed()
            await abort(op, fence, receipt)
        raise
    if isinstance(outcome, Reject):
        op.state = step(CREATE, op.state, CREATE.ev.create_rejected)
        with trio.CancelScope(shield=True):
            await host.activation_failed()
            await abort(op, fence, receipt)
        return CreateResult(state=CreateState.REJECTED, ref=declined,
                            reply=rt.codec.isolated(outcome.reply))
    op.state = step(CREATE, op.state, CREATE.ev.create_accepted)
    if crash_points.ARMED:
        crash_points.point("create", "after_factory_before_commit", rt.node_id)
    with trio.CancelScope(shield=True):
        try:
            rt.check_usable()  # no CommitReady once the lease is known lost
            ready = await location.commit_ready(fence, now=rt.now())
        except ZLinkError as exc:
            await host.activation_failed()
            await abort(op, fence, receipt)
            raise Unavailable(
                f"creating Spot {op.spot_id!r} lost its reservation before Ready "
                f"({exc.message}); nothing was created. Try again"
            ) from exc
        # Same continuation as the commit: serve and register, so a Spot Ready in the
        # store is reachable here at once.
        host.open(None)
        rt.catalog.register(host)
        op.state = step(CREATE, op.state, CREATE.ev.commit_ready)
        await delete_root(rt, receipt)
    return CreateResult(state=CreateState.CREATED, ref=ready.ref(),
                        reply=rt.codec.isolated(outcome, encoded))


def _check_outcome(rt: NodeRuntime, op: CreateOperation, outcome: object
                   ) -> EncodedMessage | None:
    """``on_create``'s reply encoded (``None`` for none or a Reject); HandlerError when
    it cannot be a reply."""
    if outcome is None or isinstance(outcome, Reject):
        return None
    try:
        return rt.codec.encode(outcome)
    except InvalidOperation as exc:
        raise HandlerError(
            f"on_create of {op.stable_type!r} returned {type(outcome).__qualname__}, which "
            f"cannot be a reply ({exc.message}); return None, an attrs instance or "
            "zl.Reject(reply)",
            error_type="TypeError",
        ) from exc


def lost(op: CreateOperation, current: AuthorityRecord) -> CreateResult | None:
    if op.create_only:
        op.state = step(CREATE, op.state, CREATE.ev.reserve_conflict)
        raise AlreadyExists(
            f"the issued Spot ID {op.spot_id!r} already has authority; no second ID was "
            "generated. Call create() again"
        )
    if not current.matches(SpotKind.USER, op.stable_type):
        op.state = step(CREATE, op.state, CREATE.ev.reserve_lost_type_mismatch)
        classify(op, current)
    existing = classify(op, current)
    if existing is not None:
        op.state = step(CREATE, op.state, CREATE.ev.reserve_lost_ready)
        return existing
    op.state = step(CREATE, op.state, CREATE.ev.reserve_lost_closing
                    if current.state is AuthorityState.CLOSING
                    else CREATE.ev.reserve_lost_creating)
    return None


def _fields(op: CreateOperation, generation: int) -> dict[str, object]:
    return spot_fields(op.spot_id, node_id=op.rt.node_id, generation=generation,
                       operation=Operation.CREATE)


async def abort(op: CreateOperation, fence: ReservationFence, receipt: RootReceipt) -> None:
    """AbortCreating with the same fence and delete the request root (caller shields).

    After a lost lease nothing is written: the Creating record and the root stay for
    the operator's cleanup (an owner without a lease changes no authority).
    """
    if op.rt.lease_lost:
        LOGGER.error("Spot %r: creation abandoned after the lease was lost; its Creating "
                     "record stays until an operator cleans it up", op.spot_id,
                     extra=_fields(op, fence.object_generation))
        return
    try:
        await op.rt.store.location.abort_creating(fence)
    except ZLinkError as exc:
        LOGGER.error("Spot %r: aborting a failed creation failed: %s", op.spot_id, exc,
                     extra=_fields(op, fence.object_generation))
    await delete_root(op.rt, receipt)
    if CREATE.allows(op.state, CREATE.ev.abort_creating):
        op.state = step(CREATE, op.state, CREATE.ev.abort_creating)


async def delete_root(rt: NodeRuntime, receipt: RootReceipt) -> None:
    try:
        await rt.store.relocation.delete_root(receipt)
    except ZLinkError as exc:
        LOGGER.warning("could not delete creation request root %s: %s", receipt.ref, exc)

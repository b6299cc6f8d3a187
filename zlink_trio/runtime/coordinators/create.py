"""User Spot Create and GetOrCreate on this node (06 §3), stepping the ``UserCreate`` chart.

Theory of operation
-------------------
:func:`create_user_spot` runs in the caller's task under the operation's one deadline:

* ``get_or_create``: read the authority.  Ready of the same User type -> EXISTING (no
  factory, no reply); another kind/type -> TypeMismatch; Creating/Closing -> wait for
  the authority to change (a local attempt's event or a store poll) and look again:
  Ready -> EXISTING, Missing -> compete again within the remaining deadline.  Another
  attempt's REJECTED is never shared.
* ``create``: a fresh uuid4 and straight to placement; an active authority on it is
  AlreadyExists (no second uuid).
* Competing: placement (``core.placement``, this node must be chosen), the ceiling,
  then the creation request (<= 1 MiB encoded, with operation ID and Spot ID so roots
  never collide) is stored as an immutable root and Reserve records its receipt as the
  CreationIntent.  The winner builds the instance (``cls(ctx, request)``,
  ``on_activate``, ``on_create``): accept -> CommitReady, then the host is registered
  and served in the same continuation -> CREATED (+ reply); ``Reject(reply)`` ->
  ``on_close(ACTIVATION_FAILED)``, AbortCreating with the same fence -> REJECTED with the
  declined attempt's SpotRef (+ reply).  Any failure or the deadline after Reserve
  aborts with the same fence; the request root is deleted after commit or abort.
"""

from __future__ import annotations

import base64
import json
from enum import StrEnum
from typing import TYPE_CHECKING

import attrs
import trio

from zlink_trio.core.errors import (
    AlreadyExists,
    DeadlineExceeded,
    HandlerError,
    InvalidOperation,
    NotFound,
    TypeMismatch,
    Unavailable,
    ZLinkError,
)
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.placement import choose_node, eligible_nodes, select_mesh, select_user_type
from zlink_trio.core.records import (
    MAX_CREATION_REQUEST_BYTES,
    AuthorityState,
    CreationIntent,
    SpotRef,
)
from zlink_trio.runtime.charts import CREATE, step
from zlink_trio.runtime.coordinators import crash_points
from zlink_trio.runtime.coordinators.routing import Backoff, candidates, wait_for_change
from zlink_trio.runtime.declaration.policies import Reject
from zlink_trio.runtime.incarnation.host import Host
from zlink_trio.runtime.state import LOGGER
from zlink_trio.store import AuthorityExists

if TYPE_CHECKING:
    from zlink_trio.core.placement import PlacementCandidate
    from zlink_trio.core.records import (
        AuthorityRecord,
        OwnerFence,
        ReservationFence,
        RootReceipt,
    )
    from zlink_trio.runtime.state import NodeRuntime

__all__ = (
    "CreateResult",
    "CreateState",
    "Reserved",
    "build_reserved",
    "create_user_spot",
    "reserve",
)


class CreateState(StrEnum):
    """How a Create / GetOrCreate ended (06 §3.2)."""

    #: A Ready incarnation of the same User type was used; no factory ran, no reply.
    EXISTING = "existing"
    #: A new incarnation was committed Ready; ``reply`` is what ``on_create`` returned.
    CREATED = "created"
    #: ``on_create`` returned ``zl.Reject(reply)``; nothing was created and ``ref`` names
    #: the declined attempt (not a current location).
    REJECTED = "rejected"


@attrs.frozen(kw_only=True)
class CreateResult:
    """The terminal result of ``spots.create`` / ``spots.get_or_create``."""

    #: EXISTING, CREATED or REJECTED.
    state: CreateState
    #: The incarnation used, created, or declined.
    ref: SpotRef
    #: The optional reply ``on_create`` built (always ``None`` for EXISTING).
    reply: object | None = None


@attrs.define(eq=False)
class _Op:
    rt: NodeRuntime
    spot_id: str
    stable_type: str
    request: object | None
    in_mesh: str | None
    deadline: float
    create_only: bool
    state: str = CREATE.initial
    op_id: str = ""


def encode_request(rt: NodeRuntime, op: _Op) -> bytes:
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
            f"{MAX_CREATION_REQUEST_BYTES}-byte bound (06 §3.1); send less data at creation "
            "and the rest in a message"
        )
    return data


async def create_user_spot(rt: NodeRuntime, spot_id: str, stable_type: str,
                           request: object | None, in_mesh: str | None, deadline: float,
                           *, create_only: bool) -> CreateResult:
    """Run one Create/GetOrCreate to its terminal result (see the module docstring).

    ``spot_id`` and ``stable_type`` are already validated by the builder.
    """
    op = _Op(rt, spot_id, stable_type, request, in_mesh, deadline, create_only,
             op_id=rt.new_uuid4())
    op.state = step(CREATE, op.state, "spot_id_issued" if create_only else "spot_id_given")
    data = encode_request(rt, op)
    with trio.move_on_at(deadline) as scope:
        return await _run(op, data)
    if scope.cancelled_caught and CREATE.allows(op.state, "deadline_expired"):
        op.state = step(CREATE, op.state, "deadline_expired")
    raise DeadlineExceeded(
        f"creating Spot {spot_id!r} ({stable_type!r}) did not finish before its deadline; "
        "the next call re-checks the store. Use a longer .timeout()"
    )


def _classify(op: _Op, record: AuthorityRecord) -> CreateResult | None:
    """EXISTING for a Ready match; None to wait; TypeMismatch otherwise."""
    if not record.matches(SpotKind.USER, op.stable_type):
        raise TypeMismatch(
            f"Spot {record.spot_id!r} exists as {record.kind.name.title()} Spot type "
            f"{record.stable_type!r}, not User type {op.stable_type!r}; use another ID or "
            "its own type"
        )
    if record.state in (AuthorityState.READY, AuthorityState.RELOCATING,
                        AuthorityState.SEALED):
        return CreateResult(state=CreateState.EXISTING, ref=record.ref())
    return None


async def _run(op: _Op, data: bytes) -> CreateResult:
    rt = op.rt
    backoff = Backoff()
    while True:
        rt.check_usable()
        if op.state in ("resolving", "waiting_on_creating"):
            record = await rt.store.location.find(op.spot_id)
            waiting = op.state == "waiting_on_creating"
            if record is None:
                op.state = step(CREATE, op.state,
                                "other_attempt_missing" if waiting else "found_missing")
                continue
            if not waiting and not record.matches(SpotKind.USER, op.stable_type):
                op.state = step(CREATE, op.state, "found_type_mismatch")
            elif waiting and not record.matches(SpotKind.USER, op.stable_type):
                # A new authority of another type appeared: Reserve will classify it.
                op.state = step(CREATE, op.state, "other_attempt_missing")
                continue
            existing = _classify(op, record)
            if existing is not None:
                op.state = step(CREATE, op.state,
                                "other_attempt_ready" if waiting else "found_ready")
                return existing
            if not waiting:
                op.state = step(CREATE, op.state, "found_closing"
                                if record.state is AuthorityState.CLOSING else "found_creating")
            await wait_for_change(rt, op.spot_id, backoff)
            continue
        assert op.state == "selecting_placement", op.state
        result = await _compete(op, data)
        if result is not None:
            return result


async def _place(op: _Op) -> tuple[str, PlacementCandidate]:
    rt = op.rt
    found = await candidates(rt)
    try:
        mesh = select_mesh(found, op.in_mesh)
        select_user_type(found, mesh, op.stable_type)
        node = choose_node(eligible_nodes(found, mesh, op.stable_type, SpotKind.USER),
                           rt.random)
    except NotFound:
        op.state = step(CREATE, op.state, "mesh_not_found")
        raise
    except ZLinkError as exc:
        event = {"NotConfigured": "no_mesh_candidate", "CapacityExceeded": "no_capacity",
                 "InvalidOperation": "ambiguous_mesh"}.get(type(exc).__name__)
        if event is not None:
            op.state = step(CREATE, op.state, event)
        raise
    if node.node_rid == rt.node_rid:
        rt.registry.lookup(op.stable_type, SpotKind.USER)
    return mesh, node


async def _compete(op: _Op, data: bytes) -> CreateResult | None:
    """Placement, Reserve and, when won, the factory; ``None`` means wait and look again."""
    rt = op.rt
    mesh, node = await _place(op)
    attempt = rt.catalog.begin_attempt(op.spot_id)
    if attempt is None:  # another local operation competes for this ID: wait for it
        op.state = step(CREATE, op.state, "placement_selected")
        op.state = step(CREATE, op.state, "reserve_lost_creating")
        return None
    try:
        if node.node_rid != rt.node_rid:
            from zlink_trio.runtime.mesh.remote_create import compete_remote  # import cycle

            return await compete_remote(op, data, mesh, node)
        try:
            rt.catalog.check_ceiling()
        except ZLinkError:
            op.state = step(CREATE, op.state, "no_capacity")
            raise
        op.state = step(CREATE, op.state, "placement_selected")
        rt.check_admission()
        rt.catalog.pending += 1
        try:
            return await _reserve_and_build(op, data, mesh)
        finally:
            rt.catalog.pending -= 1
    finally:
        rt.catalog.end_attempt(attempt)


@attrs.frozen
class Reserved:
    """Reserve succeeded: the fence and the creation request root it names."""

    fence: ReservationFence
    receipt: RootReceipt


async def reserve(op: _Op, data: bytes, mesh: str, owner: OwnerFence
                  ) -> Reserved | CreateResult | None:
    """Store the request root and Reserve for ``owner`` (shielded; 06 §3.1).

    Lost to an existing authority: :func:`_lost`'s result (EXISTING, ``None`` = wait,
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
        return _lost(op, current)
    return Reserved(fence, receipt)


async def _reserve_and_build(op: _Op, data: bytes, mesh: str) -> CreateResult | None:
    reserved = await reserve(op, data, mesh, op.rt.owner)
    if not isinstance(reserved, Reserved):
        return reserved
    if crash_points.ARMED:
        crash_points.point("create", "after_reserve")
    op.state = step(CREATE, op.state, "reserve_won")
    return await build_reserved(op, reserved.fence, reserved.receipt, mesh)


async def build_reserved(op: _Op, fence: ReservationFence, receipt: RootReceipt,
                         mesh: str) -> CreateResult:
    """Factory, hooks and CommitReady (or AbortCreating) for a reservation this node owns.

    ``op.state`` is ``running_factory``. Runs on the node that won Reserve, and on the
    target of a remote create (command 47) with the fence the source reserved.
    """
    rt = op.rt
    location = rt.store.location
    host = Host(rt, rt.registry.lookup(op.stable_type, SpotKind.USER), op.spot_id,
                fence.object_generation, mesh)
    declined = SpotRef(spot_id=op.spot_id, generation=fence.object_generation, mesh=mesh,
                       node_rid=rt.node_rid)
    try:
        outcome = await host.build(op.request)
        _check_outcome(rt, op, outcome)
    except BaseException as exc:
        event = "deadline_expired" if isinstance(exc, trio.Cancelled) else "factory_failed"
        op.state = step(CREATE, op.state, event)
        with trio.CancelScope(shield=True):
            await host.activation_failed()
            await _abort(op, fence, receipt)
        raise
    if isinstance(outcome, Reject):
        op.state = step(CREATE, op.state, "create_rejected")
        with trio.CancelScope(shield=True):
            await host.activation_failed()
            await _abort(op, fence, receipt)
        return CreateResult(state=CreateState.REJECTED, ref=declined, reply=outcome.reply)
    op.state = step(CREATE, op.state, "create_accepted")
    if crash_points.ARMED:
        crash_points.point("create", "after_factory_before_commit")
    with trio.CancelScope(shield=True):
        try:
            rt.check_usable()  # no CommitReady once the lease is known lost
            ready = await location.commit_ready(fence, now=rt.now())
        except ZLinkError as exc:
            await host.activation_failed()
            await _abort(op, fence, receipt)
            raise Unavailable(
                f"creating Spot {op.spot_id!r} lost its reservation before Ready "
                f"({exc.message}); nothing was created. Try again"
            ) from exc
        # Same continuation as the commit: serve and register (09 §3).
        host.open(None)
        rt.catalog.register(host)
        op.state = step(CREATE, op.state, "commit_ready")
        await _delete_root(rt, receipt)
    return CreateResult(state=CreateState.CREATED, ref=ready.ref(), reply=outcome)


def _check_outcome(rt: NodeRuntime, op: _Op, outcome: object) -> None:
    if outcome is None or isinstance(outcome, Reject):
        return
    try:
        rt.codec.encode(outcome)
    except InvalidOperation as exc:
        raise HandlerError(
            f"on_create of {op.stable_type!r} returned {type(outcome).__qualname__}, which "
            f"cannot be a reply ({exc.message}); return None, an attrs instance or "
            "zl.Reject(reply)",
            error_type="TypeError",
        ) from exc


def _lost(op: _Op, current: AuthorityRecord) -> CreateResult | None:
    if op.create_only:
        op.state = step(CREATE, op.state, "reserve_conflict")
        raise AlreadyExists(
            f"the issued Spot ID {op.spot_id!r} already has authority; no second ID was "
            "generated (06 §3.2). Call create() again"
        )
    if not current.matches(SpotKind.USER, op.stable_type):
        op.state = step(CREATE, op.state, "reserve_lost_type_mismatch")
        _classify(op, current)
    existing = _classify(op, current)
    if existing is not None:
        op.state = step(CREATE, op.state, "reserve_lost_ready")
        return existing
    op.state = step(CREATE, op.state, "reserve_lost_closing"
                    if current.state is AuthorityState.CLOSING else "reserve_lost_creating")
    return None


async def _abort(op: _Op, fence: ReservationFence, receipt: RootReceipt) -> None:
    """AbortCreating with the same fence and delete the request root (caller shields).

    After a lost lease nothing is written: the Creating record and the root stay for
    the operator's cleanup (06 §9).
    """
    if op.rt.lease_lost:
        LOGGER.error("Spot %r: creation abandoned after the lease was lost; its Creating "
                     "record stays until an operator cleans it up", op.spot_id)
        return
    try:
        await op.rt.store.location.abort_creating(fence)
    except ZLinkError as exc:
        LOGGER.error("Spot %r: aborting a failed creation failed: %s", op.spot_id, exc)
    await _delete_root(op.rt, receipt)
    if op.state in ("cleaning_up_rejected", "aborting_failed_creation",
                    "aborting_expired_creation"):
        op.state = step(CREATE, op.state, "abort_creating")


async def _delete_root(rt: NodeRuntime, receipt: RootReceipt) -> None:
    try:
        await rt.store.relocation.delete_root(receipt)
    except ZLinkError as exc:
        LOGGER.warning("could not delete creation request root %s: %s", receipt.ref, exc)

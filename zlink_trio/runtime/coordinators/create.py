"""User Spot Create and GetOrCreate on this node, stepping the ``UserCreate`` chart.

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
* Competing: placement (``core.placement`` over a fresh read of the live descriptors),
  then -- on this node -- the ceiling, Reserve and the factory
  (:mod:`.create_operation`), or -- on another node -- a reservation for that node and
  command 47 (:mod:`zlink_trio.runtime.coordinators.remote_create`).  One node never runs two
  reservations for one ID: a second local operation waits for the first's attempt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from zlink_trio.core.errors import (
    CapacityExceeded,
    DeadlineExceeded,
    InvalidOperation,
    NotConfigured,
    NotFound,
    Unavailable,
    ZLinkError,
)
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.placement import choose_node, eligible_nodes, select_mesh, select_user_type
from zlink_trio.core.records import AuthorityState
from zlink_trio.runtime import crash_points
from zlink_trio.runtime.charts import CREATE, step
from zlink_trio.runtime.coordinators.create_operation import (
    CreateOperation,
    Reserved,
    build_reserved,
    classify,
    encode_request,
    reserve,
)
from zlink_trio.runtime.coordinators.placement import candidates
from zlink_trio.runtime.coordinators.remote_create import compete_remote
from zlink_trio.runtime.coordinators.routing import Backoff, wait_for_change
from zlink_trio.runtime.observe.fields import Operation
from zlink_trio.runtime.observe.operations import observe_operation

if TYPE_CHECKING:
    from zlink_trio.core.deadline import Deadline
    from zlink_trio.core.placement import PlacementCandidate
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.results import CreateResult

__all__ = ("create_user_spot",)


async def create_user_spot(rt: NodeRuntime, spot_id: str, stable_type: str,
                           request: object | None, in_mesh: str | None, deadline: Deadline,
                           *, create_only: bool) -> CreateResult:
    """Run one Create/GetOrCreate to its terminal result (see the module docstring).

    ``spot_id`` and ``stable_type`` are already validated by the builder.
    """
    op = CreateOperation(rt, spot_id, stable_type, request, in_mesh, deadline, create_only,
             op_id=rt.new_uuid4())
    op.state = step(CREATE, op.state, CREATE.ev.spot_id_issued if create_only
                    else CREATE.ev.spot_id_given)
    data = encode_request(rt, op)
    with observe_operation(rt.node_id, rt.metrics, Operation.CREATE, spot_id, in_mesh,
                           rt.tracing) as observed:
        with trio.move_on_at(deadline.at) as scope:
            result = await _run(op, data)
            observed.outcome = result.state.value
            observed.mesh, observed.generation = result.ref.mesh, result.ref.generation
            return result
        if scope.cancelled_caught and CREATE.allows(op.state, CREATE.ev.deadline_expired):
            op.state = step(CREATE, op.state, CREATE.ev.deadline_expired)
        raise DeadlineExceeded(
            f"creating Spot {spot_id!r} ({stable_type!r}) did not finish before its "
            "deadline; the next call re-checks the store. Use a longer .timeout()"
        )


async def _run(op: CreateOperation, data: bytes) -> CreateResult:
    rt = op.rt
    backoff = Backoff()
    while True:
        rt.check_usable()
        if op.state in CREATE.tags.reads_authority:
            record = await rt.store.location.find(op.spot_id)
            waiting = op.state in CREATE.tags.waits_on_other_attempt
            if record is None:
                op.state = step(CREATE, op.state, CREATE.ev.other_attempt_missing if waiting
                                else CREATE.ev.found_missing)
                continue
            if not waiting and not record.matches(SpotKind.USER, op.stable_type):
                op.state = step(CREATE, op.state, CREATE.ev.found_type_mismatch)
            elif waiting and not record.matches(SpotKind.USER, op.stable_type):
                # A new authority of another type appeared: Reserve will classify it.
                op.state = step(CREATE, op.state, CREATE.ev.other_attempt_missing)
                continue
            existing = classify(op, record)
            if existing is not None:
                op.state = step(CREATE, op.state, CREATE.ev.other_attempt_ready if waiting
                                else CREATE.ev.found_ready)
                return existing
            if not waiting:
                op.state = step(CREATE, op.state, CREATE.ev.found_closing
                                if record.state is AuthorityState.CLOSING
                                else CREATE.ev.found_creating)
            await wait_for_change(rt, op.spot_id, backoff)
            continue
        assert CREATE.allows(op.state, CREATE.ev.placement_selected), op.state
        result = await _compete(op, data)
        if result is not None:
            return result


async def _place(op: CreateOperation) -> tuple[str, PlacementCandidate]:
    rt = op.rt
    found = await candidates(rt)
    try:
        mesh = select_mesh(found, op.in_mesh)
        select_user_type(found, mesh, op.stable_type)
        node = choose_node(eligible_nodes(found, mesh, op.stable_type, SpotKind.USER),
                           # get_or_create: callers racing for one ID agree on the node;
                           # create()'s fresh ID has no rival, a random draw is enough
                           rt.random, spot_id=None if op.create_only else op.spot_id)
    except NotFound:
        op.state = step(CREATE, op.state, CREATE.ev.mesh_not_found)
        raise
    except NotConfigured:
        op.state = step(CREATE, op.state, CREATE.ev.no_mesh_candidate)
        raise
    except CapacityExceeded:
        op.state = step(CREATE, op.state, CREATE.ev.no_capacity)
        raise
    except Unavailable:  # every node serving the type is draining or stopping
        op.state = step(CREATE, op.state, CREATE.ev.hosts_closed)
        raise
    except InvalidOperation:
        op.state = step(CREATE, op.state, CREATE.ev.ambiguous_mesh)
        raise
    if node.node_rid == rt.node_rid:
        rt.registry.lookup(op.stable_type, SpotKind.USER)
    return mesh, node


async def _compete(op: CreateOperation, data: bytes) -> CreateResult | None:
    """Placement, Reserve and, when won, the factory; ``None`` means wait and look again."""
    rt = op.rt
    mesh, node = await _place(op)
    attempt = rt.catalog.begin_attempt(op.spot_id)
    if attempt is None:  # another local operation competes for this ID: wait for it
        op.state = step(CREATE, op.state, CREATE.ev.placement_selected)
        op.state = step(CREATE, op.state, CREATE.ev.reserve_lost_creating)
        return None
    try:
        if node.node_rid != rt.node_rid:
            return await compete_remote(op, data, mesh, node)
        try:
            rt.catalog.check_ceiling()
        except ZLinkError:
            op.state = step(CREATE, op.state, CREATE.ev.no_capacity)
            raise
        op.state = step(CREATE, op.state, CREATE.ev.placement_selected)
        rt.check_admission()
        rt.catalog.pending += 1
        try:
            return await _reserve_and_build(op, data, mesh)
        finally:
            rt.catalog.pending -= 1
    finally:
        rt.catalog.end_attempt(attempt)


async def _reserve_and_build(op: CreateOperation, data: bytes, mesh: str) -> CreateResult | None:
    reserved = await reserve(op, data, mesh, op.rt.owner)
    if not isinstance(reserved, Reserved):
        return reserved
    if crash_points.ARMED:
        crash_points.point("create", "after_reserve", op.rt.node_id)
    op.state = step(CREATE, op.state, CREATE.ev.reserve_won)
    return await build_reserved(op, reserved.fence, reserved.receipt, mesh)

"""Operator requests to another node: relocate a Spot it owns, drain or undrain it
(command 61).

Theory of operation
-------------------
``node.relocate``, ``node.drain`` and ``node.undrain`` act on the node they are called
on.  An operator -- ``zlink-trio relocate`` / ``drain`` / ``undrain``, through a
client-only node that joined the Mesh -- needs the same on another node, so:

- :func:`relocate_on_owner` reads the Spot's authority record; if this lifecycle owns
  it, it is ``node.relocate`` here; otherwise it sends command 61 ``RELOCATE`` to the
  owner's live lifecycle, which runs ``relocate_spot`` as if ``relocate`` had been
  called there, and answers with the :class:`RelocationResult`.
- :func:`drain_node` finds the live claim of a NodeId in this Mesh; this node is
  ``node.drain`` here; another is sent command 61 ``DRAIN`` and runs :func:`drain_here`
  (placement closed, every Spot relocated) and answers with the :class:`DrainResult`.
- :func:`undrain_node` likewise: ``node.undrain`` here, or command 61 ``UNDRAIN``, which
  runs ``placement.open_placement`` there (the node takes new Spots again).
- :func:`serve_node_operation` is the target side, one outcome per operation ID
  (a redelivery gets the retained answer, never a second move or drain).

Who may ask: every peer on an authenticated link is a node of this Mesh holding its
secret -- the same trust that lets it create, call and close Spots here -- so a peer
may ask for these too; there is no separate operator credential (docs/decisions.md).

The target works to the request's deadline minus a reply margin (a tenth of the time
left, at most 1 s), so its answer can still arrive before the caller gives up.  The
answer's report is JSON (:func:`relocation_json`, :func:`drain_json`,
``{"acceptsPlacements": true}`` for an undrain); a drain report
longer than :data:`MAX_REPORT_BYTES` lists the first results and counts the rest
(``DrainResult.unlisted``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final, TypeVar

import trio

from zlink_trio.core.deadline import Deadline
from zlink_trio.core.errors import (
    DeadlineExceeded,
    InvalidOperation,
    NotFound,
    RemoteProtocolError,
)
from zlink_trio.core.records import SpotRef
from zlink_trio.runtime.calls.deadlines import deadline_from_wall_ms
from zlink_trio.runtime.coordinators.placement import close_placement, open_placement
from zlink_trio.runtime.coordinators.relocation import drain, relocate_spot
from zlink_trio.runtime.mesh.remote_calls import operation_number, outcome_of, round_trip
from zlink_trio.runtime.results import DrainResult, RelocationOutcome, RelocationResult
from zlink_trio.wire.frames import NodeAction, NodeOperation, NodeOperationOutcome

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.wire.frames import Outcome

__all__ = ("MAX_REPORT_BYTES", "drain_here", "drain_json", "drain_node", "relocate_on_owner",
           "relocation_json", "serve_node_operation", "undrain_node")

R = TypeVar("R")

#: The longest report one answer carries (a drain of thousands of Spots lists the first).
MAX_REPORT_BYTES: Final = 256 * 1024
#: The most time the target keeps for its answer to travel back (seconds).
_REPLY_MARGIN: Final = 1.0


def relocation_json(result: RelocationResult) -> dict[str, object]:
    """``{"outcome", "ref", "reason"}`` of one relocation (``ref`` as ``SpotRef.to_json``)."""
    return {"outcome": result.outcome.value, "ref": result.ref.to_json(),
            "reason": result.reason}


def drain_json(result: DrainResult, *, limit: int = MAX_REPORT_BYTES) -> dict[str, object]:
    """``{"moved", "notMoved", "unlisted"}``: Spots not moved listed first, then moved ones,
    until the JSON would pass ``limit`` bytes; ``unlisted`` counts the results left out."""
    size = 64
    lists: dict[str, list[dict[str, object]]] = {"moved": [], "notMoved": []}
    unlisted = result.unlisted
    for key, results in (("notMoved", result.not_moved), ("moved", result.moved)):
        for entry in results:
            shown = relocation_json(entry)
            size += len(json.dumps(shown)) + 2
            if size > limit:
                unlisted += 1
            else:
                lists[key].append(shown)
    return {**lists, "unlisted": unlisted}


def _relocation_from(value: object) -> RelocationResult:
    if not isinstance(value, dict) or set(value) != {"outcome", "ref", "reason"}:
        raise InvalidOperation(f"not a relocation result: {value!r}")
    reason = value["reason"]
    if reason is not None and not isinstance(reason, str):
        raise InvalidOperation(f"a relocation reason is a string or null, got {reason!r}")
    try:
        outcome = RelocationOutcome(value["outcome"])
    except ValueError:
        raise InvalidOperation(f"unknown relocation outcome {value['outcome']!r}") from None
    return RelocationResult(outcome=outcome, ref=SpotRef.from_json(value["ref"]), reason=reason)


def _report(outcome: NodeOperationOutcome, what: str) -> object:
    try:
        return json.loads(outcome.report)
    except ValueError:
        raise RemoteProtocolError(f"{what} was answered with a report that is not JSON; the "
                                  "peer is broken or speaks another version") from None


def _parsed(what: str, parse: Callable[[], R]) -> R:
    try:
        return parse()
    except InvalidOperation as exc:
        raise RemoteProtocolError(f"{what} was answered with a malformed report "
                                  f"({exc.message}); the peer is broken or speaks another "
                                  "version") from None


async def _ask(rt: NodeRuntime, claim: NodeClaim, action: NodeAction, deadline: Deadline,
               what: str, *, spot_id: str | None = None, to: str | None = None) -> object:
    link = await rt.peers.link_to(claim)
    operation = operation_number(rt.new_uuid4())
    target = claim.owner()

    def frame(correlation: int) -> NodeOperation:
        return NodeOperation(correlation=correlation, operation_id=operation, source=rt.owner,
                             target=target, action=action, spot_id=spot_id, to_node=to,
                             deadline_ms=deadline.wall_ms)

    reply = await round_trip(rt, rt.peers, link, deadline, frame, what)
    return _report(outcome_of(reply, NodeOperationOutcome, what), what)


async def relocate_on_owner(rt: NodeRuntime, spot_id: str, to: str | None,
                            deadline: Deadline) -> RelocationResult:
    """Relocate ``spot_id`` on the node that owns it (here, or command 61 to its owner)."""
    rt.check_admission()
    record = await rt.store.location.find(spot_id)
    if record is None:
        raise NotFound(f"Spot {spot_id!r} does not exist; there is nothing to relocate")
    if record.owner == rt.owner:
        return await relocate_spot(rt, spot_id, to, deadline)
    claim = await rt.peers.claim_of(record.owner, f"Spot {spot_id!r}")
    what = f"relocating Spot {spot_id!r} on node {claim.descriptor.node_id!r}"
    report = await _ask(rt, claim, NodeAction.RELOCATE, deadline, what, spot_id=spot_id, to=to)
    return _parsed(what, lambda: _relocation_from(report))


async def drain_here(rt: NodeRuntime, deadline: Deadline, *,
                     halt: trio.Event | None = None) -> DrainResult:
    """``node.drain`` on this node: take no new Spots, relocate every Spot it hosts
    (no further move starts once ``halt`` is set)."""
    rt.placement_closed = True
    await close_placement(rt, deadline)
    return await drain(rt, deadline, halt=halt)


def _drain_from(value: object) -> DrainResult:
    if not isinstance(value, dict) or set(value) != {"moved", "notMoved", "unlisted"}:
        raise InvalidOperation(f"not a drain result: {value!r}")
    moved, not_moved, unlisted = value["moved"], value["notMoved"], value["unlisted"]
    if not (isinstance(moved, list) and isinstance(not_moved, list)
            and type(unlisted) is int and unlisted >= 0):
        raise InvalidOperation(f"not a drain result: {value!r}")
    return DrainResult(moved=[_relocation_from(v) for v in moved],
                       not_moved=[_relocation_from(v) for v in not_moved], unlisted=unlisted)


async def _live_claim(rt: NodeRuntime, node_id: str) -> NodeClaim:
    """The claim of the live node ``node_id`` of this Mesh; NotFound without one."""
    claims = [c for c in await rt.store.location.descriptors(rt.mesh, now=rt.now())
              if c.descriptor.node_id == node_id]
    if not claims:
        raise NotFound(f"no live node {node_id!r} in mesh {rt.mesh!r}; check the NodeId "
                       "(zlink-trio nodes lists the live ones)")
    return max(claims, key=lambda c: c.lifecycle_generation)


async def drain_node(rt: NodeRuntime, node_id: str, deadline: Deadline) -> DrainResult:
    """Drain the live node ``node_id`` of this Mesh (here, or command 61 to it)."""
    rt.check_admission()
    if node_id == rt.node_id:
        return await drain_here(rt, deadline)
    claim = await _live_claim(rt, node_id)
    what = f"draining node {node_id!r}"
    report = await _ask(rt, claim, NodeAction.DRAIN, deadline, what)
    return _parsed(what, lambda: _drain_from(report))


#: The report of an undrain: the node takes new Spots again.
_UNDRAINED: Final = {"acceptsPlacements": True}


def _undrain_from(value: object) -> None:
    if value != _UNDRAINED:
        raise InvalidOperation(f"not an undrain result: {value!r}")


async def undrain_node(rt: NodeRuntime, node_id: str, deadline: Deadline) -> None:
    """Undrain the live node ``node_id`` of this Mesh (here, or command 61 to it)."""
    rt.check_admission()
    if node_id == rt.node_id:
        await open_placement(rt, deadline)
        return
    claim = await _live_claim(rt, node_id)
    what = f"undraining node {node_id!r}"
    report = await _ask(rt, claim, NodeAction.UNDRAIN, deadline, what)
    _parsed(what, lambda: _undrain_from(report))


def _with_margin(deadline: Deadline) -> Deadline:
    left = deadline.remaining(trio.current_time())
    margin = min(_REPLY_MARGIN, max(left, 0.0) / 10)
    return Deadline(deadline.at - margin, max(1, deadline.wall_ms - int(margin * 1000)))


async def serve_node_operation(rt: NodeRuntime, frame: NodeOperation) -> Outcome:
    """Run command 61 here: the terminal outcome, retained per operation ID."""
    what = (f"the relocation of Spot {frame.spot_id!r}" if frame.action is NodeAction.RELOCATE
            else f"the {frame.action.name.lower()} of node {rt.node_id!r}")

    async def run() -> Outcome:
        rt.check_admission()
        if frame.target != rt.owner:
            raise rt.not_addressed_here(what, frame.target, "nothing was done")
        deadline = _with_margin(deadline_from_wall_ms(frame.deadline_ms))
        report: dict[str, object]
        with trio.move_on_at(deadline.at):
            if frame.action is NodeAction.RELOCATE:
                assert frame.spot_id is not None
                report = relocation_json(await relocate_spot(rt, frame.spot_id, frame.to_node,
                                                             deadline))
            elif frame.action is NodeAction.DRAIN:
                report = drain_json(await drain_here(rt, deadline))
            else:
                await open_placement(rt, deadline)
                report = dict(_UNDRAINED)
            return NodeOperationOutcome(report=json.dumps(report).encode("utf-8"))
        raise DeadlineExceeded(f"{what} did not finish before its deadline; what was done "
                               "stays done")

    return await rt.peers.retained.run_once(frame.source, frame.operation_id, what, run)

"""The field layout of every frame but the reply: one writer and one reader per command.

Theory of operation
-------------------
After the 4-byte header each command's fields follow in a fixed order
(``docs/wire.md`` has the byte tables). Here every layout is a pair of plain
functions: ``write_<x>(w, frame)`` appends the fields of an already
validated frame to a :class:`Writer`, and ``read_<x>(r, max_body_bytes)``
reads them back from a peer's bytes through the checking :class:`Reader`,
refusing anything out of range with :class:`RemoteProtocolError`.

Which layout a class uses is data, not code: a row of
:mod:`zlink_trio.wire._frame_rules` per class.
:data:`zlink_trio.wire.frames.FRAMES` is the table of frames, keyed by the
command byte; one level down, :data:`ROUTES` holds command 39's three routes
(tag: the route kind). The reply (command 20) and its table of success tails,
``OUTCOMES``, are in :mod:`zlink_trio.wire._reply_layouts`.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from zlink_trio.core.errors import RemoteProtocolError
from zlink_trio.wire._frame_fields import MAX_METADATA_BYTES, NONCE_BYTES
from zlink_trio.wire._frame_rules import Bodies, Rule, rule, rule_for
from zlink_trio.wire._frame_types import (
    MAX_FOLLOW_HOPS,
    MIN_FRAME_BYTES,
    ActivationRoute,
    Challenge,
    FollowRoute,
    Hello,
    NodeAction,
    NodeOperation,
    Ping,
    Pong,
    ReadyRoute,
    RelocateSpot,
    Route,
    RouteKind,
    SpotMessage,
    UserSpotClose,
    UserSpotCreate,
    Welcome,
)

if TYPE_CHECKING:
    from zlink_trio.wire._frame_fields import Reader, Writer

__all__ = (
    "ROUTES",
    "ROUTE_FOR",
    "read_challenge",
    "read_close",
    "read_create",
    "read_hello",
    "read_node_operation",
    "read_ping",
    "read_pong",
    "read_relocate",
    "read_spot_message",
    "read_welcome",
    "spot_message_bodies",
    "write_challenge",
    "write_close",
    "write_create",
    "write_introduction",
    "write_node_operation",
    "write_relocate",
    "write_spot_message",
    "write_token",
)

# --------------------------------------------------------------------------- handshake


def write_challenge(w: Writer, frame: Challenge) -> None:
    """Command 1: ``nonce``."""
    w.raw(frame.nonce)


def read_challenge(r: Reader, max_body_bytes: int) -> Challenge:
    """Command 1."""
    return Challenge(nonce=r.raw(NONCE_BYTES, "nonce"))


def write_introduction(w: Writer, frame: Hello | Welcome) -> None:
    """Commands 2 and 3: who the sender is, its frame limit, nonce and MAC."""
    w.text8(frame.node_id)
    w.rid(frame.node_rid)
    w.u64(frame.lifecycle_generation)
    w.text8(frame.mesh)
    w.u32(frame.max_frame_bytes)
    w.raw(frame.nonce)
    w.raw(frame.mac)


def _read_limit(r: Reader) -> int:
    value = r.u32("max frame bytes")
    if value < MIN_FRAME_BYTES:
        raise RemoteProtocolError(
            f"max frame bytes is {value}, below the {MIN_FRAME_BYTES}-byte minimum"
        )
    return value


def read_hello(r: Reader, max_body_bytes: int) -> Hello:
    """Command 2."""
    return Hello(
        node_id=r.text8("node id"),
        node_rid=r.rid("node rid"),
        lifecycle_generation=r.gen("lifecycle generation"),
        mesh=r.text8("mesh"),
        max_frame_bytes=_read_limit(r),
        nonce=r.raw(NONCE_BYTES, "nonce"),
        mac=r.raw(NONCE_BYTES, "mac"),
    )


def read_welcome(r: Reader, max_body_bytes: int) -> Welcome:
    """Command 3: the same fields as HELLO."""
    return Welcome(**attrs.asdict(read_hello(r, max_body_bytes), recurse=False))


def write_token(w: Writer, frame: Ping | Pong) -> None:
    """Commands 4 and 5: ``token``."""
    w.u64(frame.token)


def read_ping(r: Reader, max_body_bytes: int) -> Ping:
    """Command 4."""
    return Ping(token=r.u64("token"))


def read_pong(r: Reader, max_body_bytes: int) -> Pong:
    """Command 5."""
    return Pong(token=r.u64("token"))


# --------------------------------------------------------------------------- command 39


def _write_ready_route(w: Writer, route: ReadyRoute) -> None:
    w.text8(route.spot_id)
    w.u64(route.object_generation)
    w.u64(route.owner_generation)
    w.owner(route.target)


def _read_ready_route(r: Reader, max_body_bytes: int) -> ReadyRoute:
    return ReadyRoute(
        spot_id=r.text8("Spot ID"),
        object_generation=r.gen("object generation"),
        owner_generation=r.gen("owner generation"),
        target=r.owner("target"),
    )


def _write_activation_route(w: Writer, route: ActivationRoute) -> None:
    w.text8(route.target_mesh)
    w.owner(route.target)
    w.text8(route.spot_id)
    w.text8(route.stable_type)
    w.u64(route.descriptor_version)


def _read_activation_route(r: Reader, max_body_bytes: int) -> ActivationRoute:
    return ActivationRoute(
        target_mesh=r.text8("target mesh"),
        target=r.owner("target"),
        spot_id=r.text8("Spot ID"),
        stable_type=r.text8("stable type"),
        descriptor_version=r.gen("descriptor version"),
    )


def _write_follow_route(w: Writer, route: FollowRoute) -> None:
    w.text8(route.spot_id)
    w.u64(route.object_generation)
    w.u64(route.source_owner_generation)
    w.u64(route.target_owner_generation)
    w.owner(route.target)
    w.u8(route.hops)


def _read_follow_route(r: Reader, max_body_bytes: int) -> FollowRoute:
    spot_id = r.text8("Spot ID")
    object_generation = r.gen("object generation")
    source_owner_generation = r.gen("source owner generation")
    target_owner_generation = r.gen("target owner generation")
    if target_owner_generation <= source_owner_generation:
        raise RemoteProtocolError(
            f"target owner generation {target_owner_generation} is not above the source "
            f"owner generation {source_owner_generation}; a Message Follow route leads to a "
            "newer owner"
        )
    target = r.owner("target")
    hops = r.u8("hops")
    if not 1 <= hops <= MAX_FOLLOW_HOPS:
        raise RemoteProtocolError(f"hops is {hops}; a followed message has taken "
                                  f"1..{MAX_FOLLOW_HOPS} Message Follow routes")
    return FollowRoute(
        spot_id=spot_id,
        object_generation=object_generation,
        source_owner_generation=source_owner_generation,
        target_owner_generation=target_owner_generation,
        target=target,
        hops=hops,
    )


_ROUTE_RULES: Final = (
    rule(ReadyRoute, RouteKind.READY, _write_ready_route, _read_ready_route),
    rule(ActivationRoute, RouteKind.ACTIVATION, _write_activation_route, _read_activation_route),
    rule(FollowRoute, RouteKind.FOLLOW, _write_follow_route, _read_follow_route),
)
#: Command 39's routes: route class -> its row (tag: the route kind byte).
ROUTES: Final[dict[type, Rule[Route]]] = {row.cls: row for row in _ROUTE_RULES}
#: Route kind byte -> its row.
ROUTE_FOR: Final[dict[int, Rule[Route]]] = {row.tag: row for row in _ROUTE_RULES}
_KNOWN_ROUTES: Final = ", ".join(f"{kind.value} ({kind.name.lower()})" for kind in RouteKind)


def write_spot_message(w: Writer, frame: SpotMessage) -> None:
    """Command 39: route kind and route, ids, deadline, source, metadata, payload."""
    route = rule_for(ROUTES, frame.route)
    w.u8(route.tag)
    route.write(w, frame.route)
    w.u64(frame.operation_id)
    w.u64(frame.reply_correlation)
    w.u64(frame.deadline_ms)
    w.owner(frame.source)
    w.optional_text8(frame.source_spot_id)
    w.flag(frame.metadata is not None)
    if frame.metadata is not None:
        w.blob32(frame.metadata)
    w.payload(frame.payload)


def read_spot_message(r: Reader, max_body_bytes: int) -> SpotMessage:
    """Command 39."""
    kind = r.u8("route kind")
    route_rule = ROUTE_FOR.get(kind)
    if route_rule is None:
        raise RemoteProtocolError(f"unknown route kind {kind}; known: {_KNOWN_ROUTES}")
    route = route_rule.read(r, max_body_bytes)
    operation_id = r.u64_nonzero("operation id")
    reply_correlation = r.u64("reply correlation")
    deadline_ms = r.gen("deadline")
    source = r.owner("source")
    source_spot_id = r.optional_text8("source Spot ID")
    metadata = r.blob32("metadata", MAX_METADATA_BYTES) if r.flag("metadata flag") else None
    return SpotMessage(
        route=route,
        operation_id=operation_id,
        reply_correlation=reply_correlation,
        deadline_ms=deadline_ms,
        source=source,
        source_spot_id=source_spot_id,
        metadata=metadata,
        payload=r.payload("payload", max_body_bytes),
    )


def spot_message_bodies(frame: SpotMessage) -> Bodies:
    """Command 39 carries one body: its payload."""
    return (frame.payload,)


# --------------------------------------------------------------------------- commands 47, 48, 60


def write_create(w: Writer, frame: UserSpotCreate) -> None:
    """Command 47: the reservation fence to commit."""
    w.u64(frame.correlation)
    w.u64(frame.operation_id)
    w.owner(frame.source)
    w.text8(frame.spot_id)
    w.text8(frame.stable_type)
    w.u64(frame.expected_store_version)
    w.u64(frame.object_generation)
    w.u64(frame.owner_generation)
    w.owner(frame.target)
    w.u64(frame.owner_lease_expires_ms)
    w.u32(frame.pending_capacity)
    w.u64(frame.deadline_ms)


def read_create(r: Reader, max_body_bytes: int) -> UserSpotCreate:
    """Command 47."""
    correlation = r.u64_nonzero("correlation")
    operation_id = r.u64_nonzero("operation id")
    source = r.owner("source")
    spot_id = r.text8("Spot ID")
    stable_type = r.text8("stable type")
    expected_store_version = r.gen("expected store version")
    object_generation = r.gen("object generation")
    owner_generation = r.gen("owner generation")
    target = r.owner("target")
    owner_lease_expires_ms = r.bounded_u64("owner lease")
    pending_capacity = r.u32("pending capacity")
    if pending_capacity == 0:
        raise RemoteProtocolError("pending capacity is 0; a reservation holds at least 1")
    return UserSpotCreate(
        correlation=correlation,
        operation_id=operation_id,
        source=source,
        spot_id=spot_id,
        stable_type=stable_type,
        expected_store_version=expected_store_version,
        object_generation=object_generation,
        owner_generation=owner_generation,
        target=target,
        owner_lease_expires_ms=owner_lease_expires_ms,
        pending_capacity=pending_capacity,
        deadline_ms=r.gen("deadline"),
    )


def write_close(w: Writer, frame: UserSpotClose) -> None:
    """Command 48: the incarnation and the owner fence to close it with."""
    w.u64(frame.correlation)
    w.u64(frame.operation_id)
    w.owner(frame.source)
    w.spot_ref(frame.ref)
    w.owner(frame.target)
    w.u64(frame.expected_owner_generation)
    w.u64(frame.expected_store_version)
    w.u64(frame.deadline_ms)


def read_close(r: Reader, max_body_bytes: int) -> UserSpotClose:
    """Command 48."""
    return UserSpotClose(
        correlation=r.u64_nonzero("correlation"),
        operation_id=r.u64_nonzero("operation id"),
        source=r.owner("source"),
        ref=r.spot_ref("SpotRef"),
        target=r.owner("target"),
        expected_owner_generation=r.gen("expected owner generation"),
        expected_store_version=r.gen("expected store version"),
        deadline_ms=r.gen("deadline"),
    )


def write_relocate(w: Writer, frame: RelocateSpot) -> None:
    """Command 60: the two lifecycles, the sealed Spot and its fences, the payload root."""
    w.u64(frame.correlation)
    w.u64(frame.operation_id)
    w.owner(frame.source)
    w.owner(frame.target)
    w.text8(frame.spot_id)
    w.text8(frame.stable_type)
    w.text8(frame.mesh)
    w.u64(frame.object_generation)
    w.u64(frame.owner_generation)
    w.u64(frame.expected_store_version)
    w.root_receipt(frame.payload)
    w.u64(frame.deadline_ms)


def read_relocate(r: Reader, max_body_bytes: int) -> RelocateSpot:
    """Command 60."""
    return RelocateSpot(
        correlation=r.u64_nonzero("correlation"),
        operation_id=r.u64_nonzero("operation id"),
        source=r.owner("source"),
        target=r.owner("target"),
        spot_id=r.text8("Spot ID"),
        stable_type=r.text8("stable type"),
        mesh=r.text8("mesh"),
        object_generation=r.gen("object generation"),
        owner_generation=r.gen("owner generation"),
        expected_store_version=r.gen("expected store version"),
        payload=r.root_receipt("payload root"),
        deadline_ms=r.gen("deadline"),
    )


_ACTIONS: Final = ", ".join(f"{int(a)} ({a.name.lower()})" for a in NodeAction)


def write_node_operation(w: Writer, frame: NodeOperation) -> None:
    """Command 61: the two lifecycles, the action, its Spot ID and node, the deadline."""
    w.u64(frame.correlation)
    w.u64(frame.operation_id)
    w.owner(frame.source)
    w.owner(frame.target)
    w.u8(frame.action)
    w.optional_text8(frame.spot_id)
    w.optional_text8(frame.to_node)
    w.u64(frame.deadline_ms)


def read_node_operation(r: Reader, max_body_bytes: int) -> NodeOperation:
    """Command 61."""
    correlation = r.u64_nonzero("correlation")
    operation_id = r.u64_nonzero("operation id")
    source = r.owner("source")
    target = r.owner("target")
    number = r.u8("node action")
    if number not in NodeAction._value2member_map_:
        raise RemoteProtocolError(f"unknown node action {number}; known: {_ACTIONS}")
    action = NodeAction(number)
    spot_id = r.optional_text8("Spot ID")
    to_node = r.optional_text8("node")
    if action is NodeAction.RELOCATE and spot_id is None:
        raise RemoteProtocolError("a RELOCATE node operation has no Spot ID")
    if action is NodeAction.DRAIN and (spot_id, to_node) != (None, None):
        raise RemoteProtocolError("a DRAIN node operation carries a Spot ID or a node")
    return NodeOperation(correlation=correlation, operation_id=operation_id, source=source,
                         target=target, action=action, spot_id=spot_id, to_node=to_node,
                         deadline_ms=r.gen("deadline"))

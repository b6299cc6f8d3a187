"""The request frames: a Spot message (39), a remote create (47), close (48) and relocation (60).

Theory of operation
-------------------
Command 39 takes one of three routes: a :class:`ReadyRoute` to the owner of a
Ready authority, fenced by its object and owner generations; an
:class:`ActivationRoute`, the cold-activation envelope of a Missing Spot
(spec 06 §4.1); or a :class:`FollowRoute`, on which an old owner relays a
message that reached it after a relocation to the Spot's new owner along the
committed Message Follow route (spec 06 §6) -- the common part (operation ID,
reply correlation, deadline, source, payload) is the original message's, unchanged.
Commands 47 and 48 carry the fences of a remote User Spot create and close
(spec 06 §3.3, §7.1), and 60 asks the target of a planned relocation to take
a sealed Spot over (:class:`RelocateSpot`); 61 is an operator's request to a
node -- relocate a Spot it owns, or drain (:class:`NodeOperation`). Every request has a nonzero
``operation_id`` and an absolute ``deadline_ms``; 47, 48, 60 and 61 also have a
nonzero ``correlation``, and a 39 has one unless it is one-way
(``reply_correlation`` 0). A request with a correlation is answered by
exactly one command 20 (:mod:`zlink_trio.wire._reply_frames`).

Times are integers of milliseconds since the Unix epoch (``*_ms``); the
runtime converts its Trio clock to wall-clock time when it builds a frame.
Metadata is bounded here (16 KiB), the payload by ``encode`` (its limit is
configurable); anything else a request cannot carry is refused at
construction with :class:`LocalProtocolError`.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from zlink_trio.core.errors import LocalProtocolError
from zlink_trio.core.records import RootReceipt
from zlink_trio.wire._frame_checks import (
    T,
    check_deadline,
    check_gen,
    check_owner,
    check_payload,
    check_ref,
    check_text8,
    check_u64,
    check_u64_nonzero,
    int_in,
)
from zlink_trio.wire._frame_enums import NodeAction, RouteKind
from zlink_trio.wire._frame_fields import MAX_GEN, MAX_METADATA_BYTES, MAX_U32

if TYPE_CHECKING:
    from zlink_trio.core.records import OwnerFence, SpotRef
    from zlink_trio.wire.codec import EncodedMessage

__all__ = (
    "MAX_FOLLOW_HOPS",
    "ActivationRoute",
    "FollowRoute",
    "NodeOperation",
    "ReadyRoute",
    "RelocateSpot",
    "Route",
    "SpotMessage",
    "UserSpotClose",
    "UserSpotCreate",
)

#: The most Message Follow routes one message may take, counting the last (spec 06 §6).
MAX_FOLLOW_HOPS: Final = 8


def _check_lease(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not int_in(value, 0, MAX_GEN):
        raise LocalProtocolError(
            f"{attribute.name} must be milliseconds since the Unix epoch in 0..{MAX_GEN}, "
            f"got {value!r}"
        )


def _check_capacity(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not int_in(value, 1, MAX_U32):
        raise LocalProtocolError(f"{attribute.name} must be an int in 1..{MAX_U32}, got {value!r}")


def _check_optional_text8(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if value is not None:
        check_text8(instance, attribute, value)


def _check_metadata(
    instance: object, attribute: attrs.Attribute[bytes | None], value: bytes | None
) -> None:
    if value is None:
        return
    if not isinstance(value, bytes) or len(value) > MAX_METADATA_BYTES or type(value) is not bytes:
        raise LocalProtocolError(
            f"{attribute.name} must be None or bytes of at most {MAX_METADATA_BYTES} bytes"
        )


@attrs.frozen(kw_only=True)
class ReadyRoute:
    """Route kind 1: to the owner of a Ready authority, with its generation fence."""

    spot_id: str = attrs.field(validator=check_text8)
    object_generation: int = attrs.field(validator=check_gen)
    owner_generation: int = attrs.field(validator=check_gen)
    target: OwnerFence = attrs.field(validator=check_owner)


@attrs.frozen(kw_only=True)
class ActivationRoute:
    """Route kind 2: cold activation of a Missing Spot (no authority generation exists yet)."""

    target_mesh: str = attrs.field(validator=check_text8)
    target: OwnerFence = attrs.field(validator=check_owner)
    spot_id: str = attrs.field(validator=check_text8)
    stable_type: str = attrs.field(validator=check_text8)
    #: The StoreVersion of the target's descriptor claim the source selected.
    descriptor_version: int = attrs.field(validator=check_gen)


def _check_hops(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not int_in(value, 1, MAX_FOLLOW_HOPS):
        raise LocalProtocolError(
            f"{attribute.name} must be an int in 1..{MAX_FOLLOW_HOPS} (the Message Follow "
            f"routes taken, this one included), got {value!r}"
        )


@attrs.frozen(kw_only=True)
class FollowRoute:
    """Route kind 3: relayed along a committed Message Follow route (spec 06 §6).

    The forwarding node held the Spot at ``source_owner_generation``; its new
    owner ``target`` holds it at ``target_owner_generation``, which is greater
    (owner generations increase per hop). ``hops`` counts the Message Follow
    routes the message has taken, this one included: 1..:data:`MAX_FOLLOW_HOPS`.
    The receiver checks the Spot ID, ObjectGeneration, both owner generations
    and its own fence against the route it committed; the rest of the frame
    is the original message's.
    """

    spot_id: str = attrs.field(validator=check_text8)
    object_generation: int = attrs.field(validator=check_gen)
    source_owner_generation: int = attrs.field(validator=check_gen)
    target_owner_generation: int = attrs.field(validator=check_gen)
    target: OwnerFence = attrs.field(validator=check_owner)
    hops: int = attrs.field(validator=_check_hops)

    def __attrs_post_init__(self) -> None:
        if self.target_owner_generation <= self.source_owner_generation:
            raise LocalProtocolError(
                f"target_owner_generation {self.target_owner_generation} must be greater "
                f"than source_owner_generation {self.source_owner_generation}: a Message "
                "Follow route leads to a newer owner"
            )


#: Every route of command 39.
Route = ReadyRoute | ActivationRoute | FollowRoute


def _check_route(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not isinstance(value, Route):
        raise LocalProtocolError(
            f"route must be a ReadyRoute, an ActivationRoute or a FollowRoute, got {value!r}"
        )


@attrs.frozen(kw_only=True)
class SpotMessage:
    """Command 39: one application message to a Spot (spec 06 §4.1 step 8, §5).

    ``reply_correlation`` is 0 for a one-way send (no command 20 follows).
    ``metadata`` is ``None`` when the metadata flag is 0; ``b""`` is present
    but empty. ``deadline_ms`` is the operation's single end-to-end deadline.
    """

    route: Route = attrs.field(validator=_check_route)
    operation_id: int = attrs.field(validator=check_u64_nonzero)
    reply_correlation: int = attrs.field(validator=check_u64)
    deadline_ms: int = attrs.field(validator=check_deadline)
    source: OwnerFence = attrs.field(validator=check_owner)
    source_spot_id: str | None = attrs.field(validator=_check_optional_text8)
    metadata: bytes | None = attrs.field(validator=_check_metadata)
    payload: EncodedMessage = attrs.field(validator=check_payload)

    @property
    def route_kind(self) -> RouteKind:
        """The route kind byte this frame carries."""
        if isinstance(self.route, ReadyRoute):
            return RouteKind.READY
        if isinstance(self.route, FollowRoute):
            return RouteKind.FOLLOW
        return RouteKind.ACTIVATION


# --------------------------------------------------------------------------- commands 47, 48, 60


@attrs.frozen(kw_only=True)
class UserSpotCreate:
    """Command 47: commit a reservation the source made, on the target (spec 06 §3.3).

    The reservation fence is ``expected_store_version``, ``object_generation``,
    ``owner_generation``, ``target``, ``owner_lease_expires_ms`` and
    ``pending_capacity``. The creation request is not carried: the target
    reads it from the store's Pending creation projection.
    """

    correlation: int = attrs.field(validator=check_u64_nonzero)
    operation_id: int = attrs.field(validator=check_u64_nonzero)
    source: OwnerFence = attrs.field(validator=check_owner)
    spot_id: str = attrs.field(validator=check_text8)
    stable_type: str = attrs.field(validator=check_text8)
    expected_store_version: int = attrs.field(validator=check_gen)
    object_generation: int = attrs.field(validator=check_gen)
    owner_generation: int = attrs.field(validator=check_gen)
    target: OwnerFence = attrs.field(validator=check_owner)
    owner_lease_expires_ms: int = attrs.field(validator=_check_lease)
    pending_capacity: int = attrs.field(validator=_check_capacity)
    deadline_ms: int = attrs.field(validator=check_deadline)


@attrs.frozen(kw_only=True)
class UserSpotClose:
    """Command 48: close a remote User Spot incarnation (spec 06 §7.1)."""

    correlation: int = attrs.field(validator=check_u64_nonzero)
    operation_id: int = attrs.field(validator=check_u64_nonzero)
    source: OwnerFence = attrs.field(validator=check_owner)
    ref: SpotRef = attrs.field(validator=check_ref)
    target: OwnerFence = attrs.field(validator=check_owner)
    expected_owner_generation: int = attrs.field(validator=check_gen)
    expected_store_version: int = attrs.field(validator=check_gen)
    deadline_ms: int = attrs.field(validator=check_deadline)


def _check_receipt(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not isinstance(value, RootReceipt):
        raise LocalProtocolError(
            f"{attribute.name} must be a RootReceipt(ref, sha256, size) of the relocation "
            f"payload root, got {value!r}"
        )


@attrs.frozen(kw_only=True)
class RelocateSpot:
    """Command 60: the source of a planned relocation asks the target to take a sealed Spot over.

    The source sealed the Spot at ``object_generation`` and its own
    ``owner_generation`` (the Sealed record's StoreVersion is
    ``expected_store_version``) and put the relocation payload in the
    Relocation Store as the root ``payload``. One command 20 answers it, with
    a :class:`~zlink_trio.wire._reply_frames.RelocateOutcome` or a failure.
    """

    correlation: int = attrs.field(validator=check_u64_nonzero)
    operation_id: int = attrs.field(validator=check_u64_nonzero)
    source: OwnerFence = attrs.field(validator=check_owner)
    target: OwnerFence = attrs.field(validator=check_owner)
    spot_id: str = attrs.field(validator=check_text8)
    stable_type: str = attrs.field(validator=check_text8)
    mesh: str = attrs.field(validator=check_text8)
    object_generation: int = attrs.field(validator=check_gen)
    #: The source's AuthorityOwnerGeneration, the one it sealed the Spot at.
    owner_generation: int = attrs.field(validator=check_gen)
    #: The StoreVersion of the Sealed record.
    expected_store_version: int = attrs.field(validator=check_gen)
    payload: RootReceipt = attrs.field(validator=_check_receipt)
    deadline_ms: int = attrs.field(validator=check_deadline)


def _check_action(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not isinstance(value, NodeAction):
        raise LocalProtocolError(f"action must be a NodeAction, got {value!r}")


@attrs.frozen(kw_only=True)
class NodeOperation:
    """Command 61: an operator's request to the node lifecycle ``target``.

    ``RELOCATE`` moves the Spot ``spot_id`` that the target owns, to the node whose
    NodeId is ``to_node`` or, without it, to one placement picks; ``DRAIN`` asks the
    target to take no new Spots and relocate every Spot it hosts (``spot_id`` and
    ``to_node`` absent). One command 20 answers it, with a
    :class:`~zlink_trio.wire._reply_frames.NodeOperationOutcome` or a failure.
    """

    correlation: int = attrs.field(validator=check_u64_nonzero)
    operation_id: int = attrs.field(validator=check_u64_nonzero)
    source: OwnerFence = attrs.field(validator=check_owner)
    target: OwnerFence = attrs.field(validator=check_owner)
    action: NodeAction = attrs.field(validator=_check_action)
    spot_id: str | None = attrs.field(default=None, validator=_check_optional_text8)
    to_node: str | None = attrs.field(default=None, validator=_check_optional_text8)
    deadline_ms: int = attrs.field(validator=check_deadline)

    def __attrs_post_init__(self) -> None:
        if self.action is NodeAction.RELOCATE and self.spot_id is None:
            raise LocalProtocolError("a RELOCATE node operation names the Spot ID to move")
        if self.action is NodeAction.DRAIN and (self.spot_id, self.to_node) != (None, None):
            raise LocalProtocolError("a DRAIN node operation names no Spot ID and no node")

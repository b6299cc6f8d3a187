"""The request frames: a Spot message (39), a remote create (47), close (48) and relocation (60).

Theory of operation
-------------------
Command 39 takes one of three routes: a :class:`ReadyRoute` to the owner of a Ready
authority, fenced by its object and owner generations; an :class:`ActivationRoute`, the
cold-activation envelope of a Missing Spot (``statecharts.cold_activation``); or a
:class:`FollowRoute`, on which an old owner relays a message that reached it after a
relocation to the Spot's new owner along the committed Message Follow route
(docs/concepts.md) -- the common part (operation ID, reply correlation, deadline,
source, payload) is the original message's, unchanged. Commands 47 and 48 carry the
fences of a remote User Spot create and close (docs/mesh.md, "Remote create and close"),
and 60 asks the target of a planned relocation to take a sealed Spot over
(:class:`RelocateSpot`); 61 is an operator's request to a node -- relocate a Spot it
owns, or drain (:class:`NodeOperation`); 62 tells the target of a committed
relocation that the source relayed all it held for the Spot (:class:`RelayDone`, one-way:
no operation ID, no deadline, no reply). Every other request has a nonzero ``operation_id``
and an absolute ``deadline_ms``; 47, 48, 60 and 61 also have a nonzero ``correlation``,
and a 39 has one unless it is one-way (``reply_correlation`` 0). A request with a
correlation is answered by exactly one command 20
(:mod:`zlink_trio.wire._reply_frames`).

Times are integers of milliseconds since the Unix epoch (``*_ms``); the
runtime converts its Trio clock to wall-clock time when it builds a frame.
Metadata is bounded here (16 KiB), the payload by ``encode`` (its limit is
configurable); anything else a request cannot carry is refused at
construction with :class:`LocalProtocolError`.

Each class is its layout: its attrs fields, in order, are the frame's fields after
the header, each with its encoding and label (``metadata=wire(...)``, see
:mod:`zlink_trio.wire._frame_layouts`); :data:`ROUTE` is command 39's union of
routes, tagged by the route kind. The rules between fields are stated twice, once
per side: in a constructor (what this side may send) and in a :class:`Check` (what
a peer's bytes may say).

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeVar

import attrs

from zlink_trio.core.errors import LocalProtocolError
from zlink_trio.wire._frame_enums import NodeAction, RouteKind
from zlink_trio.wire._frame_layouts import (
    DEADLINE,
    GEN,
    ID,
    MAX_METADATA_BYTES,
    MAX_U32,
    MS,
    OPTIONAL_TEXT8,
    OWNER,
    PAYLOAD,
    ROOT,
    SPOT_REF,
    TEXT8,
    U64,
    Blob32,
    Check,
    Enum8,
    Int,
    Optional,
    Union,
    layout_of,
    wire,
)

if TYPE_CHECKING:
    from zlink_trio.core.records import OwnerFence, RootReceipt, SpotRef
    from zlink_trio.wire.codec import EncodedMessage

T = TypeVar("T")

__all__ = (
    "MAX_FOLLOW_HOPS",
    "ROUTE",
    "ActivationRoute",
    "FollowRoute",
    "NodeOperation",
    "ReadyRoute",
    "RelayDone",
    "RelocateSpot",
    "Route",
    "SpotMessage",
    "UserSpotClose",
    "UserSpotCreate",
)

#: The most Message Follow routes one message may take, counting the last.
MAX_FOLLOW_HOPS: Final = 8

_HOPS: Final = Int(
    "B", 1, MAX_FOLLOW_HOPS,
    f"an int in 1..{MAX_FOLLOW_HOPS} (the Message Follow routes taken, this one included)",
    refusal=lambda what, hops: (f"{what} is {hops}; a followed message has taken "
                                f"1..{MAX_FOLLOW_HOPS} Message Follow routes"))
_CAPACITY: Final = Int(
    "I", 1, MAX_U32,
    refusal=lambda what, value: f"{what} is 0; a reservation holds at least 1")
_METADATA: Final = Optional(Blob32(MAX_METADATA_BYTES))
_ACTION: Final = Enum8(NodeAction)


# --------------------------------------------------------------------------- command 39


@attrs.frozen(kw_only=True)
class ReadyRoute:
    """Route kind 1: to the owner of a Ready authority, with its generation fence."""

    spot_id: str = attrs.field(validator=TEXT8.validator, metadata=wire(TEXT8, "Spot ID"))
    object_generation: int = attrs.field(validator=GEN.validator,
                                         metadata=wire(GEN, "object generation"))
    owner_generation: int = attrs.field(validator=GEN.validator,
                                        metadata=wire(GEN, "owner generation"))
    target: OwnerFence = attrs.field(validator=OWNER.validator, metadata=wire(OWNER, "target"))


@attrs.frozen(kw_only=True)
class ActivationRoute:
    """Route kind 2: cold activation of a Missing Spot (no authority generation exists yet)."""

    target_mesh: str = attrs.field(validator=TEXT8.validator, metadata=wire(TEXT8, "target mesh"))
    target: OwnerFence = attrs.field(validator=OWNER.validator, metadata=wire(OWNER, "target"))
    spot_id: str = attrs.field(validator=TEXT8.validator, metadata=wire(TEXT8, "Spot ID"))
    stable_type: str = attrs.field(validator=TEXT8.validator, metadata=wire(TEXT8, "stable type"))
    #: The StoreVersion of the target's descriptor claim the source selected.
    descriptor_version: int = attrs.field(validator=GEN.validator,
                                          metadata=wire(GEN, "descriptor version"))


def _not_newer(source_owner_generation: int, target_owner_generation: int) -> str | None:
    if target_owner_generation > source_owner_generation:
        return None
    return (f"target owner generation {target_owner_generation} is not above the source "
            f"owner generation {source_owner_generation}; a Message Follow route leads to a "
            "newer owner")


@attrs.frozen(kw_only=True)
class FollowRoute:
    """Route kind 3: relayed along a committed Message Follow route.

    The forwarding node held the Spot at ``source_owner_generation``; its new
    owner ``target`` holds it at ``target_owner_generation``, which is greater
    (owner generations increase per hop). ``hops`` counts the Message Follow
    routes the message has taken, this one included: 1..:data:`MAX_FOLLOW_HOPS`.
    The receiver checks the Spot ID, ObjectGeneration, both owner generations
    and its own fence against the route it committed; the rest of the frame
    is the original message's.
    """

    spot_id: str = attrs.field(validator=TEXT8.validator, metadata=wire(TEXT8, "Spot ID"))
    object_generation: int = attrs.field(validator=GEN.validator,
                                         metadata=wire(GEN, "object generation"))
    source_owner_generation: int = attrs.field(validator=GEN.validator,
                                               metadata=wire(GEN, "source owner generation"))
    target_owner_generation: int = attrs.field(
        validator=GEN.validator,
        metadata=wire(GEN, "target owner generation", check=Check(
            ("source_owner_generation", "target_owner_generation"), _not_newer)))
    target: OwnerFence = attrs.field(validator=OWNER.validator, metadata=wire(OWNER, "target"))
    hops: int = attrs.field(validator=_HOPS.validator, metadata=wire(_HOPS, "hops"))

    def __attrs_post_init__(self) -> None:
        if self.target_owner_generation <= self.source_owner_generation:
            raise LocalProtocolError(
                f"target_owner_generation {self.target_owner_generation} must be greater "
                f"than source_owner_generation {self.source_owner_generation}: a Message "
                "Follow route leads to a newer owner"
            )


#: Every route of command 39.
Route = ReadyRoute | ActivationRoute | FollowRoute
#: Command 39's route: the route kind byte, then that route's fields. Every call to one
#: Spot carries the same Ready route until the Spot moves, so a link keeps them.
ROUTE: Final = Union("route kind", {
    RouteKind.READY: layout_of(ReadyRoute, cached=1024),
    RouteKind.ACTIVATION: layout_of(ActivationRoute),
    RouteKind.FOLLOW: layout_of(FollowRoute),
})


@attrs.frozen(kw_only=True)
class SpotMessage:
    """Command 39: one application message to a Spot (direct, envelope or relayed).

    ``reply_correlation`` is 0 for a one-way send (no command 20 follows).
    ``metadata`` is ``None`` when the metadata flag is 0; ``b""`` is present
    but empty. ``deadline_ms`` is the operation's single end-to-end deadline.
    The writer takes ``route`` and ``source`` pre-encoded too (``frames.encode_route``,
    ``frames.encode_owner``): a call keeps them with its cached route and its node.
    """

    route: Route = attrs.field(validator=ROUTE.validator, metadata=wire(ROUTE, "route",
                                                                        slot=True))
    operation_id: int = attrs.field(validator=ID.validator, metadata=wire(ID, "operation id"))
    reply_correlation: int = attrs.field(validator=U64.validator,
                                         metadata=wire(U64, "reply correlation"))
    deadline_ms: int = attrs.field(validator=DEADLINE.validator,
                                   metadata=wire(DEADLINE, "deadline"))
    source: OwnerFence = attrs.field(validator=OWNER.validator,
                                     metadata=wire(OWNER, "source", slot=True))
    source_spot_id: str | None = attrs.field(validator=OPTIONAL_TEXT8.validator,
                                             metadata=wire(OPTIONAL_TEXT8, "source Spot ID"))
    metadata: bytes | None = attrs.field(validator=_METADATA.validator,
                                         metadata=wire(_METADATA, "metadata"))
    payload: EncodedMessage = attrs.field(validator=PAYLOAD.validator,
                                          metadata=wire(PAYLOAD, "payload"))

    @property
    def route_kind(self) -> RouteKind:
        """The route kind byte this frame carries."""
        if isinstance(self.route, ReadyRoute):
            return RouteKind.READY
        if isinstance(self.route, FollowRoute):
            return RouteKind.FOLLOW
        return RouteKind.ACTIVATION


# ----------------------------------------------------------------------- commands 47, 48, 60, 61


@attrs.frozen(kw_only=True)
class UserSpotCreate:
    """Command 47: commit a reservation the source made, on the target.

    The reservation fence is ``expected_store_version``, ``object_generation``,
    ``owner_generation``, ``target``, ``owner_lease_expires_ms`` and
    ``pending_capacity``. The creation request is not carried: the target
    reads it from the store's Pending creation projection.
    """

    correlation: int = attrs.field(validator=ID.validator, metadata=wire(ID, "correlation"))
    operation_id: int = attrs.field(validator=ID.validator, metadata=wire(ID, "operation id"))
    source: OwnerFence = attrs.field(validator=OWNER.validator, metadata=wire(OWNER, "source"))
    spot_id: str = attrs.field(validator=TEXT8.validator, metadata=wire(TEXT8, "Spot ID"))
    stable_type: str = attrs.field(validator=TEXT8.validator, metadata=wire(TEXT8, "stable type"))
    expected_store_version: int = attrs.field(validator=GEN.validator,
                                              metadata=wire(GEN, "expected store version"))
    object_generation: int = attrs.field(validator=GEN.validator,
                                         metadata=wire(GEN, "object generation"))
    owner_generation: int = attrs.field(validator=GEN.validator,
                                        metadata=wire(GEN, "owner generation"))
    target: OwnerFence = attrs.field(validator=OWNER.validator, metadata=wire(OWNER, "target"))
    owner_lease_expires_ms: int = attrs.field(validator=MS.validator,
                                              metadata=wire(MS, "owner lease"))
    pending_capacity: int = attrs.field(validator=_CAPACITY.validator,
                                        metadata=wire(_CAPACITY, "pending capacity"))
    deadline_ms: int = attrs.field(validator=DEADLINE.validator,
                                   metadata=wire(DEADLINE, "deadline"))


@attrs.frozen(kw_only=True)
class UserSpotClose:
    """Command 48: close a remote User Spot incarnation."""

    correlation: int = attrs.field(validator=ID.validator, metadata=wire(ID, "correlation"))
    operation_id: int = attrs.field(validator=ID.validator, metadata=wire(ID, "operation id"))
    source: OwnerFence = attrs.field(validator=OWNER.validator, metadata=wire(OWNER, "source"))
    ref: SpotRef = attrs.field(validator=SPOT_REF.validator, metadata=wire(SPOT_REF, "SpotRef"))
    target: OwnerFence = attrs.field(validator=OWNER.validator, metadata=wire(OWNER, "target"))
    expected_owner_generation: int = attrs.field(validator=GEN.validator,
                                                 metadata=wire(GEN, "expected owner generation"))
    expected_store_version: int = attrs.field(validator=GEN.validator,
                                              metadata=wire(GEN, "expected store version"))
    deadline_ms: int = attrs.field(validator=DEADLINE.validator,
                                   metadata=wire(DEADLINE, "deadline"))


@attrs.frozen(kw_only=True)
class RelocateSpot:
    """Command 60: the source of a planned relocation asks the target to take a sealed Spot over.

    The source sealed the Spot at ``object_generation`` and its own
    ``owner_generation`` (the Sealed record's StoreVersion is
    ``expected_store_version``) and put the relocation payload in the
    Relocation Store as the root ``payload``. One command 20 answers it, with
    a :class:`~zlink_trio.wire._reply_frames.RelocateOutcome` or a failure.
    """

    correlation: int = attrs.field(validator=ID.validator, metadata=wire(ID, "correlation"))
    operation_id: int = attrs.field(validator=ID.validator, metadata=wire(ID, "operation id"))
    source: OwnerFence = attrs.field(validator=OWNER.validator, metadata=wire(OWNER, "source"))
    target: OwnerFence = attrs.field(validator=OWNER.validator, metadata=wire(OWNER, "target"))
    spot_id: str = attrs.field(validator=TEXT8.validator, metadata=wire(TEXT8, "Spot ID"))
    stable_type: str = attrs.field(validator=TEXT8.validator, metadata=wire(TEXT8, "stable type"))
    mesh: str = attrs.field(validator=TEXT8.validator, metadata=wire(TEXT8, "mesh"))
    object_generation: int = attrs.field(validator=GEN.validator,
                                         metadata=wire(GEN, "object generation"))
    #: The source's AuthorityOwnerGeneration, the one it sealed the Spot at.
    owner_generation: int = attrs.field(validator=GEN.validator,
                                        metadata=wire(GEN, "owner generation"))
    #: The StoreVersion of the Sealed record.
    expected_store_version: int = attrs.field(validator=GEN.validator,
                                              metadata=wire(GEN, "expected store version"))
    payload: RootReceipt = attrs.field(validator=ROOT.validator,
                                       metadata=wire(ROOT, "payload root"))
    deadline_ms: int = attrs.field(validator=DEADLINE.validator,
                                   metadata=wire(DEADLINE, "deadline"))


def _check_action(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not isinstance(value, NodeAction):
        raise LocalProtocolError(f"action must be a NodeAction, got {value!r}")


def _action_mismatch(action: NodeAction, spot_id: str | None, to_node: str | None
                     ) -> str | None:
    if action is NodeAction.RELOCATE and spot_id is None:
        return "a RELOCATE node operation has no Spot ID"
    if action is not NodeAction.RELOCATE and (spot_id, to_node) != (None, None):
        return f"a {action.name} node operation carries a Spot ID or a node"
    return None


@attrs.frozen(kw_only=True)
class NodeOperation:
    """Command 61: an operator's request to the node lifecycle ``target``.

    ``RELOCATE`` moves the Spot ``spot_id`` that the target owns, to the node whose
    NodeId is ``to_node`` or, without it, to one placement picks; ``DRAIN`` asks the
    target to take no new Spots and relocate every Spot it hosts, ``UNDRAIN`` to take new
    Spots again (for both, ``spot_id`` and ``to_node`` are absent). One command 20
    answers it, with a
    :class:`~zlink_trio.wire._reply_frames.NodeOperationOutcome` or a failure.
    """

    correlation: int = attrs.field(validator=ID.validator, metadata=wire(ID, "correlation"))
    operation_id: int = attrs.field(validator=ID.validator, metadata=wire(ID, "operation id"))
    source: OwnerFence = attrs.field(validator=OWNER.validator, metadata=wire(OWNER, "source"))
    target: OwnerFence = attrs.field(validator=OWNER.validator, metadata=wire(OWNER, "target"))
    action: NodeAction = attrs.field(validator=_check_action, metadata=wire(_ACTION, "node action"))
    spot_id: str | None = attrs.field(default=None, validator=OPTIONAL_TEXT8.validator,
                                      metadata=wire(OPTIONAL_TEXT8, "Spot ID"))
    to_node: str | None = attrs.field(
        default=None, validator=OPTIONAL_TEXT8.validator,
        metadata=wire(OPTIONAL_TEXT8, "node",
                      check=Check(("action", "spot_id", "to_node"), _action_mismatch)))
    deadline_ms: int = attrs.field(validator=DEADLINE.validator,
                                   metadata=wire(DEADLINE, "deadline"))

    def __attrs_post_init__(self) -> None:
        if self.action is NodeAction.RELOCATE and self.spot_id is None:
            raise LocalProtocolError("a RELOCATE node operation names the Spot ID to move")
        if (self.action is not NodeAction.RELOCATE
                and (self.spot_id, self.to_node) != (None, None)):
            raise LocalProtocolError(f"a {self.action.name} node operation names no Spot ID "
                                     "and no node")


@attrs.frozen(kw_only=True)
class RelayDone:
    """Command 62: the source of a committed relocation relayed every message its hold
    took in for the Spot (one-way; the link's sender is the source).

    The target runs the messages that reach it otherwise -- a local caller, a node whose
    route already names it -- only after this frame (or its own deadline), so none
    overtakes a held message of the same sender (docs/relocation.md).
    """

    spot_id: str = attrs.field(validator=TEXT8.validator, metadata=wire(TEXT8, "Spot ID"))
    object_generation: int = attrs.field(validator=GEN.validator,
                                         metadata=wire(GEN, "object generation"))
    #: The AuthorityOwnerGeneration the commit gave the target.
    owner_generation: int = attrs.field(validator=GEN.validator,
                                        metadata=wire(GEN, "owner generation"))

"""The names of the structured fields on log records, and the operation kinds.

Every record that is about one Spot, one operation or one route carries some of these
as attributes (``logging``'s ``extra=``), so a JSON formatter or a log pipeline can
filter on them without parsing messages.  They are defined here once; what each means
is in ``docs/observability.md``.  A metric never takes :data:`SPOT_ID` as a label: it is
unbounded.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

import trio

from zlink_trio.core.errors import ZLinkError

__all__ = (
    "CACHE",
    "DURATION",
    "FOLLOW",
    "FOLLOW_HOPS",
    "MESH",
    "NODE_ID",
    "OBJECT_GENERATION",
    "OPERATION",
    "OUTCOME",
    "RESOLVE",
    "SPOT_ID",
    "STALE",
    "CacheResult",
    "FollowEvent",
    "Operation",
    "ResolveResult",
    "StaleReason",
    "outcome_of",
    "spot_fields",
)

#: The global Spot ID (str).
SPOT_ID: Final = "spot_id"
#: The MeshName the Spot serves in (str).
MESH: Final = "mesh"
#: The incarnation's ObjectGeneration (int).
OBJECT_GENERATION: Final = "object_generation"
#: The operation kind (an :class:`Operation` value).
OPERATION: Final = "operation"
#: How the operation ended: a result (``created``, ``committed``...) or an error class name.
OUTCOME: Final = "outcome"
#: Seconds the operation took (float, wall clock).
DURATION: Final = "duration"
#: The NodeId that wrote the record.
NODE_ID: Final = "node_id"
#: What the store said when a call was resolved (a :class:`ResolveResult` value).
RESOLVE: Final = "resolve"
#: Whether the route cache answered (a :class:`CacheResult` value).
CACHE: Final = "cache"
#: A Message Follow event (a :class:`FollowEvent` value).
FOLLOW: Final = "follow"
#: The hop count of a followed message (int, 1..8).
FOLLOW_HOPS: Final = "follow_hops"
#: Why a message ended StaleRoute (a :class:`StaleReason` value).
STALE: Final = "stale"


class Operation(StrEnum):
    """The operation kinds records and metrics distinguish."""

    #: ``spots.create`` / ``spots.get_or_create`` (User Spot creation attempt).
    CREATE = "create"
    #: A first message with Instance intent building the Spot (target side).
    COLD_ACTIVATION = "cold_activation"
    #: ``spots.close``.
    CLOSE = "close"
    #: ``node.relocate`` (planned relocation, source side).
    RELOCATION = "relocation"
    #: A message sent on along a Message Follow route.
    FOLLOW = "follow"
    #: A one-way ``client.send``.
    SEND = "send"
    #: A ``client.request``.
    REQUEST = "request"


class CacheResult(StrEnum):
    """Whether the positive route cache named the Spot's owner."""

    HIT = "hit"
    MISS = "miss"


class ResolveResult(StrEnum):
    """What a call found when it resolved through the store."""

    LOCAL = "local"            # Ready here
    REMOTE = "remote"          # Ready on another node
    MISSING = "missing"        # no authority (NotFound, or cold activation with intent)
    CREATING = "creating"      # waited for a creation to end
    CLOSING = "closing"        # closing (StaleRoute, or waited with intent)


class FollowEvent(StrEnum):
    """A Message Follow event: a hop taken, or the message dropped (and why)."""

    HOP = "hop"
    #: The message names another ObjectGeneration than the route (InvalidOperation).
    DROP_GENERATION = "drop_generation"
    #: It names an owner generation newer than the route's (Unavailable).
    DROP_OWNER_GENERATION = "drop_owner_generation"
    #: It took :data:`~zlink_trio.runtime.mesh.message_follow.MAX_HOPS` hops already.
    DROP_MAX_HOPS = "drop_max_hops"
    #: It followed to a node that neither hosts the Spot nor has a route for it.
    DROP_NO_ROUTE = "drop_no_route"
    #: The new owner could not be reached (Unavailable; nothing resent).
    DROP_UNREACHABLE = "drop_unreachable"
    #: An activation envelope reached a node the Spot moved away from.
    DROP_ENVELOPE = "drop_envelope"


class StaleReason(StrEnum):
    """Why a message was classified stale (StaleRoute: it was not run)."""

    #: The store names an earlier lifecycle of this node as the owner.
    EARLIER_LIFECYCLE = "earlier_lifecycle"
    #: The store names this node, which runs no matching incarnation.
    NO_INCARNATION = "no_incarnation"
    #: The Spot is Closing and the call has no Instance intent.
    CLOSING = "closing"
    #: A command 39 addressed to another lifecycle than this one.
    WRONG_LIFECYCLE = "wrong_lifecycle"
    #: This node's lease deadline passed: it is no longer a valid owner.
    LEASE_EXPIRED = "lease_expired"
    #: The owner answered StaleRoute; the cached route was dropped (caller side).
    ANSWERED = "answered"


def spot_fields(spot_id: str, *, node_id: str | None = None, mesh: str | None = None,
                generation: int | None = None,
                operation: Operation | None = None) -> dict[str, object]:
    """The ``extra=`` of a record about one Spot (only the fields that are known)."""
    fields: dict[str, object] = {SPOT_ID: spot_id}
    if node_id is not None:
        fields[NODE_ID] = node_id
    if mesh is not None:
        fields[MESH] = mesh
    if generation is not None:
        fields[OBJECT_GENERATION] = generation
    if operation is not None:
        fields[OPERATION] = operation.value
    return fields


def outcome_of(exc: BaseException) -> str:
    """The outcome label of an operation that raised ``exc``: a ZLinkError's class name,
    ``cancelled`` or ``error`` (bounded: never a message or an ID)."""
    if isinstance(exc, ZLinkError):
        return type(exc).__name__
    return "cancelled" if isinstance(exc, trio.Cancelled) else "error"

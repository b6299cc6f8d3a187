"""The values the public API hands back: create, relocation and drain results, snapshots.

Theory of operation
-------------------
Every type a user receives from ``node.spots``, ``node.relocate`` / ``node.drain`` /
``node.ask_*``, ``node.statistics()`` and ``node.inspection`` lives here, once, as a
frozen ``attrs`` value or a ``StrEnum``; ``zlink_trio`` re-exports each under the same
name.  The coordinators that build them (``coordinators.create_operation``,
``coordinators.relocation``, ``coordinators.remote_create``,
``coordinators.remote_operation``) and the handles that return them (``node_handle``,
``inspection``) import them from here, so a result's shape never depends on which
coordinator produced it, and this module imports nothing of the runtime: only the core
values the results carry.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

import attrs

# At run time, not under TYPE_CHECKING: a program may resolve these annotations
# (``attrs.resolve_types``, a cattrs converter) to serialise a result.
from zlink_trio.core.identity import NodeRid  # noqa: TC001
from zlink_trio.core.records import SpotRef  # noqa: TC001

if TYPE_CHECKING:
    from statecharts.names import IncarnationState, NodeLifecycleState
    from zlink_trio.core.route_cache import RouteCacheStatistics

__all__ = (
    "CreateResult",
    "CreateState",
    "DrainResult",
    "HostedSpot",
    "NodeStatistics",
    "RelocationOutcome",
    "RelocationResult",
)


class CreateState(StrEnum):
    """How a Create / GetOrCreate ended."""

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


class RelocationOutcome(StrEnum):
    """How one ``node.relocate`` ended."""

    #: The Spot lives at the target now (same Spot ID and ObjectGeneration).
    COMMITTED = "committed"
    #: The move failed before relay-ready; the Spot stayed and serves at the source.
    ABORTED = "aborted"
    #: The Spot was not moved at all (Entry Spot, DisableRelocation, no target, ...).
    REFUSED = "refused"


@attrs.frozen(kw_only=True)
class RelocationResult:
    """The terminal result of ``node.relocate`` (and each entry of a ``DrainResult``)."""

    outcome: RelocationOutcome
    #: The Spot after the operation: at the target when COMMITTED, else where it was.
    ref: SpotRef
    #: Why it was aborted or refused (``None`` when committed).
    reason: str | None = None


@attrs.frozen(kw_only=True)
class DrainResult:
    """What ``node.drain`` moved and what it could not."""

    moved: list[RelocationResult]
    not_moved: list[RelocationResult]
    #: Results left out of the lists: a drain of another node whose report was too long
    #: to carry every result (``Node.ask_drain``), or, of a drain out of time, the Spots
    #: whose move never began beyond the first ``NOT_BEGUN_LISTED``
    #: (``runtime/coordinators/relocation.py``), still on the node; 0 otherwise.
    unlisted: int = 0


@attrs.frozen(kw_only=True)
class NodeStatistics:
    """A snapshot of one node (``node.statistics()``)."""

    node_id: str
    node_rid: NodeRid
    #: NodeLifecycle state id (``serving``, ``draining``, ``lease_lost``, ...) of the
    #: node's current lifecycle.
    state: NodeLifecycleState
    #: Local Ready incarnations.
    active_spots: int
    #: Local creations in flight (reserved, not yet Ready).
    activating: int
    lease_expires_at: float
    route_cache: RouteCacheStatistics
    #: The published endpoint (``ws://host:port``; ``local://`` without links).
    endpoint: str = "local://"
    #: Open authenticated links to other nodes, both directions.
    links: int = 0
    #: Requests sent to other nodes and not answered yet.
    pending_replies: int = 0
    #: The lifecycle lost its lease and the node is joining the Mesh again as a new one
    #: (``on_lease_lost="rejoin"``): a health check should wait, not restart it.
    rejoining: bool = False


@attrs.frozen(kw_only=True)
class HostedSpot:
    """One Spot incarnation a node hosts (``node.inspection.hosted_spot``)."""

    spot_id: str
    #: The incarnation's ObjectGeneration.
    generation: int
    #: Its Incarnation chart state id (``serving`` while it admits and runs turns;
    #: ``activating``, ``sealed``, ``closing`` ... otherwise).
    state: IncarnationState

"""One-line reports of the routing events: resolve results, Message Follow hops and
drops, stale classification -- a metric and, when its logger is enabled, a record.

Each function takes the reporting node's ID and recorder (``NodeState.node_id`` and
``NodeState.metrics``), counts the event on the recorder (a no-op without metrics) and
writes one record with the structured fields (``fields``) on the concern's logger:
resolve results at DEBUG on ``zlink_trio.runtime.calls``, follow hops at DEBUG and
drops at INFO on ``zlink_trio.runtime.follow``, stale classifications at INFO on
``zlink_trio.runtime.calls``.  The level check comes first, so a node with logging at
its default (WARNING) builds no record.  None of these runs on a route-cache hit.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from zlink_trio.runtime.observe import logs
from zlink_trio.runtime.observe.fields import (
    CACHE,
    FOLLOW,
    FOLLOW_HOPS,
    MESH,
    NODE_ID,
    OBJECT_GENERATION,
    OPERATION,
    OUTCOME,
    RESOLVE,
    SPOT_ID,
    STALE,
    CacheResult,
    FollowEvent,
    Operation,
)

if TYPE_CHECKING:
    from zlink_trio.runtime.observe.fields import ResolveResult, StaleReason
    from zlink_trio.runtime.observe.recorder import Recorder

__all__ = ("follow_event", "incarnation_closed", "resolved", "stale")


def resolved(node_id: str, spot_id: str, result: ResolveResult, *, mesh: str | None = None,
             generation: int | None = None) -> None:
    """A call resolved ``spot_id`` through the store (the route cache missed)."""
    if logs.CALLS.isEnabledFor(logging.DEBUG):
        logs.CALLS.debug("node %r: Spot %r resolved through the store: %s", node_id,
                         spot_id, result.value, extra={
                             NODE_ID: node_id, SPOT_ID: spot_id, MESH: mesh,
                             OBJECT_GENERATION: generation, RESOLVE: result.value,
                             CACHE: CacheResult.MISS.value})


def follow_event(node_id: str, metrics: Recorder, event: FollowEvent, spot_id: str,
                 generation: int | None, hops: int | None, why: str | None = None) -> None:
    """A message took a Message Follow hop (``hops``: its count) or was dropped."""
    metrics.follow(event)
    level = logging.DEBUG if event is FollowEvent.HOP else logging.INFO
    if logs.FOLLOW.isEnabledFor(level):
        logs.FOLLOW.log(level, "node %r: Message Follow %s for Spot %r (generation %s, hop "
                        "%s)%s", node_id, event.value, spot_id, generation, hops,
                        f": {why}" if why else "", extra={
                            NODE_ID: node_id, SPOT_ID: spot_id,
                            OBJECT_GENERATION: generation,
                            OPERATION: Operation.FOLLOW.value, FOLLOW: event.value,
                            FOLLOW_HOPS: hops})


def incarnation_closed(node_id: str, metrics: Recorder, reason: str, spot_id: str, mesh: str,
                       generation: int) -> None:
    """A local incarnation ended (``reason``: its ``CloseReason`` value)."""
    metrics.incarnation_closed(reason)
    if logs.SPOTS.isEnabledFor(logging.DEBUG):
        logs.SPOTS.debug("node %r: Spot %r (generation %d) ended: %s", node_id, spot_id,
                         generation, reason, extra={
                             NODE_ID: node_id, SPOT_ID: spot_id, MESH: mesh,
                             OBJECT_GENERATION: generation, OUTCOME: reason})


def stale(node_id: str, metrics: Recorder, reason: StaleReason, spot_id: str, *,
          generation: int | None = None, mesh: str | None = None) -> None:
    """A message to ``spot_id`` was classified stale (StaleRoute; it was not run)."""
    metrics.stale(reason)
    if logs.CALLS.isEnabledFor(logging.INFO):
        logs.CALLS.info("node %r: a message to Spot %r is stale (%s); it was not run",
                        node_id, spot_id, reason.value, extra={
                            NODE_ID: node_id, SPOT_ID: spot_id, MESH: mesh,
                            OBJECT_GENERATION: generation, STALE: reason.value})

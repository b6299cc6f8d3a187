"""Typed names of :class:`~statecharts.NodeLifecycle`.

Generated from the compiled charts: do not edit.
Regenerate with ``python -m statecharts render docs/statecharts``; CI's
``python -m statecharts check docs/statecharts`` fails when this module differs from
a fresh render.  See :mod:`statecharts._typed` for what the names are for.
"""

from __future__ import annotations

from typing import Final, NewType, final

from statecharts._compile import compile
from statecharts._typed import TypedChart
from statecharts.node_lifecycle import NodeLifecycle

__all__ = (
    "NODE_LIFECYCLE",
    "NodeLifecycleChart",
    "NodeLifecycleEvent",
    "NodeLifecycleEvents",
    "NodeLifecycleState",
    "NodeLifecycleStates",
    "NodeLifecycleTags",
)


NodeLifecycleState = NewType("NodeLifecycleState", str)
NodeLifecycleEvent = NewType("NodeLifecycleEvent", str)


@final
class NodeLifecycleStates:
    """The states of :class:`~statecharts.NodeLifecycle`, in declaration order."""

    __slots__ = ()

    starting: Final = NodeLifecycleState("starting")
    claimed: Final = NodeLifecycleState("claimed")
    serving: Final = NodeLifecycleState("serving")
    draining: Final = NodeLifecycleState("draining")
    lease_lost: Final = NodeLifecycleState("lease_lost")
    removed: Final = NodeLifecycleState("removed")
    startup_failed: Final = NodeLifecycleState("startup_failed")
    stopped: Final = NodeLifecycleState("stopped")


@final
class NodeLifecycleEvents:
    """The events of :class:`~statecharts.NodeLifecycle`, in declaration order."""

    __slots__ = ()

    configuration_invalid: Final = NodeLifecycleEvent("configuration_invalid")
    new_claim: Final = NodeLifecycleEvent("new_claim")
    claim_conflict: Final = NodeLifecycleEvent("claim_conflict")
    open_admission: Final = NodeLifecycleEvent("open_admission")
    renew: Final = NodeLifecycleEvent("renew")
    begin_drain: Final = NodeLifecycleEvent("begin_drain")
    remove: Final = NodeLifecycleEvent("remove")
    abandon: Final = NodeLifecycleEvent("abandon")
    lease_expired: Final = NodeLifecycleEvent("lease_expired")
    stop: Final = NodeLifecycleEvent("stop")


@final
class NodeLifecycleTags:
    """The tags of :class:`~statecharts.NodeLifecycle`: the states answering each question."""

    __slots__ = ()

    admits_work: Final[frozenset[NodeLifecycleState]] = frozenset((
        NodeLifecycleStates.serving,
    ))
    closed: Final[frozenset[NodeLifecycleState]] = frozenset((
        NodeLifecycleStates.removed,
        NodeLifecycleStates.startup_failed,
        NodeLifecycleStates.stopped,
    ))
    lease_lost: Final[frozenset[NodeLifecycleState]] = frozenset((
        NodeLifecycleStates.lease_lost,
        NodeLifecycleStates.stopped,
    ))


@final
class NodeLifecycleChart(TypedChart[NodeLifecycleState, NodeLifecycleEvent]):
    """:class:`~statecharts.NodeLifecycle`, compiled, with its typed names."""

    __slots__ = ()

    st: Final = NodeLifecycleStates()
    ev: Final = NodeLifecycleEvents()
    tags: Final = NodeLifecycleTags()


NODE_LIFECYCLE: Final = NodeLifecycleChart(compile(NodeLifecycle))

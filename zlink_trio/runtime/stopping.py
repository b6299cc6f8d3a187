"""How a node stops: the stop request, the signals that make one, the move before closing.

Theory of operation
-------------------
A lifecycle of ``open_node`` ends for one of two reasons: the application leaves the
``async with`` block -- normally, with an error, or because a ``stop_on`` signal ended
it -- or the lifecycle lost its lease. :class:`Stopping` is how the block's side tells
the task that runs the lifecycles (``runtime.node``) to stop, and how that task says
it is done:

- ``body`` is the cancel scope around the application's block: the first ``stop_on``
  signal cancels it, so the block ends where it waits, and the stop that follows
  counts as a normal one;
- :meth:`Stopping.request` is called once the block has ended, with ``graceful`` true
  when it ended normally (or by the signal): only such a stop moves Spots away;
- ``hurried`` is set by a second signal: no further move starts, and what has not
  moved closes at once;
- ``done`` is set by the lifecycle task when it has left the Mesh (always: also when it
  failed), so the block's side never waits on a task that is gone;
- ``starting`` is the cancel scope of a lifecycle that starts after a lost lease: a stop
  requested meanwhile cancels it (nothing serves yet, so nothing has to move).

:func:`move_spots_away` is the graceful part of a stop with ``on_stop="drain"``: when
another live node serves the types of the Spots this node hosts, it drains the node
(``node.drain``'s code, bounded by ``stop_drain_timeout``): each Spot moves by its
relocation policy -- ``PreserveStateWith`` with its state, ``RecreateOnRelocation`` to
be re-created there, ``DisableRelocation`` stays and is closed with the rest. With no
such node it moves nothing: the close that follows is the same as ``on_stop="close"``.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import attrs
import trio

from zlink_trio.core.errors import ZLinkError
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.placement import eligible_nodes
from zlink_trio.runtime.calls.deadlines import deadline_after
from zlink_trio.runtime.coordinators.placement import candidates
from zlink_trio.runtime.coordinators.relocation import moves_on_its_own
from zlink_trio.runtime.coordinators.remote_operation import drain_here
from zlink_trio.runtime.declaration.policies import DisableRelocation
from zlink_trio.runtime.declaration.spot_types import relocation_of
from zlink_trio.runtime.observe.logs import NODE as LOGGER

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.incarnation.incarnation import Incarnation
    from zlink_trio.runtime.options import LifecycleOptions

__all__ = ("Stopping", "move_spots_away", "watch_signals")


@attrs.define(eq=False)
class Stopping:
    """The stop of one ``open_node``: requested by the block's side, done by the node's."""

    #: The cancel scope around the application's ``async with`` block.
    body: trio.CancelScope = attrs.Factory(trio.CancelScope)
    #: Set once the block has ended: the lifecycle task leaves the Mesh.
    requested: trio.Event = attrs.Factory(trio.Event)
    #: Whether the block ended normally (or by a ``stop_on`` signal): move Spots first.
    graceful: bool = False
    #: Set by a second signal: start no further move, close what is left at once.
    hurried: trio.Event = attrs.Factory(trio.Event)
    #: Set by the lifecycle task once it has left the Mesh (also when it failed).
    done: trio.Event = attrs.Factory(trio.Event)
    #: The scope of a lifecycle that is starting after a lost lease: a stop cancels it
    #: (nothing serves yet, so there is nothing to drain).
    starting: trio.CancelScope | None = None

    def request(self, *, graceful: bool) -> None:
        """Stop the node (the first request decides whether it is graceful)."""
        if not self.requested.is_set():
            self.graceful = graceful
            self.requested.set()
            if self.starting is not None:
                self.starting.cancel()


async def watch_signals(received: AsyncIterator[int], stop: Stopping, node_id: str) -> None:
    """Turn the signals ``received`` into stops: the first ends the block, a second hurries.

    ``received`` is what ``trio.open_signal_receiver`` yields (an async iterator of
    signal numbers).
    """
    async for signum in received:
        name = signal.Signals(signum).name
        if not stop.body.cancel_called and not stop.requested.is_set():
            LOGGER.warning("node %r: %s received; stopping: its Spots move to the other "
                           "nodes that serve their types, then the rest closes (send it "
                           "again to close at once)", node_id, name)
            stop.body.cancel()
        elif not stop.hurried.is_set():
            LOGGER.warning("node %r: %s received again; no further Spot moves, closing at "
                           "once", node_id, name)
            stop.hurried.set()


def _may_move(rt: NodeRuntime, host: Incarnation) -> bool:
    """Whether a stop's move may take ``host``: not the Entry Spot, not a
    ``DisableRelocation`` type, and an Actor only as ``relocation.moves_on_its_own``
    says (a member of a User Spot here moves with it)."""
    kind = host.spot_type.kind
    if kind is SpotKind.ENTRY or isinstance(relocation_of(host.spot_type), DisableRelocation):
        return False
    if kind is SpotKind.ACTOR:
        membership = rt.memberships.get(host.spot_id)
        return membership is not None and moves_on_its_own(rt, membership)
    return True


async def _another_node_takes(rt: NodeRuntime) -> bool:
    """Whether another live node serves the type of a Spot here that may move."""
    kinds = {(host.mesh, host.spot_type.stable_type, host.spot_type.kind)
             for host in rt.catalog.hosts.values()
             if _may_move(rt, host)}
    if not kinds:
        return False
    others = [c for c in await candidates(rt) if c.node_rid != rt.node_rid]
    for mesh, stable_type, kind in kinds:
        try:
            eligible_nodes(others, mesh, stable_type, kind)
        except ZLinkError:
            continue
        return True
    return False


async def move_spots_away(rt: NodeRuntime, options: LifecycleOptions, stop: Stopping) -> None:
    """The graceful part of a stop: drain this node to the others within one deadline,
    ``stop_drain_timeout`` from now (module doc). Never raises a ZLinkError: what did not
    move closes next."""
    if options.on_stop != "drain" or not rt.serving or stop.hurried.is_set():
        return
    deadline = deadline_after(options.stop_drain_timeout)
    takes = False
    try:
        with trio.move_on_at(deadline.at):
            takes = await _another_node_takes(rt)
    except ZLinkError as exc:
        LOGGER.warning("node %r: could not read which nodes could take its Spots (%s); they "
                       "close instead of moving", rt.node_id, exc.message)
        return
    if not takes:
        if rt.catalog.hosts:
            LOGGER.info("node %r: no other live node serves the types of its Spots (or none "
                        "answered within stop_drain_timeout); they close", rt.node_id)
        return
    try:
        result = await drain_here(rt, deadline, halt=stop.hurried)
    except ZLinkError as exc:
        LOGGER.warning("node %r: moving its Spots away failed (%s); what did not move "
                       "closes", rt.node_id, exc.message)
        return
    left = sum(host.spot_type.kind is not SpotKind.ENTRY for host in rt.catalog.hosts.values())
    LOGGER.info("node %r: moved %d Spot(s) to other nodes before stopping; %d did not move "
                "and close", rt.node_id, len(result.moved), left)

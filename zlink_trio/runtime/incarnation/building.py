"""Building an incarnation's instance: the factory and its activation hooks.

Theory of operation
-------------------
A coordinator that won a reservation builds the host's instance before CommitReady:
:func:`build` runs the factory (``app_calls.construct``), tells the observers
(``runtime.observers``), passes the ``in_factory`` crash point, then ``on_activate``
(and ``on_create`` for a User Spot that is created, not relocated); the timers
registered so far are the activation's (``HostTimers.mark_activation``).  For a
type whose hooks are synchronous (``app_calls.activates_synchronously``) and no crash
point armed, :func:`build` ends without suspending.  When it raises or the result is
a Reject, the coordinator runs :func:`activation_failed`: ``on_close(ACTIVATION_FAILED)``
once if constructed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from zlink_trio.core.identity import SpotKind
from zlink_trio.runtime import observers
from zlink_trio.runtime.charts import INCARNATION, step
from zlink_trio.runtime.coordinators import crash_points
from zlink_trio.runtime.declaration.policies import CloseReason
from zlink_trio.runtime.incarnation.app_calls import activate, construct, run_on_close
from zlink_trio.runtime.incarnation.handler_turn import TurnHost

if TYPE_CHECKING:
    from statecharts.names import IncarnationState
    from zlink_trio.runtime.incarnation.timers import HostTimers

__all__ = ("BuildHost", "activation_failed", "build")


class BuildHost(TurnHost, Protocol):
    """What building reads and sets of its host (a :class:`~.host.Host`)."""

    @property
    def ctx(self) -> object: ...
    @property
    def timers(self) -> HostTimers: ...

    state: IncarnationState
    instance: object | None


def _construct(host: BuildHost, request: object | None) -> object:
    instance = host.instance = construct(host.spot_type, host.ctx, request)
    if observers.OBSERVERS:
        for observer in observers.OBSERVERS:
            observer.factory_ran(host.rt.node_id, host.spot_id, host.generation,
                                 host.spot_type.stable_type)
    return instance


async def build(host: BuildHost, request: object | None, *, relocated: bool) -> object | None:
    """Factory, crash point, hooks; what ``on_create`` returned (see ``Host.build``)."""
    instance = _construct(host, request)
    if crash_points.ARMED:
        crash_points.point("create" if host.spot_type.kind is SpotKind.USER else "cold",
                           "in_factory", host.rt.node_id)
    result = await activate(host.spot_type, instance, request, create=not relocated)
    host.timers.mark_activation()
    return result


async def activation_failed(host: BuildHost) -> None:
    """``on_close(ACTIVATION_FAILED)`` once if constructed; the host is disposed."""
    host.state = step(INCARNATION, host.state, INCARNATION.ev.activation_failed)
    host.timers.cancel_all()
    await run_on_close(host.spot_type, host.instance, host.spot_id,
                       CloseReason.ACTIVATION_FAILED)

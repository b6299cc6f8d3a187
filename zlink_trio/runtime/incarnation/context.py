"""SpotContext: what a Spot instance gets from the runtime, and TimerHandle.

A Spot's constructor receives its :class:`SpotContext`.  Through it the Spot learns who
it is (``spot_id``, ``generation``, ``ref``), calls other Spots (``client``), registers
timers that run as turns of the Spot itself (``start_timer``), and -- for Instance
Spots -- closes itself after the current turn (``close``).  The context is only valid
for its incarnation: once the incarnation is closing, new timers are refused.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Protocol

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import SpotRef

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.core.timers import TimerId
    from zlink_trio.runtime.calls.client import SpotClient
    from zlink_trio.runtime.declaration.spot_types import SpotType
    from zlink_trio.runtime.state import NodeState

__all__ = ("ContextHost", "SpotContext", "TimerHandle")


class ContextHost(Protocol):
    """What a context reads from and asks of its incarnation (the node's ``Host``)."""

    @property
    def rt(self) -> NodeState:
        """The node the incarnation runs on."""
        ...

    @property
    def spot_type(self) -> SpotType:
        """The incarnation's Spot type."""
        ...

    @property
    def spot_id(self) -> str:
        """The global Spot ID."""
        ...

    @property
    def generation(self) -> int:
        """The incarnation's ObjectGeneration."""
        ...

    @property
    def mesh(self) -> str:
        """The Mesh the incarnation lives in."""
        ...

    def has_timer(self, timer_id: TimerId) -> bool:
        """Whether ``timer_id`` is still registered."""
        ...

    def add_timer(self, delay: float, callback: Callable[[], Awaitable[object]],
                  period: float | None) -> TimerId:
        """Register a timer; see :meth:`SpotContext.start_timer`."""
        ...

    def cancel_timer(self, timer_id: TimerId) -> bool:
        """Unregister a timer; ``True`` if it was registered."""
        ...

    def request_self_close(self) -> None:
        """Begin the close after the current turn."""
        ...


class TimerHandle:
    """A timer registered with :meth:`SpotContext.start_timer`; cancel it with :meth:`cancel`."""

    __slots__ = ("_host", "_timer_id")

    def __init__(self, host: ContextHost, timer_id: TimerId) -> None:
        self._host = host
        self._timer_id = timer_id

    @property
    def active(self) -> bool:
        """Whether the timer is still registered (a fired one-shot or cancelled timer is not)."""
        return self._host.has_timer(self._timer_id)

    def cancel(self) -> bool:
        """Unregister the timer; ``True`` if it was registered. Idempotent, never raises.

        A tick already queued as a turn still runs; no further tick is queued.
        """
        return self._host.cancel_timer(self._timer_id)


class SpotContext:
    """The runtime's face towards one Spot incarnation; passed to the Spot's constructor."""

    __slots__ = ("_host",)

    def __init__(self, host: ContextHost) -> None:
        self._host = host

    @property
    def spot_id(self) -> str:
        """The global Spot ID."""
        return self._host.spot_id

    @property
    def generation(self) -> int:
        """This incarnation's ObjectGeneration."""
        return self._host.generation

    @property
    def stable_type(self) -> str:
        """The Spot's stable type."""
        return self._host.spot_type.stable_type

    @property
    def kind(self) -> SpotKind:
        """USER or INSTANCE."""
        return self._host.spot_type.kind

    @property
    def ref(self) -> SpotRef:
        """The SpotRef of this incarnation at this node."""
        host = self._host
        return SpotRef(spot_id=host.spot_id, generation=host.generation, mesh=host.mesh,
                       node_rid=host.rt.node_rid)

    @property
    def client(self) -> SpotClient:
        """The node's SpotClient, for outbound calls.

        Do not ``request`` the Spot itself from its own handler: it runs one turn at a
        time, so the request waits for the running turn and ends at its deadline.
        """
        return self._host.rt.client

    def start_timer(
        self,
        delay: float,
        callback: Callable[[], Awaitable[object]],
        *,
        period: float | None = None,
    ) -> TimerHandle:
        """Run ``await callback()`` as a turn of this Spot after ``delay`` s, then every ``period``.

        ``callback`` is an ``async def`` method (or other async callable without
        arguments); it runs on the application lane, one turn at a time with the
        handlers. Periodic ticks missed while the Spot was busy are skipped, not
        burst. Every timer is cancelled when the incarnation closes. Raises
        :class:`InvalidOperation` for a callback that is not async, bad numbers, or
        an incarnation that is closing; :class:`CapacityExceeded` beyond 1,024 timers.
        """
        if not callable(callback) or not (
            inspect.iscoroutinefunction(callback)
            or inspect.iscoroutinefunction(getattr(callback, "__call__", None))  # noqa: B004
        ):
            raise InvalidOperation(
                f"start_timer needs an async callable without arguments, got {callback!r}; "
                "pass an 'async def' method of the Spot, e.g. ctx.start_timer(5, self.tick)"
            )
        return TimerHandle(self._host, self._host.add_timer(delay, callback, period))

    def close(self) -> None:
        """Close this Instance Spot after the current turn (06 §7), with reason CLOSED.

        Turns accepted before the close still run; ``on_close`` runs once; then the
        location is released and the next message with Instance intent activates a
        new generation. Idempotent. Raises :class:`InvalidOperation` for a User Spot
        (close it with ``node.spots.close(ref)``).
        """
        if self._host.spot_type.kind is not SpotKind.INSTANCE:
            raise InvalidOperation(
                f"{self.stable_type!r} is a User Spot; close it with node.spots.close(ref) "
                "(only Instance Spots close themselves from their context)"
            )
        self._host.request_self_close()

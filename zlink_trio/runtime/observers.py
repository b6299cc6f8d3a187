"""Observing what a node does to its Spots: factory runs, handler turns, closes.

Theory of operation
-------------------
:data:`OBSERVERS` is a list of :class:`SpotObserver` objects that every
:class:`~zlink_trio.runtime.incarnation.incarnation.Incarnation` tells, in order, when the
Spot class was constructed (a factory run), when a handler turn begins and ends, when
``on_close`` ran, and when its durable state was loaded or written (``ctx.state``).
It exists for the public test kit (:mod:`zlink_trio.testing`'s recorder and race
model); it is empty in production, where each hook costs one truthiness test.  Like
:data:`zlink_trio.runtime.charts.TRACE`, it is process-wide: the test kit installs an
observer for the duration of a test and removes it after.

An observer may also hold a turn back before its handler runs (:meth:`SpotObserver.
before_turn` is awaited inside the turn, after the message left its lane), which is how
a race test makes a Spot sit busy with work queued behind it without the Spot's own
code knowing.  Observers must not raise: an exception from one fails the turn it
observed, as a bug in the test would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from zlink_trio.runtime.declaration.policies import CloseReason

__all__ = ("OBSERVERS", "SpotObserver")


class SpotObserver(Protocol):
    """What a node reports about its Spots (all calls in the Trio thread)."""

    def factory_ran(self, node_id: str, spot_id: str, generation: int,
                    stable_type: str) -> None:
        """The Spot class of ``spot_id``'s incarnation ``generation`` was constructed."""

    async def before_turn(self, node_id: str, spot_id: str, generation: int) -> None:
        """A handler turn is about to run; return to let it run."""

    def turn_began(self, node_id: str, spot_id: str, generation: int, handler: str,
                   message: object) -> None:
        """The handler ``handler`` starts on ``message``."""

    def turn_ended(self, node_id: str, spot_id: str, generation: int, handler: str,
                   message: object, result: object, error: BaseException | None) -> None:
        """That handler returned ``result`` (or raised ``error``)."""

    def closed(self, node_id: str, spot_id: str, generation: int,
               reason: CloseReason) -> None:
        """``on_close(reason)`` ran (or would have: the type may define none)."""

    def state_loaded(self, node_id: str, spot_id: str, generation: int, durable: object,
                     value: object, version: int) -> None:
        """The incarnation read its durable state before its factory ran: ``value`` at
        ``version`` (``None`` and 0: none stored); ``durable`` is its ``ctx.state``."""

    def state_written(self, node_id: str, spot_id: str, generation: int, durable: object,
                      value: object, version: int | None,
                      error: BaseException | None) -> None:
        """A save of ``value`` (``None``: a clear) through ``durable`` ended: stored at
        ``version`` (0 after a clear), or refused with ``error`` (``version`` None)."""


#: The observers every node tells; empty in production.
OBSERVERS: list[SpotObserver] = []

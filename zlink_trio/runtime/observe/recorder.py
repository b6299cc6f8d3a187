"""``Recorder``: what the runtime reports to metrics; the base class records nothing.

Every node holds one recorder (``NodeState.metrics``).  Without
``open_node(metrics=...)`` it is :data:`NO_METRICS`, an instance of the base class:
each report is one call to an empty method, and the paths that would time something
first test :attr:`Recorder.enabled`, so a node without metrics reads no clock for them.
:class:`~zlink_trio.runtime.observe.metrics.MetricsRecorder` keeps the counts.

Gauges (lane depth, links, route-cache counters) are not reported here: they are read
from the node's own state when a scrape collects them (``metrics.NodeSample``), which
costs nothing between scrapes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Final

if TYPE_CHECKING:
    from zlink_trio.runtime.observe.fields import FollowEvent, Operation, StaleReason

__all__ = ("NO_METRICS", "Recorder")


class Recorder:
    """The reports of one node's runtime; this base class ignores them all."""

    __slots__ = ()

    #: Whether reports are kept: callers skip timing and classifying when ``False``.
    enabled: ClassVar[bool] = False

    def request(self, kind: Operation, outcome: str, seconds: float) -> None:
        """A ``send`` or ``request`` of this node's clients ended with ``outcome``."""

    def operation(self, kind: Operation, outcome: str, seconds: float) -> None:
        """A create, cold activation, close or relocation ended with ``outcome``."""

    def follow(self, event: FollowEvent) -> None:
        """A message took a Message Follow hop or was dropped (``event`` says which)."""

    def stale(self, reason: StaleReason) -> None:
        """A message was classified stale (it ended StaleRoute without running)."""

    def incarnation_closed(self, reason: str) -> None:
        """A local incarnation ended (``reason``: a ``CloseReason`` value)."""

    def store_call(self, backend: str, part: str, method: str, seconds: float,
                   error: str | None) -> None:
        """One store call returned (``error`` is ``None``) or raised (its class name)."""

    def reminder(self, outcome: str, lateness: float) -> None:
        """A delivery of a due reminder ended (``outcome``: delivered, handler_error,
        dropped, or retry: it is delivered again later), ``lateness`` seconds after its
        due on the store's clock."""


#: The recorder of a node without metrics.
NO_METRICS: Final = Recorder()

"""``observe_operation``: time, count and log one create, activation, close or relocation.

Used as ``with observe_operation(rt.node_id, rt.metrics, Operation.CREATE, spot_id, mesh)
as op:``; the
block sets :attr:`ObservedOperation.outcome` (and the generation once known) on
success, and an exception sets it to the error's class name (``fields.outcome_of``).
On exit the node's recorder counts it and, when the operation's logger is enabled
for DEBUG, one record with the structured fields is written (``docs/observability.md``).
On a node that traces (``observe.tracing``) it is also the span ``zlink.<kind>`` --
child of ``parent``, or of the current span -- with the same fields as attributes;
:meth:`ObservedOperation.step` makes a child span of one step, and
:meth:`ObservedOperation.event` adds a span event (a chart step). Operations are rare
next to messages, so this costs nothing a message pays.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Final

from zlink_trio.runtime.observe import logs
from zlink_trio.runtime.observe.fields import (
    DURATION,
    MESH,
    NODE_ID,
    OBJECT_GENERATION,
    OPERATION,
    OUTCOME,
    SPOT_ID,
    Operation,
    outcome_of,
)
from zlink_trio.runtime.observe.tracing import NO_TRACING, OtelTracing

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from types import TracebackType

    from opentelemetry.trace import Span

    from zlink_trio.runtime.observe.recorder import Recorder
    from zlink_trio.runtime.observe.tracing import Tracing

__all__ = ("ObservedOperation", "observe_operation")

_LOGGERS: Final = {
    Operation.CREATE: logs.CREATE,
    Operation.COLD_ACTIVATION: logs.ACTIVATION,
    Operation.CLOSE: logs.CLOSE,
    Operation.RELOCATION: logs.RELOCATION,
    Operation.FOLLOW: logs.FOLLOW,
    Operation.SEND: logs.CALLS,
    Operation.REQUEST: logs.CALLS,
}


class ObservedOperation:
    """One operation being observed; see :func:`observe_operation`."""

    __slots__ = ("_failure", "_metrics", "_node_id", "_parent", "_span", "_started", "_tracing",
                 "generation", "kind", "mesh", "outcome", "spot_id")

    def __init__(self, node_id: str, metrics: Recorder, kind: Operation, spot_id: str | None,
                 mesh: str | None, tracing: Tracing = NO_TRACING,
                 parent: object | None = None) -> None:
        self._node_id = node_id
        self._metrics = metrics
        self._tracing = tracing
        self._parent = parent
        self._span: Span | None = None
        self._failure: BaseException | None = None
        self.kind: Final = kind
        self.spot_id = spot_id
        self.mesh = mesh
        #: The ObjectGeneration, once the operation knows it.
        self.generation: int | None = None
        #: How it ended; ``ok`` unless the block says more (or raises).
        self.outcome = "ok"
        self._started = 0.0

    def failed(self, error: BaseException) -> None:
        """The operation ended with ``error`` without raising it (reported elsewhere)."""
        self.outcome = outcome_of(error)
        self._failure = error

    def step(self, name: str) -> AbstractContextManager[object]:
        """A context manager around one step of the operation: span ``name``, a child of
        the operation's, on a node that traces (else it does nothing)."""
        return self._tracing.span(name, self._tracing.context_with(self._span))

    def event(self, name: str) -> None:
        """Add event ``name`` (a chart step) to the operation's span, if it has one."""
        if self._span is not None:
            self._span.add_event(name)

    def __enter__(self) -> ObservedOperation:
        self._started = time.perf_counter()
        tracing = self._tracing
        if isinstance(tracing, OtelTracing):
            attributes: dict[str, str] = {"zlink.operation": self.kind.value}
            if self.spot_id is not None:
                attributes["zlink.spot_id"] = self.spot_id
            if self.mesh is not None:
                attributes["zlink.mesh"] = self.mesh
            self._span = tracing.start(f"zlink.{self.kind.value}", self._parent,
                                       attributes=dict(attributes))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None:
            self.outcome = outcome_of(exc)
        seconds = time.perf_counter() - self._started
        span = self._span
        if span is not None:
            assert isinstance(self._tracing, OtelTracing)
            if self.mesh is not None:
                span.set_attribute("zlink.mesh", self.mesh)
            if self.generation is not None:
                span.set_attribute("zlink.generation", self.generation)
            error = exc if exc is not None else self._failure
            if error is None and self.outcome != "ok":  # (an outcome the block set)
                span.set_attribute("zlink.outcome", self.outcome)
                span.end()
            else:
                self._tracing.finish(span, error)
        node_id = self._node_id
        self._metrics.operation(self.kind, self.outcome, seconds)
        log = _LOGGERS[self.kind]
        if log.isEnabledFor(logging.DEBUG):
            log.debug("node %r: %s of Spot %r (mesh %r, generation %s): %s in %.3f ms",
                      node_id, self.kind.value, self.spot_id, self.mesh, self.generation,
                      self.outcome, seconds * 1000, extra={
                          NODE_ID: node_id, OPERATION: self.kind.value,
                          SPOT_ID: self.spot_id, MESH: self.mesh,
                          OBJECT_GENERATION: self.generation, OUTCOME: self.outcome,
                          DURATION: seconds})


def observe_operation(node_id: str, metrics: Recorder, kind: Operation, spot_id: str | None,
                      mesh: str | None = None, tracing: Tracing = NO_TRACING,
                      parent: object | None = None) -> ObservedOperation:
    """A context manager observing one operation of ``kind`` on node ``node_id``, counted
    on its recorder ``metrics`` and, on a node that traces, a span of ``tracing``."""
    return ObservedOperation(node_id, metrics, kind, spot_id, mesh, tracing, parent)

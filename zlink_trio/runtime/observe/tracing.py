"""``Tracing``: OpenTelemetry spans of a node's calls and operations; the base class makes none.

Theory of operation
-------------------
Every node holds one (``NodeState.tracing``). Without the ``otel`` extra, or without a
tracer provider, it is :data:`NO_TRACING`, an instance of the base class: the router is
not wrapped (``runtime.calls.traced``), deliveries carry no trace context, and the
paths that would start a span test :attr:`Tracing.enabled` or a ``trace`` field that
stays ``None`` -- so a node that traces nothing pays nothing per call.
:func:`tracing_for` decides at ``open_node`` (``ObservabilityOptions.tracing``):
``None`` traces with the global tracer provider when opentelemetry-api is installed
and one was set (``opentelemetry.trace.set_tracer_provider``) before the node opened;
``False`` never traces; a ``TracerProvider`` traces with that one.

:class:`OtelTracing` makes the spans (names, kinds and attributes in
``docs/observability.md``, "Traces"):

- ``zlink.request`` / ``zlink.send`` around a call of ``node.client`` or ``ctx.client``
  (kind CLIENT / PRODUCER), child of the caller's current span;
- ``zlink.resolve`` when the call's route was not cached;
- ``zlink.cold_activation``, ``zlink.create``, ``zlink.close``, ``zlink.relocation``
  around those operations (``observe.operations``), with ``zlink.reserve``,
  ``zlink.factory`` and ``zlink.commit`` inside an activation and ``zlink.seal``,
  ``zlink.capture`` and ``zlink.transfer`` inside a move, whose chart steps are also
  span events;
- ``zlink.handle`` around the handler turn (kind SERVER for a request, CONSUMER for a
  one-way send), current while the handler runs, so that the calls it makes are its
  children;
- ``zlink.follow`` for each Message Follow hop a relaying node sends.

The trace context crosses nodes as command 39's metadata (``wire.call_metadata``:
the W3C ``traceparent`` and ``tracestate`` fields), written when a traced call leaves
its node, kept by relays and activation envelopes, and read by the node that runs the
handler -- so a request from node A to a Spot on node B is one trace, B's
``zlink.handle`` a child of A's ``zlink.request``. Attributes: ``zlink.node_id``,
``zlink.mesh``, ``zlink.spot_id``, ``zlink.spot_type``, ``zlink.generation``,
``zlink.message`` (the message's class), ``zlink.handler``, ``zlink.outcome`` (``ok``
or ``fields.outcome_of``'s label) and ``zlink.follow.hops``. A span that ends with an
error has status ERROR; a cancellation is not recorded as an exception.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, ClassVar, Final

from zlink_trio.core.errors import InvalidConfiguration
from zlink_trio.runtime.observe.fields import outcome_of
from zlink_trio.wire.call_metadata import decode_call_metadata, encode_call_metadata

if TYPE_CHECKING:
    from collections.abc import Iterator
    from contextlib import AbstractContextManager

    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanKind, Tracer
    from opentelemetry.util.types import AttributeValue

__all__ = ("NO_TRACING", "OtelTracing", "Tracing", "tracing_for")

#: The instrumentation scope of every span.
SCOPE: Final = "zlink_trio"
#: What a disabled span context manager yields (nothing to set attributes on).
_NO_SPAN: Final = nullcontext(None)


class Tracing:
    """The spans of one node's runtime; this base class makes none."""

    __slots__ = ()

    #: Whether spans are made: callers skip building trace contexts when ``False``.
    enabled: ClassVar[bool] = False

    def span(self, name: str, parent: object | None, *, kind: str = "internal",
             attributes: dict[str, AttributeValue] | None = None, current: bool = False,
             ) -> AbstractContextManager[Span | None]:
        """A context manager around span ``name``, child of ``parent`` (a context from
        :meth:`context_of` / :meth:`context_with`; ``None``: the current one). ``kind``
        is ``internal``, ``client``, ``server``, ``producer`` or ``consumer``. With
        ``current`` the span is the current one inside the block. It yields the span
        (``None`` here) and ends it with the block, its outcome set."""
        return _NO_SPAN

    def context_with(self, span: object | None) -> object | None:
        """The context whose current span is ``span`` (``None`` for ``None``)."""
        return None

    def metadata_of(self, context: object) -> bytes | None:
        """Command 39 metadata carrying ``context`` (W3C trace context)."""
        return None

    def context_of(self, metadata: bytes) -> object | None:
        """The trace context command 39 ``metadata`` carries; ``None`` when it carries
        none, or none this node can read (the call still runs: a trace is advisory)."""
        return None


#: The tracing of a node that traces nothing.
NO_TRACING: Final = Tracing()


class OtelTracing(Tracing):
    """Spans made with an OpenTelemetry tracer (see the module docstring)."""

    __slots__ = ("_kinds", "_node_id", "_propagator", "_status", "_trace", "_tracer")

    enabled: ClassVar[bool] = True

    def __init__(self, tracer: Tracer, node_id: str) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._tracer = tracer
        self._node_id = node_id
        self._trace = trace
        self._propagator = TraceContextTextMapPropagator()
        self._status = (Status, StatusCode.ERROR)
        self._kinds: dict[str, SpanKind] = {
            "internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT,
            "server": SpanKind.SERVER, "producer": SpanKind.PRODUCER,
            "consumer": SpanKind.CONSUMER}

    def start(self, name: str, parent: object | None, *, kind: str = "internal",
              attributes: dict[str, AttributeValue] | None = None) -> Span:
        """Start span ``name`` (child of ``parent``, or of the current span); the caller
        ends it (:meth:`finish`)."""
        fields: dict[str, AttributeValue] = {"zlink.node_id": self._node_id}
        if attributes:
            fields.update(attributes)
        return self._tracer.start_span(name, context=parent,  # type: ignore[arg-type]
                                       kind=self._kinds[kind], attributes=fields,
                                       record_exception=False,
                                       set_status_on_exception=False)

    def finish(self, span: Span, error: BaseException | None) -> None:
        """End ``span`` with outcome ``ok``, or ``error``'s (recorded, status ERROR; a
        cancellation is an outcome, not an error)."""
        if error is None:
            span.set_attribute("zlink.outcome", "ok")
        else:
            outcome = outcome_of(error)
            span.set_attribute("zlink.outcome", outcome)
            if outcome != "cancelled":
                status, code = self._status
                span.record_exception(error)
                span.set_status(status(code, f"{type(error).__name__}: {error}"))
        span.end()

    @contextmanager
    def _span(self, name: str, parent: object | None, kind: str,
              attributes: dict[str, AttributeValue] | None, current: bool,
              ) -> Iterator[Span | None]:
        span = self.start(name, parent, kind=kind, attributes=attributes)
        try:
            if current:
                with self._trace.use_span(span, end_on_exit=False, record_exception=False,
                                          set_status_on_exception=False):
                    yield span
            else:
                yield span
        except BaseException as exc:
            self.finish(span, exc)
            raise
        self.finish(span, None)

    def span(self, name: str, parent: object | None, *, kind: str = "internal",
             attributes: dict[str, AttributeValue] | None = None, current: bool = False,
             ) -> AbstractContextManager[Span | None]:
        """See :meth:`Tracing.span`."""
        return self._span(name, parent, kind, attributes, current)

    def context_with(self, span: object | None) -> object | None:
        """See :meth:`Tracing.context_with`."""
        if span is None:
            return None
        return self._trace.set_span_in_context(span)  # type: ignore[arg-type]

    def metadata_of(self, context: object) -> bytes | None:
        """See :meth:`Tracing.metadata_of`."""
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier, context=context)  # type: ignore[arg-type]
        if not carrier:
            return None
        try:
            return encode_call_metadata(carrier)
        except ValueError:  # (a tracestate no metadata field can hold: send none)
            return None

    def context_of(self, metadata: bytes) -> Context | None:
        """See :meth:`Tracing.context_of`."""
        try:
            fields = decode_call_metadata(metadata)
        except ValueError:
            return None
        if "traceparent" not in fields:
            return None
        return self._propagator.extract(fields)


def tracing_for(option: object, node_id: str) -> Tracing:
    """The tracing of node ``node_id`` for ``ObservabilityOptions.tracing`` (see the
    module docstring); InvalidConfiguration for a value that cannot trace."""
    if option is False:
        return NO_TRACING
    try:
        from opentelemetry import trace
    except ImportError:
        if option is None:
            return NO_TRACING
        raise InvalidConfiguration(
            "tracing= was given but opentelemetry-api is not installed; install "
            "zlink-trio[otel], or leave tracing out") from None
    if option is None:
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            return NO_TRACING  # no provider was set: every span would be dropped
    elif isinstance(option, trace.TracerProvider):
        provider = option
    else:
        raise InvalidConfiguration(
            f"tracing must be None (the global tracer provider, if one is set), False or "
            f"an opentelemetry.trace.TracerProvider, got {type(option).__name__}")
    return OtelTracing(provider.get_tracer(SCOPE), node_id)

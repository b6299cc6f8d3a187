"""``open_node``'s metrics options: validated first, then bound, attached and served.

:class:`ObservabilityOptions` (``open_node(observability=...)``, or its fields
``metrics=`` / ``metrics_port=`` / ``metrics_host=`` as keywords) checks its values when
it is built, before the store is touched (:class:`InvalidConfiguration`, nothing
written), and imports prometheus-client only when ``metrics`` or ``metrics_port`` is
given -- a node without metrics never imports it.  :func:`metrics_settings` then picks
the registry (the node's own when only a port is given) and claims the ``zlink_``
names in it.  :func:`metrics_listeners` binds the exposition port (before the
node's claim, so a port in use writes nothing); :func:`start_metrics` gives the running
node its :class:`~.metrics.MetricsRecorder` and adds it to the registry.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs

from zlink_trio.core.errors import InvalidConfiguration
from zlink_trio.runtime.observe.metrics import MetricsRecorder
from zlink_trio.store.timed import backend_of, timed_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from types import ModuleType

    import trio
    from prometheus_client.registry import CollectorRegistry

    from zlink_trio.runtime.observe.metrics import NodeSample
    from zlink_trio.store import Store

__all__ = ("MetricsSettings", "ObservabilityOptions", "metrics_listeners", "metrics_settings",
           "new_recorder", "serve_metrics_on", "start_metrics", "timed")

_MISSING = ("open_node(metrics=..., metrics_port=...) needs prometheus-client, which is not "
            "installed; install it with `pip install 'zlink-trio[metrics]'`, or leave both "
            "unset")


@attrs.frozen
class MetricsSettings:
    """The validated metrics options of one node."""

    registry: CollectorRegistry
    host: str
    port: int | None


def _prometheus() -> ModuleType:
    try:
        from zlink_trio.runtime.observe import prometheus
    except ImportError as exc:  # pragma: no cover - prometheus-client is a test dependency
        raise InvalidConfiguration(_MISSING) from exc
    return prometheus


@attrs.frozen(kw_only=True)
class ObservabilityOptions:
    """Where a node's Prometheus metrics go (``open_node(observability=...)``).

    ``metrics`` is a ``prometheus_client.CollectorRegistry`` the node's series are
    collected in while it runs, each labelled ``node_id`` (several nodes may share one
    registry); without it nothing is recorded and prometheus-client is not imported.
    ``metrics_port`` (0: any free port) serves the registry -- a registry of the node's
    own when ``metrics`` is not given -- as ``GET /metrics`` on ``metrics_host``
    (loopback by default) for the node's lifetime. Raises
    :class:`InvalidConfiguration` for a value that cannot work, or when
    prometheus-client (the ``metrics`` extra) is not installed.

    ``tracing`` says where the node's OpenTelemetry spans go (``observe.tracing``):
    ``None`` (the default) the global tracer provider when opentelemetry-api (the
    ``otel`` extra) is installed and one was set before the node opened, else nowhere;
    ``False`` nowhere; an ``opentelemetry.trace.TracerProvider`` that one.
    """

    metrics: CollectorRegistry | None = None
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    tracing: object = None

    def __attrs_post_init__(self) -> None:
        metrics, port, host = self.metrics, self.metrics_port, self.metrics_host
        if metrics is None and port is None:
            return
        prometheus = _prometheus()
        if metrics is not None and not isinstance(metrics, prometheus.CollectorRegistry):
            raise InvalidConfiguration(
                f"metrics must be a prometheus_client.CollectorRegistry (e.g. "
                f"prometheus_client.REGISTRY), got {type(metrics).__name__}"
            )
        if port is not None and (type(port) is not int or not 0 <= port <= 65535):
            raise InvalidConfiguration(
                f"metrics_port must be an int in 0..65535 (0: any free port), got {port!r}"
            )
        if not isinstance(host, str) or not host:
            raise InvalidConfiguration(
                f"metrics_host must be a host name or address, got {host!r}"
            )


def metrics_settings(options: ObservabilityOptions) -> MetricsSettings | None:
    """``None`` when neither ``metrics`` nor ``metrics_port`` is given; else the registry
    (a new one of the node's own for a port without ``metrics``), host and port.

    Raises :class:`InvalidConfiguration` when the registry already has a collector using
    a ``zlink_`` metric name.
    """
    if options.metrics is None and options.metrics_port is None:
        return None
    prometheus = _prometheus()
    registry = prometheus.new_registry() if options.metrics is None else options.metrics
    try:
        prometheus.hub_of(registry)
    except ValueError as exc:
        raise InvalidConfiguration(
            f"metrics: the registry already has a collector using a zlink_ metric name "
            f"({exc}); pass a registry of its own"
        ) from exc
    return MetricsSettings(registry, options.metrics_host, options.metrics_port)


@asynccontextmanager
async def metrics_listeners(settings: MetricsSettings | None
                            ) -> AsyncIterator[list[trio.SocketListener] | None]:
    """The bound exposition listeners, or ``None`` without ``metrics_port``."""
    if settings is None or settings.port is None:
        yield None
        return
    from zlink_trio.runtime.observe.exposition import bind_metrics

    async with bind_metrics(settings.host, settings.port) as listeners:
        yield listeners


def timed(store: Store, settings: MetricsSettings | None, recorder: MetricsRecorder | None,
          store_url: object, relocation_url: object) -> Store:
    """``store`` with its calls timed into ``recorder`` when metrics are on."""
    if settings is None or recorder is None:
        return store
    location = backend_of(store_url)
    relocation = location if relocation_url is None else backend_of(relocation_url)
    return timed_store(store, location=location, relocation=relocation,
                       observe=recorder.store_call)


def serve_metrics_on(nursery: trio.Nursery, settings: MetricsSettings | None,
                     listeners: list[trio.SocketListener] | None) -> str | None:
    """Serve the exposition on ``listeners`` in ``nursery``; its URL (``None``: no port)."""
    if settings is None or listeners is None:
        return None
    from zlink_trio.runtime.observe.exposition import serve_metrics, url_of

    nursery.start_soon(serve_metrics, settings.registry, listeners)
    return url_of(listeners)


def start_metrics(sample: Callable[[], NodeSample], settings: MetricsSettings | None,
                  recorder: MetricsRecorder | None) -> Callable[[], None]:
    """Add the node's recorder to the registry (its series appear), with ``sample`` to
    read the node's gauges at each scrape; returns the detach function (its series go)."""
    if settings is None or recorder is None:
        return lambda: None
    from zlink_trio.runtime.observe import prometheus

    recorder.sample = sample
    return prometheus.attach(settings.registry, recorder)


def new_recorder(settings: MetricsSettings | None, node_id: str) -> MetricsRecorder | None:
    """A recorder for ``node_id`` when metrics are on."""
    return None if settings is None else MetricsRecorder(node_id)

"""``open_node``'s metrics options: validated first, then bound, attached and served.

:func:`metrics_settings` checks ``metrics=`` / ``metrics_port=`` / ``metrics_host=``
before the store is touched (:class:`InvalidConfiguration`, nothing written) and
imports prometheus-client only when one of them is given -- a node without metrics
never imports it.  :func:`metrics_listeners` binds the exposition port (before the
node's claim, so a port in use writes nothing); :func:`start_metrics` gives the running
node its :class:`~.metrics.MetricsRecorder` and adds it to the registry.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs

from zlink_trio.core.errors import InvalidConfiguration
from zlink_trio.runtime.observe.metrics import MetricsRecorder
from zlink_trio.runtime.observe.sampling import sample_node
from zlink_trio.store.timed import backend_of, timed_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    import trio
    from prometheus_client.registry import CollectorRegistry

    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.store import Store

__all__ = ("MetricsSettings", "metrics_listeners", "metrics_settings", "new_recorder",
           "serve_metrics_on", "start_metrics", "timed")

_MISSING = ("open_node(metrics=..., metrics_port=...) needs prometheus-client, which is not "
            "installed; install it with `pip install 'zlink-trio[metrics]'`, or leave both "
            "unset")


@attrs.frozen
class MetricsSettings:
    """The validated metrics options of one node."""

    registry: CollectorRegistry
    host: str
    port: int | None


def metrics_settings(metrics: object, port: object, host: object) -> MetricsSettings | None:
    """``None`` when neither ``metrics`` nor ``port`` is given; else the checked options.

    ``port`` without ``metrics`` serves a registry of this node's own.
    """
    if metrics is None and port is None:
        return None
    try:
        from zlink_trio.runtime.observe import prometheus
    except ImportError as exc:  # pragma: no cover - prometheus-client is a test dependency
        raise InvalidConfiguration(_MISSING) from exc
    if metrics is None:
        registry = prometheus.new_registry()
    elif isinstance(metrics, prometheus.CollectorRegistry):
        registry = metrics
    else:
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
    try:
        prometheus.hub_of(registry)
    except ValueError as exc:
        raise InvalidConfiguration(
            f"metrics: the registry already has a collector using a zlink_ metric name "
            f"({exc}); pass a registry of its own"
        ) from exc
    return MetricsSettings(registry, host, port)


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


def start_metrics(rt: NodeRuntime, settings: MetricsSettings | None,
                  recorder: MetricsRecorder | None) -> Callable[[], None]:
    """Add ``rt``'s recorder to the registry (its series appear); returns the detach
    function (its series go)."""
    if settings is None or recorder is None:
        return lambda: None
    from zlink_trio.runtime.observe import prometheus

    recorder.sample = lambda: sample_node(rt)
    return prometheus.attach(settings.registry, recorder)


def new_recorder(settings: MetricsSettings | None, node_id: str) -> MetricsRecorder | None:
    """A recorder for ``node_id`` when metrics are on."""
    return None if settings is None else MetricsRecorder(node_id)

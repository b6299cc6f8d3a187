"""The parts of observability without a node: histograms, outcome labels, log fields,
the timed store, and the registry collector (``zlink_trio.runtime.observe``,
``zlink_trio.store.timed``). End to end (a node scraped over HTTP) is
``test_observability.py``."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from prometheus_client import CollectorRegistry, generate_latest

import zlink_trio as zl
from zlink_trio.runtime.observe import prometheus
from zlink_trio.runtime.observe.fields import (
    FollowEvent,
    Operation,
    StaleReason,
    outcome_of,
    spot_fields,
)
from zlink_trio.runtime.observe.metrics import Histogram, MetricsRecorder
from zlink_trio.runtime.observe.recorder import NO_METRICS
from zlink_trio.store import open_store
from zlink_trio.store.timed import backend_of, timed_store


def test_a_histogram_counts_each_value_in_the_first_bucket_whose_bound_holds_it():
    histogram = Histogram((0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 1.0, 7.0):
        histogram.observe(value)
    # Prometheus ``le``: a value equal to a bound is in that bucket; cumulative counts.
    assert histogram.cumulative() == [("0.1", 2.0), ("1.0", 4.0), ("+Inf", 5.0)]
    assert histogram.total == pytest.approx(8.65)


def test_an_outcome_label_is_an_error_class_name_never_a_message():
    assert outcome_of(zl.NotFound("Spot 'x' does not exist")) == "NotFound"
    assert outcome_of(zl.StaleRoute("...")) == "StaleRoute"
    assert outcome_of(ValueError("secret detail")) == "error"


async def test_a_cancelled_operation_is_labelled_cancelled():
    labels: list[str] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.sleep(1)
        except trio.Cancelled as exc:
            labels.append(outcome_of(exc))
            raise
    assert labels == ["cancelled"]


def test_spot_fields_carry_only_what_is_known():
    assert spot_fields("s-1") == {"spot_id": "s-1"}
    assert spot_fields("s-1", node_id="n", mesh="world", generation=3,
                       operation=Operation.CLOSE) == {
        "spot_id": "s-1", "node_id": "n", "mesh": "world", "object_generation": 3,
        "operation": "close"}


def test_the_default_recorder_records_nothing():
    assert NO_METRICS.enabled is False
    NO_METRICS.request(Operation.SEND, "ok", 0.1)  # accepted and ignored
    NO_METRICS.follow(FollowEvent.HOP)
    assert not hasattr(NO_METRICS, "__dict__")  # no state to fill


class _Part:
    """A store part: two coroutine methods and a plain attribute."""

    name = "fake"

    async def find(self, spot_id: str) -> str:
        return spot_id.upper()

    async def refuse(self) -> None:
        raise zl.Unavailable("refused")


class _Store:
    def __init__(self) -> None:
        self.location = _Part()
        self.relocation = _Part()
        self.combined = _Part()
        self.extra = "kept"


async def test_the_timed_store_reports_every_call_and_changes_none():
    seen: list[tuple[str, str, str, str | None]] = []

    def observe(backend: str, part: str, method: str, seconds: float,
                error: str | None) -> None:
        assert seconds >= 0
        seen.append((backend, part, method, error))

    store: Any = timed_store(_Store(), location="sqlite", relocation="redis", observe=observe)
    assert await store.location.find("a") == "A"
    with pytest.raises(zl.Unavailable, match="refused"):
        await store.relocation.refuse()
    await store.combined.find("b")
    assert store.location.name == "fake"  # not a coroutine method: passed through
    assert store.extra == "kept"
    assert seen == [("sqlite", "location", "find", None),
                    ("redis", "relocation", "refuse", "Unavailable"),
                    ("split", "combined", "find", None)]  # two backends: split


async def test_a_real_store_wrapped_keeps_its_protocol():
    calls: list[str] = []
    async with open_store("memory://") as opened:
        store = timed_store(opened, location="memory", relocation="memory",
                            observe=lambda b, p, m, s, e: calls.append(f"{b}.{p}.{m}"))
        assert await store.location.find("nobody") is None
        assert (await store.relocation.statistics()) == (await opened.relocation.statistics())
    assert calls == ["memory.location.find", "memory.relocation.statistics"]


def test_the_backend_label_is_the_url_scheme():
    assert backend_of("sqlite:///var/db/z.db") == "sqlite"
    assert backend_of("REDIS://127.0.0.1:6379/0") == "redis"
    assert backend_of(object()) == "memory"  # a MemoryStore object


def test_one_collector_per_registry_holds_its_nodes_and_refuses_a_name_clash():
    registry = CollectorRegistry()
    a, b = MetricsRecorder("node-a"), MetricsRecorder("node-b")
    a.stale(StaleReason.CLOSING)
    detach_a = prometheus.attach(registry, a)
    detach_b = prometheus.attach(registry, b)
    assert prometheus.hub_of(registry) is prometheus.hub_of(registry)  # registered once
    text = generate_latest(registry).decode()
    assert 'zlink_stale_routes_total{node_id="node-a",reason="closing"} 1.0' in text
    assert 'zlink_stale_routes_total{node_id="node-b",reason="closing"} 0.0' in text
    detach_a()
    detach_a()  # idempotent
    assert 'node_id="node-a"' not in generate_latest(registry).decode()
    detach_b()
    from prometheus_client import Counter

    clash = CollectorRegistry()
    Counter("zlink_requests", "someone else's", registry=clash)
    with pytest.raises(ValueError, match="Duplicated"):
        prometheus.hub_of(clash)


async def test_a_registry_whose_names_clash_is_a_configuration_error_at_open_node():
    from prometheus_client import Counter

    clash = CollectorRegistry()
    Counter("zlink_links_opened", "someone else's", registry=clash)
    with trio.fail_after(10), pytest.raises(zl.InvalidConfiguration, match="zlink_"):
        async with zl.open_node("node-a", listen=None, metrics=clash):
            pass

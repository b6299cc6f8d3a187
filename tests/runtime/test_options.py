"""``open_node``'s option groups: checked when built, filled by keyword shortcuts.

Every test is bounded by ``trio.fail_after``; the nodes run without links on a
``memory://`` store (no sockets, no real waiting).
"""

from __future__ import annotations

import inspect
import random

import prometheus_client
import pytest
import trio

import zlink_trio as zl
from zlink_trio.store import MemoryStore

#: Every keyword ``open_node`` takes besides the option groups, with its group's class.
SHORTCUTS = {
    "listen": zl.NetworkOptions, "secret": zl.NetworkOptions,
    "ssl_context": zl.NetworkOptions, "client_ssl_context": zl.NetworkOptions,
    "endpoint": zl.NetworkOptions, "max_links": zl.NetworkOptions,
    "route_cache_max_age": zl.TimingOptions, "message_follow_duration": zl.TimingOptions,
    "lease": zl.TimingOptions, "default_timeout": zl.TimingOptions,
    "instance_idle_timeout": zl.CapacityOptions, "idle_sweep_interval": zl.CapacityOptions,
    "active_object_ceiling": zl.CapacityOptions, "application_lane": zl.CapacityOptions,
    "lifecycle_lane": zl.CapacityOptions, "placement_weight": zl.CapacityOptions,
    "gc_freeze_after": zl.CapacityOptions,
    "metrics": zl.ObservabilityOptions, "metrics_port": zl.ObservabilityOptions,
    "metrics_host": zl.ObservabilityOptions, "tracing": zl.ObservabilityOptions,
    "on_stop": zl.LifecycleOptions, "stop_drain_timeout": zl.LifecycleOptions,
    "stop_on": zl.LifecycleOptions, "on_lease_lost": zl.LifecycleOptions,
}


def test_every_keyword_of_open_node_named_by_the_docs_is_a_shortcut_of_a_group_field():
    parameters = inspect.signature(zl.open_node).parameters
    top = {"node_id", "store", "relocation_store", "mesh", "spots", "client_only",
           "network", "timing", "capacity", "observability", "lifecycle", "injected"}
    assert set(parameters) == top | set(SHORTCUTS)
    for name, group in SHORTCUTS.items():
        assert name in {field.name for field in group.__attrs_attrs__}, name


@pytest.mark.parametrize(
    ("build", "needle"),
    [
        (lambda: zl.TimingOptions(route_cache_max_age=26.0), "at least 5"),
        (lambda: zl.TimingOptions(lease=0), "lease"),
        (lambda: zl.CapacityOptions(active_object_ceiling=-1), "active_object_ceiling"),
        (lambda: zl.CapacityOptions(application_lane=(10, 10)), "application_lane"),
        (lambda: zl.NetworkOptions(max_links=0), "max_links"),
        (lambda: zl.NetworkOptions(listen="10.1.2.3:0"), "without a secret"),
        (lambda: zl.NetworkOptions(endpoint=""), "endpoint"),
        (lambda: zl.ObservabilityOptions(metrics_port=70000), "metrics_port"),
        (lambda: zl.ObservabilityOptions(metrics="registry"), "CollectorRegistry"),
        (lambda: zl.InjectedOptions(clock=3), "clock"),
        (lambda: zl.InjectedOptions(random=7), "random"),
    ],
)
def test_a_group_refuses_a_bad_value_when_it_is_built(build, needle):
    with pytest.raises(zl.InvalidConfiguration, match=needle):
        build()


async def test_a_group_and_the_keywords_configure_the_same_node(autojump_clock):
    with trio.fail_after(100):
        async with zl.open_node("node-a", store=MemoryStore(),
                                network=zl.NetworkOptions(listen=None, endpoint="ws://far:1"),
                                timing=zl.TimingOptions(lease=3.0),
                                capacity=zl.CapacityOptions(active_object_ceiling=5)) as node:
            assert node.statistics().endpoint == "ws://far:1"
            assert node.statistics().lease_expires_at == pytest.approx(trio.current_time() + 3)
        async with zl.open_node("node-b", store=MemoryStore(), listen=None,
                                endpoint="ws://far:1", lease=3.0,
                                active_object_ceiling=5) as node:
            assert node.statistics().endpoint == "ws://far:1"
            assert node.statistics().lease_expires_at == pytest.approx(trio.current_time() + 3)


async def test_a_keyword_fills_a_field_the_group_left_at_its_default(autojump_clock):
    with trio.fail_after(100):
        async with zl.open_node("node-a", store=MemoryStore(), listen=None,
                                timing=zl.TimingOptions(default_timeout=7.0), lease=3.0,
                                ) as node:
            assert node.statistics().lease_expires_at == pytest.approx(trio.current_time() + 3)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"timing": zl.TimingOptions(lease=3.0), "lease": 4.0},
        {"network": zl.NetworkOptions(listen=None), "listen": "127.0.0.1:0"},
        {"capacity": zl.CapacityOptions(placement_weight=0.0), "placement_weight": 2.0},
        {"observability": zl.ObservabilityOptions(metrics_host="::1"),
         "metrics_host": "127.0.0.1"},
    ],
)
async def test_an_option_given_twice_differently_is_refused_before_anything_is_written(kwargs):
    store = MemoryStore()
    with trio.fail_after(10), pytest.raises(zl.InvalidConfiguration, match="given twice"):
        async with zl.open_node("node-a", store=store, **kwargs):
            pytest.fail("must not start")
    assert store.location.state.claims == {}


async def test_an_option_given_twice_alike_is_accepted(autojump_clock):
    with trio.fail_after(100):
        async with zl.open_node("node-a", store=MemoryStore(), listen=None, lease=3.0,
                                timing=zl.TimingOptions(lease=3.0)) as node:
            assert node.statistics().lease_expires_at == pytest.approx(trio.current_time() + 3)


async def test_a_group_of_the_wrong_class_is_refused():
    with trio.fail_after(10), pytest.raises(zl.InvalidConfiguration,
                                            match=r"timing must be a zlink_trio\.TimingOptions"):
        async with zl.open_node("node-a", timing=zl.CapacityOptions()):
            pytest.fail("must not start")


async def test_injected_random_makes_the_node_identity_repeatable(autojump_clock):
    with trio.fail_after(100):
        rids = []
        for _ in range(2):
            async with zl.open_node("node-a", store=MemoryStore(), listen=None,
                                    injected=zl.InjectedOptions(random=random.Random(3))
                                    ) as node:
                rids.append((node.node_rid, node.entry_spot_id))
        assert rids[0] == rids[1]


async def test_observability_group_serves_the_registry_it_names(autojump_clock):
    registry = prometheus_client.CollectorRegistry()
    with trio.fail_after(100):
        async with zl.open_node("node-a", store=MemoryStore(), listen=None,
                                observability=zl.ObservabilityOptions(metrics=registry)):
            names = {metric.name for metric in registry.collect()}
            assert any(name.startswith("zlink_") for name in names)

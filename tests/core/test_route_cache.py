"""The positive route cache and its configuration (spec 06 §6, §10; 09 §3)."""

from __future__ import annotations

import math

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zlink_trio.core.errors import InvalidConfiguration, InvalidOperation
from zlink_trio.core.identity import NodeRid, SpotKind
from zlink_trio.core.route_cache import (
    MIN_FOLLOW_MARGIN,
    CachedRoute,
    RouteCache,
    RouteCacheConfig,
)

NODE_A = NodeRid(b"\x0a" * 16)
NODE_B = NodeRid(b"\x0b" * 16)
FAR = 1e9  # an owner lease that does not limit the entry


def route(spot_id: str = "c-1", *, node: NodeRid = NODE_A, lease: float = FAR,
          generation: int = 1) -> CachedRoute:
    return CachedRoute(
        spot_id=spot_id,
        object_generation=generation,
        mesh="world",
        node_rid=node,
        kind=SpotKind.INSTANCE,
        stable_type="counter",
        owner_lease_deadline=lease,
    )


# --- configuration -------------------------------------------------------------------------


def test_defaults_are_15_and_30_seconds():
    config = RouteCacheConfig()
    assert (config.max_age, config.follow_duration) == (15.0, 30.0)
    assert config.cache_enabled
    assert config.follow_enabled


def test_max_age_exactly_5_seconds_shorter_is_accepted_and_4_9_refused():
    assert RouteCacheConfig(max_age=25.0, follow_duration=30.0).max_age == 25.0
    assert RouteCacheConfig(max_age=10.3, follow_duration=15.3).max_age == 10.3
    with pytest.raises(InvalidConfiguration, match=r"at least 5\.0 s shorter") as refused:
        RouteCacheConfig(max_age=25.1, follow_duration=30.0)
    assert "max_age <= 25.0 s" in refused.value.message
    with pytest.raises(InvalidConfiguration):
        RouteCacheConfig(max_age=30.0, follow_duration=15.0)


@given(
    follow=st.floats(MIN_FOLLOW_MARGIN + 0.001, 1e6),
    shortfall=st.just(0.0) | st.floats(1e-3, 1e3),
)
def test_five_second_rule_holds_for_any_positive_pair(follow, shortfall):
    max_age = follow - MIN_FOLLOW_MARGIN + shortfall
    if shortfall > 0:
        with pytest.raises(InvalidConfiguration):
            RouteCacheConfig(max_age=max_age, follow_duration=follow)
    else:
        assert RouteCacheConfig(max_age=max_age, follow_duration=follow).max_age == max_age


def test_zero_turns_either_off_and_lifts_the_five_second_rule():
    no_cache = RouteCacheConfig(max_age=0.0, follow_duration=3.0)
    assert not no_cache.cache_enabled
    assert no_cache.follow_enabled
    no_follow = RouteCacheConfig(max_age=60.0, follow_duration=0.0)
    assert no_follow.cache_enabled
    assert not no_follow.follow_enabled


@pytest.mark.parametrize("bad", [-1.0, -0.001, math.inf, math.nan, None, "15", True])
@pytest.mark.parametrize("field", ["max_age", "follow_duration"])
def test_negative_or_non_numeric_durations_are_invalid_configuration(field, bad):
    with pytest.raises(InvalidConfiguration, match=field):
        RouteCacheConfig(**{field: bad})


@pytest.mark.parametrize("bad", [0, -5, 1.5, None])
def test_cache_is_always_bounded(bad):
    with pytest.raises(InvalidConfiguration, match="max_entries"):
        RouteCache(max_entries=bad)


# --- put / get / expiry ---------------------------------------------------------------------


def test_zero_max_age_disables_the_cache():
    cache = RouteCache(RouteCacheConfig(max_age=0.0))
    assert cache.put(route(), now=100.0) is False
    assert cache.get("c-1", now=100.0) is None
    assert cache.statistics().size == 0


def test_entry_expires_after_max_age():
    cache = RouteCache(RouteCacheConfig(max_age=15.0))
    r = route()
    assert cache.put(r, now=100.0) is True
    assert cache.get("c-1", now=114.999) is r
    assert cache.get("c-1", now=115.0) is None
    assert cache.statistics().size == 0


def test_entry_expires_at_owner_lease_deadline_when_that_is_sooner():
    cache = RouteCache()
    cache.put(route(lease=103.0), now=100.0)
    assert cache.get("c-1", now=102.9) is not None
    assert cache.get("c-1", now=103.0) is None
    # A lease that already ended is never cached.
    assert cache.put(route(lease=100.0), now=100.0) is False
    assert cache.get("c-1", now=100.0) is None


def test_put_replaces_and_an_uncacheable_put_drops_the_old_route():
    cache = RouteCache()
    cache.put(route(generation=1), now=0.0)
    cache.put(route(generation=2, node=NODE_B), now=1.0)
    cached = cache.get("c-1", now=1.0)
    assert cached is not None
    assert (cached.object_generation, cached.node_rid) == (2, NODE_B)
    assert cache.invalidate_node(NODE_A) == 0
    cache.put(route(generation=3, lease=0.5), now=2.0)
    assert cache.get("c-1", now=2.0) is None


def test_config_change_applies_only_to_new_entries():
    cache = RouteCache(RouteCacheConfig(max_age=15.0))
    cache.put(route("old"), now=0.0)
    cache.configure(RouteCacheConfig(max_age=2.0))
    cache.put(route("new"), now=0.0)
    assert cache.get("new", now=2.0) is None
    assert cache.get("old", now=14.0) is not None
    cache.configure(RouteCacheConfig(max_age=0.0))
    assert cache.put(route("newest"), now=0.0) is False
    assert cache.get("old", now=14.5) is not None
    with pytest.raises(InvalidConfiguration):
        cache.configure(15.0)  # type: ignore[arg-type]


# --- invalidation, bound, statistics --------------------------------------------------------


def test_invalidate_drops_one_spot_idempotently():
    cache = RouteCache()
    cache.put(route("a"), now=0.0)
    cache.put(route("b"), now=0.0)
    assert cache.invalidate("a") is True
    assert cache.invalidate("a") is False
    assert cache.get("a", now=0.0) is None
    assert cache.get("b", now=0.0) is not None


def test_invalidate_node_drops_every_route_to_that_owner():
    cache = RouteCache()
    for spot_id in ("a1", "a2", "a3"):
        cache.put(route(spot_id, node=NODE_A), now=0.0)
    cache.put(route("b1", node=NODE_B), now=0.0)
    assert cache.invalidate_node(NODE_A) == 3
    assert cache.invalidate_node(NODE_A) == 0
    assert [cache.get(s, now=0.0) for s in ("a1", "a2", "a3")] == [None, None, None]
    assert cache.get("b1", now=0.0) is not None


def test_lru_bound_evicts_the_least_recently_used():
    cache = RouteCache(max_entries=2)
    cache.put(route("a"), now=0.0)
    cache.put(route("b"), now=0.0)
    assert cache.get("a", now=0.0) is not None  # "b" is now least recently used
    cache.put(route("c"), now=0.0)
    assert cache.get("b", now=0.0) is None
    assert cache.get("a", now=0.0) is not None
    assert cache.get("c", now=0.0) is not None
    stats = cache.statistics()
    assert (stats.size, stats.max_entries, stats.evictions) == (2, 2, 1)
    # The evicted route is gone from the node index too.
    assert cache.invalidate_node(NODE_A) == 2


def test_statistics_count_hits_misses_and_expiry():
    cache = RouteCache(RouteCacheConfig(max_age=1.0, follow_duration=30.0))
    cache.put(route(), now=0.0)
    cache.get("c-1", now=0.5)
    cache.get("c-1", now=0.6)
    cache.get("other", now=0.6)
    cache.get("c-1", now=1.0)  # expired: a miss, and the entry is dropped
    stats = cache.statistics()
    assert (stats.hits, stats.misses, stats.size) == (2, 2, 0)


def test_prune_drops_only_expired_entries():
    cache = RouteCache()
    cache.put(route("short", lease=5.0), now=0.0)
    cache.put(route("long"), now=0.0)
    assert cache.prune(now=5.0) == 1
    assert cache.statistics().size == 1
    assert cache.get("long", now=5.0) is not None


# --- spec 06 §10 "Route cache and Message Follow" ---------------------------------------


def test_missing_creating_and_store_failure_are_not_negative_cached():
    cache = RouteCache()
    # Missing: a lookup that found nothing leaves nothing behind.
    for _ in range(3):
        assert cache.get("c-1", now=0.0) is None
    assert cache.statistics().size == 0
    # Absence (or an error / in-progress marker) cannot be put.
    for absent in (None, "creating", InvalidOperation("store down")):
        with pytest.raises(InvalidOperation, match="only a Ready CachedRoute"):
            cache.put(absent, now=0.0)  # type: ignore[arg-type]
    assert cache.get("c-1", now=0.0) is None
    # A Ready route has no state field that could say Missing/Creating/failed.
    assert {f.name for f in attrs.fields(CachedRoute)} == {
        "spot_id", "object_generation", "mesh", "node_rid", "kind", "stable_type",
        "owner_lease_deadline", "owner", "owner_generation", "wire_route",
    }
    with pytest.raises(InvalidOperation):
        attrs.evolve(route(), object_generation=0)  # no "not yet created" generation
    # The Spot becomes Ready a moment later: the very next put is served at once,
    # not hidden for a cache lifetime by the earlier misses.
    ready = route()
    cache.put(ready, now=0.001)
    assert cache.get("c-1", now=0.001) is ready


@pytest.mark.parametrize(
    "override",
    [
        {"spot_id": ""},
        {"object_generation": 2**63},
        {"object_generation": True},
        {"mesh": ""},
        {"node_rid": "0a" * 16},
        {"kind": SpotKind.INVALID},
        {"kind": 2},
        {"stable_type": "x" * 256},
        {"owner_lease_deadline": math.nan},
    ],
)
def test_malformed_route_is_invalid_operation(override):
    with pytest.raises(InvalidOperation):
        attrs.evolve(route(), **override)


@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["put", "get", "inv"]), st.sampled_from("abcde"),
                  st.floats(0.0, 40.0), st.floats(0.5, 40.0)),
        max_size=40,
    )
)
def test_get_never_returns_an_expired_route_and_size_stays_bounded(ops):
    cache = RouteCache(max_entries=3)
    now = 0.0
    expiry: dict[str, float] = {}
    for op, spot_id, step, lease_in in ops:
        now += step / 10
        if op == "put":
            if cache.put(route(spot_id, lease=now + lease_in), now=now):
                expiry[spot_id] = min(now + 15.0, now + lease_in)
        elif op == "inv":
            cache.invalidate(spot_id)
            expiry.pop(spot_id, None)
        else:
            got = cache.get(spot_id, now=now)
            if got is not None:
                assert now < expiry[spot_id]
                assert got.spot_id == spot_id
        assert cache.statistics().size <= 3

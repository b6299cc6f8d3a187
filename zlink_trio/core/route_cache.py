"""The positive route cache: recently resolved Ready routes, by Spot ID.

Theory of operation
-------------------
Resolving a Spot ID reads the Location Store. To spare that read on every
call, a node remembers the Ready routes it resolved recently. The cache is
**positive only**: :class:`CachedRoute` can represent nothing but a Ready
route (Spot ID, generation, Mesh, owner NodeRid, kind, stable type, owner
lease deadline). There is no field for Missing, Creating, Unavailable or a
store failure, and :meth:`RouteCache.put` accepts only a ``CachedRoute``, so
absence and in-progress creation cannot be cached: "being created" would keep
showing for the cache lifetime after creation finished, and a cached
"missing" would hide a Spot created a moment later.

An entry expires at ``min(now + max_age, owner_lease_deadline)`` computed
when it is put: the cache is used only within the owner lease's admission
deadline *and* ``RouteCacheMaxAge``. An entry whose expiry is not in
the future is never served and is dropped when seen. A changed configuration
(:meth:`RouteCache.configure`) applies only to entries put afterwards, like every
runtime configuration change; existing entries keep their expiry.

:class:`RouteCacheConfig` also holds the Message Follow duration because the two
are tied: when both are positive, the cache age must be at least
:data:`MIN_FOLLOW_MARGIN` (5 s) shorter than the follow duration, so a
sender's cached route to a previous owner expires while that owner still
relays (follows) messages to the new one. 0 turns the cache, respectively
Message Follow, off; then the rule does not apply.

The cache is bounded (``max_entries``, least recently used evicted first).
:meth:`RouteCache.invalidate_node` drops a lost node's routes with one scan of the
entries: it is rare, and an index by owner would cost every entry -- every
resident Spot has one, its local route -- about 100 bytes (docs/performance.md).

This module is sans-IO: ``now`` is an argument (seconds on the runtime's
clock), and nothing reads a clock.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Final

import attrs

from zlink_trio.core.errors import InvalidConfiguration, InvalidOperation
from zlink_trio.core.identity import (
    MAX_OBJECT_GENERATION,
    NodeRid,
    SpotKind,
    validate_mesh_name,
    validate_spot_id,
    validate_stable_type,
)
from zlink_trio.core.records import OwnerFence

__all__ = (
    "DEFAULT_FOLLOW_DURATION",
    "DEFAULT_MAX_AGE",
    "DEFAULT_MAX_ENTRIES",
    "MIN_FOLLOW_MARGIN",
    "CachedRoute",
    "RouteCache",
    "RouteCacheConfig",
    "RouteCacheStatistics",
)

#: Default RouteCacheMaxAge, seconds.
DEFAULT_MAX_AGE: Final = 15.0
#: Default MessageFollowDuration, seconds.
DEFAULT_FOLLOW_DURATION: Final = 30.0
#: How much shorter, in seconds, the cache age must be than the follow duration.
MIN_FOLLOW_MARGIN: Final = 5.0
#: Default bound on the number of cached routes.
DEFAULT_MAX_ENTRIES: Final = 100_000

# Differences below a nanosecond are treated as equal, so decimal settings such
# as max_age=10.3, follow_duration=15.3 satisfy the 5 s rule as written.
_EPSILON: Final = 1e-9


def _duration(instance: RouteCacheConfig, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
        math.isfinite(value) and value >= 0
    ):
        raise InvalidConfiguration(
            f"{attribute.name} must be a finite number of seconds >= 0 (0 turns it off), "
            f"got {value!r}"
        )


@attrs.frozen
class RouteCacheConfig:
    """RouteCacheMaxAge and MessageFollowDuration, in seconds.

    ``max_age == 0`` disables the route cache, ``follow_duration == 0``
    disables Message Follow. Raises :class:`InvalidConfiguration` for a
    negative, non-finite or non-numeric value, and when both are positive but
    ``max_age > follow_duration - 5``.
    """

    max_age: float = attrs.field(default=DEFAULT_MAX_AGE, validator=_duration)
    follow_duration: float = attrs.field(default=DEFAULT_FOLLOW_DURATION, validator=_duration)

    def __attrs_post_init__(self) -> None:
        if (
            self.max_age > 0
            and self.follow_duration > 0
            and self.max_age + MIN_FOLLOW_MARGIN > self.follow_duration + _EPSILON
        ):
            raise InvalidConfiguration(
                f"route cache max_age {self.max_age} s must be at least {MIN_FOLLOW_MARGIN} s "
                f"shorter than the Message Follow duration {self.follow_duration} s, so a "
                "cached route to a previous owner expires while that owner still forwards "
                f"messages; use max_age <= {self.follow_duration - MIN_FOLLOW_MARGIN} s, a "
                "longer follow_duration, or set either to 0 to turn it off"
            )

    @property
    def cache_enabled(self) -> bool:
        """Whether routes are cached at all (``max_age > 0``)."""
        return self.max_age > 0

    @property
    def follow_enabled(self) -> bool:
        """Whether Message Follow is on (``follow_duration > 0``)."""
        return self.follow_duration > 0


def _generation(instance: CachedRoute, attribute: attrs.Attribute[int], value: int) -> None:
    if type(value) is not int or not 1 <= value <= MAX_OBJECT_GENERATION:
        raise InvalidOperation(
            f"object_generation must be an int in 1..2^63-1, got {value!r}"
        )


def _mesh(instance: CachedRoute, attribute: attrs.Attribute[str], value: str) -> None:
    validate_mesh_name(value)


def _rid(instance: CachedRoute, attribute: attrs.Attribute[NodeRid], value: NodeRid) -> None:
    if not isinstance(value, NodeRid):
        raise InvalidOperation(f"node_rid must be a NodeRid, got {type(value).__name__}")


def _kind(instance: CachedRoute, attribute: attrs.Attribute[SpotKind], value: SpotKind) -> None:
    if not isinstance(value, SpotKind) or value is SpotKind.INVALID:
        raise InvalidOperation(f"kind must be ENTRY, USER, INSTANCE or ACTOR, got {value!r}")


def _deadline(instance: CachedRoute, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidOperation(f"owner_lease_deadline must be a finite time, got {value!r}")


@attrs.frozen(kw_only=True)
class CachedRoute:
    """A Ready route as the Location Store reported it; the only thing the cache holds.

    Raises :class:`InvalidOperation` for malformed fields. There is no way to
    build one for a Missing, Creating or unavailable Spot.
    """

    spot_id: str = attrs.field(validator=lambda _i, _a, v: validate_spot_id(v))
    #: Recorded for diagnostics; never a target-match condition (ordinary messages
    #: are not filtered by generation, docs/concepts.md).
    object_generation: int = attrs.field(validator=_generation)
    mesh: str = attrs.field(validator=_mesh)
    #: The owner node.
    node_rid: NodeRid = attrs.field(validator=_rid)
    kind: SpotKind = attrs.field(validator=_kind)
    stable_type: str = attrs.field(validator=lambda _i, _a, v: validate_stable_type(v))
    #: The owner lease's local admission deadline, on the runtime's clock.
    owner_lease_deadline: float = attrs.field(validator=_deadline)
    #: The owner's lifecycle fence, for a route to another node (command 39 route kind 1
    #: carries it); ``None`` for a route to this node.
    owner: OwnerFence | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(attrs.validators.instance_of(OwnerFence)))
    #: The authority's AuthorityOwnerGeneration when the route was read (with ``owner``).
    owner_generation: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(_generation))
    #: The route's bytes on the wire (command 39's route kind 1, built by the runtime
    #: with ``zlink_trio.wire.frames.encode_route``), kept with the route so that every
    #: call on it reuses them; ``None`` for a route to this node.
    wire_route: bytes | None = attrs.field(
        default=None, eq=False,
        validator=attrs.validators.optional(attrs.validators.instance_of(bytes)))


@attrs.frozen(kw_only=True)
class RouteCacheStatistics:
    """A snapshot of a :class:`RouteCache`'s counters."""

    hits: int
    misses: int
    #: Entries held now (some may be expired but not yet seen).
    size: int
    max_entries: int
    #: Entries dropped to stay within ``max_entries``.
    evictions: int


@attrs.frozen
class _Entry:
    route: CachedRoute
    expires_at: float


class RouteCache:
    """A bounded LRU map Spot ID -> Ready route, each entry with its own expiry.

    Raises :class:`InvalidConfiguration` if ``config`` is not a
    :class:`RouteCacheConfig` or ``max_entries`` is not a positive int.
    """

    __slots__ = ("_config", "_entries", "_evictions", "_hits", "_max_entries",
                 "_misses")

    def __init__(
        self, config: RouteCacheConfig | None = None, *, max_entries: int = DEFAULT_MAX_ENTRIES
    ) -> None:
        if type(max_entries) is not int or max_entries < 1:
            raise InvalidConfiguration(
                f"max_entries must be a positive int, got {max_entries!r}; the route cache "
                "is always bounded (disable it with max_age=0 instead)"
            )
        self._max_entries: Final = max_entries
        self._config = RouteCacheConfig()
        self.configure(config if config is not None else RouteCacheConfig())
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._hits = self._misses = self._evictions = 0

    @property
    def config(self) -> RouteCacheConfig:
        """The configuration new entries are put with."""
        return self._config

    def configure(self, config: RouteCacheConfig) -> None:
        """Use ``config`` for entries put from now on; existing entries keep their expiry.

        Raises :class:`InvalidConfiguration` if ``config`` is not a
        :class:`RouteCacheConfig`. Idempotent.
        """
        if not isinstance(config, RouteCacheConfig):
            raise InvalidConfiguration(
                f"config must be a RouteCacheConfig, got {type(config).__name__}"
            )
        self._config = config

    def put(self, route: CachedRoute, now: float) -> bool:
        """Remember ``route`` until ``min(now + max_age, route.owner_lease_deadline)``.

        Replaces any entry for the same Spot ID (last put wins). Stores
        nothing, and drops the old entry, when the cache is disabled
        (``max_age == 0``) or that expiry is not after ``now``. Returns whether
        an entry was stored. May evict the least recently used entry. Raises
        :class:`InvalidOperation` if ``route`` is not a :class:`CachedRoute`
        (absence cannot be cached).
        """
        if not isinstance(route, CachedRoute):
            raise InvalidOperation(
                f"only a Ready CachedRoute can be cached, got {type(route).__name__}; "
                "Missing, Creating and failed lookups are never cached"
            )
        self._remove(route.spot_id)
        expires_at = min(now + self._config.max_age, route.owner_lease_deadline)
        if not self._config.cache_enabled or expires_at <= now:
            return False
        self._entries[route.spot_id] = _Entry(route, expires_at)
        while len(self._entries) > self._max_entries:
            oldest = next(iter(self._entries))
            self._remove(oldest)
            self._evictions += 1
        return True

    def local_expiry(self, now: float, owner_lease_deadline: float) -> float:
        """Until when a node may admit to its own Ready incarnation without the store.

        The expiry :meth:`put` would give that route (``-inf`` while the cache is
        off). The node keeps it on the incarnation itself rather than as an entry
        here: every resident Spot has its local route, and an entry costs it about
        300 bytes (docs/performance.md). Count such lookups with :meth:`count_local`.
        """
        if not self._config.cache_enabled:
            return -math.inf
        return min(now + self._config.max_age, owner_lease_deadline)

    def count_local(self, *, hit: bool) -> None:
        """Count a lookup a local incarnation's route answered (``hit``) or not (expired)."""
        if hit:
            self._hits += 1
        else:
            self._misses += 1

    def get(self, spot_id: str, now: float) -> CachedRoute | None:
        """Return the cached Ready route of ``spot_id`` if it has not expired at ``now``.

        A hit marks the entry most recently used; an expired entry is dropped
        and counts as a miss. A miss stores nothing. Never raises.
        """
        entry = self._entries.get(spot_id)
        if entry is None:
            self._misses += 1
            return None
        if entry.expires_at <= now:
            self._remove(spot_id)
            self._misses += 1
            return None
        self._entries.move_to_end(spot_id)
        self._hits += 1
        return entry.route

    def invalidate(self, spot_id: str) -> bool:
        """Drop the entry of ``spot_id``; return whether there was one. Idempotent."""
        return self._remove(spot_id)

    def invalidate_node(self, node_rid: NodeRid) -> int:
        """Drop every route whose owner is ``node_rid``; return how many. Idempotent. O(size)."""
        spot_ids = [s for s, e in self._entries.items() if e.route.node_rid == node_rid]
        for spot_id in spot_ids:
            self._remove(spot_id)
        return len(spot_ids)

    def prune(self, now: float) -> int:
        """Drop every entry expired at ``now``; return how many. O(size)."""
        expired = [s for s, e in self._entries.items() if e.expires_at <= now]
        for spot_id in expired:
            self._remove(spot_id)
        return len(expired)

    def statistics(self) -> RouteCacheStatistics:
        """Return a frozen snapshot of the counters. Never raises."""
        return RouteCacheStatistics(
            hits=self._hits,
            misses=self._misses,
            size=len(self._entries),
            max_entries=self._max_entries,
            evictions=self._evictions,
        )

    def _remove(self, spot_id: str) -> bool:
        return self._entries.pop(spot_id, None) is not None

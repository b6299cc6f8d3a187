"""Node options: every tunable of ``open_node`` with its default, validated before startup.

Theory of operation
-------------------
``open_node`` takes its options as keyword arguments and builds one frozen
:class:`NodeOptions` from them *before* it touches the store, so a bad option is an
:class:`InvalidConfiguration` and nothing is written (no descriptor, no Entry claim).
The defaults are the spec's where it has them:

* ``route_cache_max_age`` 15 s and ``message_follow_duration`` 30 s (06 §6); when both
  are positive the age must be at least 5 s shorter (checked by
  :class:`~zlink_trio.core.route_cache.RouteCacheConfig`).
* ``application_lane`` 1,024 items / 64 MiB and ``lifecycle_lane`` 128 / 4 MiB (09 §6).
* ``instance_idle_timeout`` -- the chapter with the spec's default is missing; we use
  300 s (five minutes, the order of magnitude of Orleans' collection age), and 0
  disables idle eviction (09 §5 "when the configured timeout is positive").
* ``active_object_ceiling`` 10,000 (09 §5); it is also the descriptor's capacity, so
  placement and Reserve agree with the local check.
* ``lease`` 10 s, renewed every ``lease / 3``; ``default_timeout`` 30 s, the deadline of
  any call that sets no ``.timeout()``.
"""

from __future__ import annotations

import math
from typing import Final

import attrs

from zlink_trio.core.descriptor import MAX_CAPACITY, MAX_ENDPOINT_BYTES
from zlink_trio.core.errors import InvalidConfiguration, InvalidOperation
from zlink_trio.core.lanes import DEFAULT_APPLICATION_BOUNDS, DEFAULT_LIFECYCLE_BOUNDS, LaneBounds
from zlink_trio.core.route_cache import DEFAULT_FOLLOW_DURATION, DEFAULT_MAX_AGE, RouteCacheConfig

__all__ = (
    "DEFAULT_ACTIVE_OBJECT_CEILING",
    "DEFAULT_IDLE_SWEEP_INTERVAL",
    "DEFAULT_INSTANCE_IDLE_TIMEOUT",
    "DEFAULT_LEASE",
    "DEFAULT_TIMEOUT",
    "NodeOptions",
    "check_timeout",
)

#: InstanceSpotIdleTimeout default, seconds (0 disables idle eviction).
DEFAULT_INSTANCE_IDLE_TIMEOUT: Final = 300.0
#: Default active-object ceiling (and descriptor capacity).
DEFAULT_ACTIVE_OBJECT_CEILING: Final = 10_000
#: Default node lease, seconds; renewed every third of it.
DEFAULT_LEASE: Final = 10.0
#: Deadline of a call without ``.timeout()``, seconds.
DEFAULT_TIMEOUT: Final = 30.0
#: Seconds between two idle sweeps.
DEFAULT_IDLE_SWEEP_INTERVAL: Final = 1.0


def _seconds(value: object, name: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidConfiguration(f"{name} must be a finite number of seconds, got {value!r}")
    if value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0 (0 turns it off)"
        raise InvalidConfiguration(f"{name} must be {bound} seconds, got {value!r}")
    return float(value)


def check_timeout(value: object, name: str = "timeout") -> float:
    """Return ``value`` as seconds if it is a finite number > 0; InvalidOperation otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
        math.isfinite(value) and value > 0
    ):
        raise InvalidOperation(
            f"{name} must be a finite number of seconds > 0, got {value!r}; every call has "
            "a deadline, so pass e.g. .timeout(5)"
        )
    return float(value)


@attrs.frozen(kw_only=True)
class NodeOptions:
    """The validated options of one node; see ``open_node`` for their meaning.

    Raises :class:`InvalidConfiguration` for any value that cannot work.
    """

    endpoint: str = "local://"
    route_cache_max_age: float = DEFAULT_MAX_AGE
    message_follow_duration: float = DEFAULT_FOLLOW_DURATION
    instance_idle_timeout: float = DEFAULT_INSTANCE_IDLE_TIMEOUT
    idle_sweep_interval: float = DEFAULT_IDLE_SWEEP_INTERVAL
    active_object_ceiling: int = DEFAULT_ACTIVE_OBJECT_CEILING
    application_lane: LaneBounds = DEFAULT_APPLICATION_BOUNDS
    lifecycle_lane: LaneBounds = DEFAULT_LIFECYCLE_BOUNDS
    lease: float = DEFAULT_LEASE
    default_timeout: float = DEFAULT_TIMEOUT
    placement_weight: float = 1.0
    route_cache: RouteCacheConfig = attrs.field(init=False)

    @route_cache.default
    def _route_cache(self) -> RouteCacheConfig:
        return RouteCacheConfig(self.route_cache_max_age, self.message_follow_duration)

    @property
    def placement_max_age(self) -> float:
        """How long placement may reuse the descriptor claims it read (store clock, seconds).

        A tenth of the shorter of the lease and the route cache's age: 1 s by default.
        The mesh directory reuses the same read for as long (``mesh.peers``).
        """
        return min(self.lease, self.route_cache_max_age) / 10

    def __attrs_post_init__(self) -> None:
        size = len(self.endpoint.encode("utf-8", "replace")) if isinstance(
            self.endpoint, str) else 0
        if not 1 <= size <= MAX_ENDPOINT_BYTES:
            raise InvalidConfiguration(
                f"endpoint must be a str of 1..{MAX_ENDPOINT_BYTES} UTF-8 bytes, got "
                f"{self.endpoint!r}"
            )
        _seconds(self.instance_idle_timeout, "instance_idle_timeout", positive=False)
        _seconds(self.idle_sweep_interval, "idle_sweep_interval", positive=True)
        _seconds(self.lease, "lease", positive=True)
        _seconds(self.default_timeout, "default_timeout", positive=True)
        _seconds(self.placement_weight, "placement_weight", positive=False)
        ceiling = self.active_object_ceiling
        if type(ceiling) is not int or not 0 <= ceiling <= MAX_CAPACITY:
            raise InvalidConfiguration(
                f"active_object_ceiling must be an int in 0..{MAX_CAPACITY}, got {ceiling!r}"
            )
        for name in ("application_lane", "lifecycle_lane"):
            if not isinstance(getattr(self, name), LaneBounds):
                raise InvalidConfiguration(
                    f"{name} must be a LaneBounds(max_items, max_bytes), got "
                    f"{getattr(self, name)!r}"
                )

"""Node options: ``open_node``'s tunables in a few groups, each validated when it is built.

Theory of operation
-------------------
``open_node`` takes its options in six frozen ``attrs`` groups, each a public class
that checks its values when it is constructed (an :class:`InvalidConfiguration` that
names the option and says what to pass), so a bad option never reaches the store:

* ``network=NetworkOptions(...)`` (:mod:`zlink_trio.runtime.mesh.setup`): ``listen``,
  ``secret``, ``ssl_context``, ``client_ssl_context``, ``endpoint``, ``max_links``;
* ``timing=TimingOptions(...)``: ``route_cache_max_age``, ``message_follow_duration``,
  ``lease``, ``default_timeout``;
* ``capacity=CapacityOptions(...)``: ``active_object_ceiling``, ``application_lane``,
  ``lifecycle_lane``, ``instance_idle_timeout``, ``idle_sweep_interval``,
  ``placement_weight``, ``gc_freeze_after``;
* ``observability=ObservabilityOptions(...)`` (:mod:`zlink_trio.runtime.observe.setup`):
  ``metrics``, ``metrics_port``, ``metrics_host``;
* ``lifecycle=LifecycleOptions(...)``: ``on_stop``, ``stop_drain_timeout``, ``stop_on``,
  ``on_lease_lost`` -- how the node stops and what it does when it loses its lease;
* ``injected=InjectedOptions(...)``: ``clock``, ``random`` -- for tests and simulations.

Every field but ``clock`` and ``random`` is also a keyword of ``open_node`` of the same
name -- a shortcut (``open_node("a", lease=5)`` is ``timing=TimingOptions(lease=5)``).
:func:`with_shortcuts` folds the keywords given into their group: a field left at its
default gives way to the keyword; a field set to another value than the keyword is an
:class:`InvalidConfiguration` (the option was given twice, differently).  A group is
checked as a whole when it is built, so options whose rule spans two fields (the route
cache's age against the follow duration, a secret for a non-loopback ``listen``) go into
the same group together.

The defaults:

* ``route_cache_max_age`` 15 s and ``message_follow_duration`` 30 s; when both
  are positive the age must be at least 5 s shorter (checked by
  :class:`~zlink_trio.core.route_cache.RouteCacheConfig`).
* ``application_lane`` 1,024 items / 64 MiB and ``lifecycle_lane`` 128 / 4 MiB.
* ``instance_idle_timeout`` 300 s (five minutes, the order of magnitude of Orleans'
  collection age); 0 disables idle eviction (a Spot is evicted only when the timeout
  is positive).
* ``active_object_ceiling`` 10,000; it is also the descriptor's capacity, so
  placement and Reserve agree with the local check.
* ``lease`` 10 s, renewed every ``lease / 3``; ``default_timeout`` 30 s, the deadline of
  any call that sets no ``.timeout()``.
* ``gc_freeze_after`` 10,000: each time the resident Spots have grown by that many, the
  node collects and freezes what lives out of the garbage collector's view, so a full
  collection never pauses it in proportion to its Spots (``runtime/collector.py``); 0
  turns it off.

:class:`NodeOptions` is the runtime's flat view of the validated ``timing`` and
``capacity`` groups plus the published endpoint: what every part of a running node
reads as ``rt.options``.
"""

from __future__ import annotations

import math
import random as _random
import signal
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs

from zlink_trio.core.descriptor import MAX_CAPACITY
from zlink_trio.core.errors import InvalidConfiguration, InvalidOperation
from zlink_trio.core.lanes import DEFAULT_APPLICATION_BOUNDS, DEFAULT_LIFECYCLE_BOUNDS, LaneBounds
from zlink_trio.core.route_cache import DEFAULT_FOLLOW_DURATION, DEFAULT_MAX_AGE, RouteCacheConfig

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = (
    "DEFAULT_ACTIVE_OBJECT_CEILING",
    "DEFAULT_GC_FREEZE_AFTER",
    "DEFAULT_IDLE_SWEEP_INTERVAL",
    "DEFAULT_INSTANCE_IDLE_TIMEOUT",
    "DEFAULT_LEASE",
    "DEFAULT_STOP_DRAIN_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "UNSET",
    "CapacityOptions",
    "InjectedOptions",
    "LifecycleOptions",
    "NodeOptions",
    "TimingOptions",
    "check_timeout",
    "with_shortcuts",
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
#: Resident Spots a node grows by between two freezes of the garbage collector's view.
DEFAULT_GC_FREEZE_AFTER: Final = 10_000
#: How long a stop may spend moving Spots to other nodes before it closes the rest:
#: half of the 30 s a process supervisor (systemd, Kubernetes) grants after SIGTERM,
#: so that closing what did not move still fits.
DEFAULT_STOP_DRAIN_TIMEOUT: Final = 15.0


class _Unset:
    """The default of ``open_node``'s shortcut keywords: "not given, use the group's"."""

    def __repr__(self) -> str:
        return "<the option group's value>"


#: What an ``open_node`` shortcut keyword is when the caller did not give it (typed
#: ``Any`` so each keyword keeps the type of its field).
UNSET: Final[Any] = _Unset()

_Group = TypeVar("_Group", bound=attrs.AttrsInstance)


def with_shortcuts(cls: type[_Group], group: object, group_arg: str,
                   **shortcuts: object) -> _Group:
    """``group`` (``cls()`` when ``None``) with the shortcut keywords that were given.

    ``shortcuts`` maps each field of ``cls`` to the keyword's value, :data:`UNSET` when
    the caller left it out.  Raises :class:`InvalidConfiguration` when ``group`` is not a
    ``cls``, when a keyword and a field of ``group`` set to another value both name the
    option, and for any value the group refuses.
    """
    if group is None:
        base = cls()
    elif isinstance(group, cls):
        base = group
    else:
        raise InvalidConfiguration(
            f"{group_arg} must be a zlink_trio.{cls.__name__}, got {type(group).__name__}")
    given = {name: value for name, value in shortcuts.items() if value is not UNSET}
    if not given:
        return base
    if group is not None:
        for field in attrs.fields(cls):
            if field.name not in given:
                continue
            current, value = getattr(base, field.name), given[field.name]
            if current is not value and current != field.default and current != value:
                raise InvalidConfiguration(
                    f"{field.name} is given twice with different values: {field.name}="
                    f"{value!r} and {group_arg}={cls.__name__}({field.name}={current!r}); "
                    f"give it once, as the keyword or in {cls.__name__}"
                )
    return cls(**{**attrs.asdict(base, recurse=False), **given})


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
class TimingOptions:
    """How long routes, follow routes, the lease and calls last (``open_node(timing=)``).

    ``route_cache_max_age`` (15 s; 0 disables the route cache) and
    ``message_follow_duration`` (30 s; 0 disables Message Follow): when both are positive
    the age must be at least 5 s shorter. ``lease`` (10 s) is renewed every third of it.
    ``default_timeout`` (30 s) is the deadline of a call without ``.timeout()``, and
    bounds the startup scan and the drain. ``reminder_scan_interval`` (0.25 s) is how
    often the node looks for due reminders when the last look found none waiting
    (docs/reminders.md). Raises :class:`InvalidConfiguration` for a value that cannot
    work.
    """

    route_cache_max_age: float = DEFAULT_MAX_AGE
    message_follow_duration: float = DEFAULT_FOLLOW_DURATION
    lease: float = DEFAULT_LEASE
    default_timeout: float = DEFAULT_TIMEOUT
    reminder_scan_interval: float = 0.25

    def __attrs_post_init__(self) -> None:
        RouteCacheConfig(self.route_cache_max_age, self.message_follow_duration)
        _seconds(self.lease, "lease", positive=True)
        _seconds(self.default_timeout, "default_timeout", positive=True)
        _seconds(self.reminder_scan_interval, "reminder_scan_interval", positive=True)


@attrs.frozen(kw_only=True)
class CapacityOptions:
    """How much one node hosts and for how long (``open_node(capacity=)``).

    ``active_object_ceiling`` (10,000) bounds local Ready + activating Spots and is the
    descriptor's capacity; ``application_lane`` (1,024 items / 64 MiB) and
    ``lifecycle_lane`` (128 / 4 MiB) bound each Spot's two queues;
    ``instance_idle_timeout`` (300 s; 0 disables idle eviction) and
    ``idle_sweep_interval`` (1 s between two sweeps of at most 64 Spots);
    ``placement_weight`` (1.0; 0: place nothing new here) weighs this node in placement;
    ``gc_freeze_after`` (10,000; 0: never) freezes the long-lived objects out of the
    garbage collector's view each time the resident Spots grew by that many
    (``runtime/collector.py``, docs/operations.md "Nodes with very many Spots").
    Raises :class:`InvalidConfiguration` for a value that cannot work.
    """

    active_object_ceiling: int = DEFAULT_ACTIVE_OBJECT_CEILING
    application_lane: LaneBounds = DEFAULT_APPLICATION_BOUNDS
    lifecycle_lane: LaneBounds = DEFAULT_LIFECYCLE_BOUNDS
    instance_idle_timeout: float = DEFAULT_INSTANCE_IDLE_TIMEOUT
    idle_sweep_interval: float = DEFAULT_IDLE_SWEEP_INTERVAL
    placement_weight: float = 1.0
    gc_freeze_after: int = DEFAULT_GC_FREEZE_AFTER

    def __attrs_post_init__(self) -> None:
        _seconds(self.instance_idle_timeout, "instance_idle_timeout", positive=False)
        after = self.gc_freeze_after
        if type(after) is not int or after < 0:
            raise InvalidConfiguration(
                f"gc_freeze_after must be an int >= 0 (resident Spots between two freezes; "
                f"0: never freeze), got {after!r}")
        _seconds(self.idle_sweep_interval, "idle_sweep_interval", positive=True)
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


_ON_STOP: Final = ("drain", "close")
_ON_LEASE_LOST: Final = ("rejoin", "raise")


#: Signals a process cannot catch.
_UNCATCHABLE: Final = frozenset({signal.SIGKILL, signal.SIGSTOP})


def _signals(value: object) -> tuple[signal.Signals, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, tuple | list):
        raise InvalidConfiguration(
            f"stop_on must be a tuple of signals, e.g. (signal.SIGTERM, signal.SIGINT), got "
            f"{value!r}")
    found = []
    for item in value:
        try:
            if isinstance(item, bool):
                raise TypeError(item)
            found.append(signal.Signals(item))
        except (ValueError, TypeError):
            raise InvalidConfiguration(
                f"stop_on: {item!r} is not a signal of this platform; pass e.g. "
                "(signal.SIGTERM, signal.SIGINT)") from None
        if found[-1] in _UNCATCHABLE:
            raise InvalidConfiguration(
                f"stop_on: {found[-1].name} cannot be caught by a process; pass e.g. "
                "(signal.SIGTERM, signal.SIGINT)")
    return tuple(dict.fromkeys(found))


@attrs.frozen(kw_only=True)
class LifecycleOptions:
    """How a node stops, and what it does after losing its lease (``open_node(lifecycle=)``).

    ``on_stop`` (``"drain"``): leaving the ``open_node`` block normally -- or the first
    signal of ``stop_on`` -- first moves this node's Spots to the other live nodes that
    serve their types, each by its relocation policy (``PreserveStateWith`` with its
    state, ``RecreateOnRelocation`` re-created there, ``DisableRelocation`` closed), for
    at most ``stop_drain_timeout`` seconds (15); what has not moved by then closes as
    with ``"close"``, which closes every Spot at once (their state is lost unless they
    saved it). With no other node serving their types, both close.

    ``stop_on`` (``()``): signals that stop the node, e.g.
    ``(signal.SIGTERM, signal.SIGINT)``: the first one ends the ``async with`` block
    (the code in it is cancelled) and starts the stop above; a second one starts no
    further move (those under way finish, within ``stop_drain_timeout``) and closes the
    rest. Needs the main thread (Python delivers signals there); one node per process
    should use it, as a signal reaches only the receiver opened last.

    ``on_lease_lost`` (``"rejoin"``): a node that learns it lost its lease (a store
    outage or a pause longer than the lease, a store that lost its data) stops its Spots
    without touching the store, then rejoins the Mesh by itself under the same NodeId as
    a new lifecycle, as soon as the store answers; calls meanwhile raise
    :class:`Unavailable`. ``"raise"`` leaves that to a process supervisor instead: the
    ``open_node`` block is cancelled and ``open_node`` raises :class:`NodeLost`.

    Raises :class:`InvalidConfiguration` for a value that cannot work.
    """

    on_stop: str = "drain"
    stop_drain_timeout: float = DEFAULT_STOP_DRAIN_TIMEOUT
    stop_on: tuple[signal.Signals, ...] = attrs.field(default=(), converter=_signals)
    on_lease_lost: str = "rejoin"

    def __attrs_post_init__(self) -> None:
        if self.on_stop not in _ON_STOP:
            raise InvalidConfiguration(
                f"on_stop must be 'drain' (move the Spots to other nodes, then close) or "
                f"'close' (close them at once), got {self.on_stop!r}")
        if self.on_lease_lost not in _ON_LEASE_LOST:
            raise InvalidConfiguration(
                f"on_lease_lost must be 'rejoin' (the node rejoins the Mesh by itself) or "
                f"'raise' (open_node raises NodeLost), got {self.on_lease_lost!r}")
        _seconds(self.stop_drain_timeout, "stop_drain_timeout", positive=False)


@attrs.frozen(kw_only=True)
class InjectedOptions:
    """The clock and randomness a node uses, injected by tests (``open_node(injected=)``).

    ``clock`` is the store's clock: leases and route-cache ages are stamped with it. By
    default it is ``trio.current_time`` for an in-process ``memory://`` store (so tests
    on ``MockClock`` control leases) and wall-clock ``time.time`` for any store shared
    between processes, whose leases every process must read on one clock. ``random``
    (a ``random.Random``) draws the NodeRid, the Entry Spot ID, operation IDs and
    placement's choices, so a seeded one makes them repeatable; by default they come
    from ``os.urandom``. Raises :class:`InvalidConfiguration` for anything else.
    """

    clock: Callable[[], float] | None = None
    random: _random.Random | None = None

    def __attrs_post_init__(self) -> None:
        if self.clock is not None and not callable(self.clock):
            raise InvalidConfiguration(
                f"clock must be a function returning seconds (e.g. time.time), got "
                f"{self.clock!r}")
        if self.random is not None and not isinstance(self.random, _random.Random):
            raise InvalidConfiguration(
                f"random must be a random.Random (e.g. random.Random(7)), got "
                f"{type(self.random).__name__}")


@attrs.frozen(kw_only=True)
class NodeOptions:
    """What a running node reads of its options: the validated ``timing`` and ``capacity``
    groups, flat, plus the endpoint its descriptor publishes (built by :meth:`of`).
    """

    endpoint: str
    route_cache_max_age: float
    message_follow_duration: float
    instance_idle_timeout: float
    idle_sweep_interval: float
    active_object_ceiling: int
    application_lane: LaneBounds
    lifecycle_lane: LaneBounds
    lease: float
    default_timeout: float
    placement_weight: float
    gc_freeze_after: int = DEFAULT_GC_FREEZE_AFTER
    reminder_scan_interval: float = 0.25
    route_cache: RouteCacheConfig = attrs.field(init=False)

    @route_cache.default
    def _route_cache(self) -> RouteCacheConfig:
        return RouteCacheConfig(self.route_cache_max_age, self.message_follow_duration)

    @classmethod
    def of(cls, timing: TimingOptions, capacity: CapacityOptions, endpoint: str
           ) -> NodeOptions:
        """The flat view of ``timing`` and ``capacity`` (both validated when built)."""
        return cls(endpoint=endpoint, **attrs.asdict(timing, recurse=False),
                   **attrs.asdict(capacity, recurse=False))

    @property
    def placement_max_age(self) -> float:
        """How long placement may reuse the descriptor claims it read (store clock, seconds).

        A tenth of the shorter of the lease and the route cache's age: 1 s by default.
        The mesh directory reuses the same read for as long (``mesh.peers``).
        """
        return min(self.lease, self.route_cache_max_age) / 10

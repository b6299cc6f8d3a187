"""Durable reminders per store backend: how many a node delivers a second, and how late.

Theory of operation
-------------------
:func:`measure_reminders` opens one node per backend (``memory://``, a SQLite file, the
Redis at ``redis_url``, and Redis Cluster when a ``redis+cluster://`` URL is given) with
``count`` resident Instance Spots (10,000 by default), each of which sets one durable
reminder through ``ctx.remind`` (100 arming requests in flight):

- ``reminders_fired_per_s``: every reminder due at the same moment, after all are set;
  the node's delivery rate from the first delivery to the last (a take of its free
  delivery slots, a request to each Spot, a ``reminder_done`` each);
- ``reminder_lag_ms``: ``{"p50", "p99"}`` of how late a reminder reached its handler
  (``ctx.now() - msg.due``) with ``count`` reminders registered: a tenth of them due,
  spread evenly over :data:`SPREAD` seconds after all are set, the others due long after
  the run -- the documented lag (docs/reminders.md: within ``reminder_scan_interval`` of
  the due, plus the call), which the reminders that are not due must not lengthen.

Both measure the whole path of production -- the store's take, its index, the delivery
request, the done -- on the default options. A backend that cannot be opened is ``null``
with the reason under ``unavailable``. Nothing here is a test: no figure is asserted.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Final

import attrs
import trio

import zlink_trio as zl
from zlink_trio.bench.stores import bench_store_url

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ("measure_reminders",)

#: Seconds the dues of the lag figure are spread over.
SPREAD: Final = 5.0
#: Arming requests in flight.
IN_FLIGHT: Final = 100


@attrs.frozen
class Arm:
    """Set the one reminder, due at ``at`` on the store's clock."""

    at: float


@attrs.frozen
class Armed:
    due: float


class _Rung:
    """(store-clock lateness, delivery time) of each delivery of the running measurement,
    and an event set once ``expected`` arrived."""

    def __init__(self) -> None:
        self.expect(0)

    def expect(self, count: int) -> None:
        self.deliveries: list[tuple[float, float]] = []
        self.expected = count
        self.all_in = trio.Event()

    def note(self, late: float) -> None:
        self.deliveries.append((late, trio.current_time()))
        if len(self.deliveries) >= self.expected:
            self.all_in.set()


_RUNG: Final = _Rung()


@zl.instance_spot("bench.alarm", relocation=zl.RecreateOnRelocation())
class Alarm:
    """A Spot that sets one reminder and notes how late it came."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx

    @zl.handler
    async def arm(self, msg: Arm) -> Armed:
        reminder = await self.ctx.remind("alarm", at=msg.at)
        return Armed(reminder.due)

    @zl.handler
    async def rung(self, msg: zl.Reminder) -> None:
        _RUNG.note(self.ctx.now() - msg.due)


async def _arm(node: zl.Node, prefix: str, dues: Sequence[float]) -> None:
    limiter = trio.CapacityLimiter(IN_FLIGHT)

    async def one(i: int) -> None:
        async with limiter:
            await node.client.request(f"{prefix}-{i}", Arm(dues[i]), reply=Armed) \
                .instance_spot("bench.alarm")

    async with trio.open_nursery() as nursery:
        for i in range(len(dues)):
            nursery.start_soon(one, i)


async def _rung(limit: float) -> list[tuple[float, float]]:
    with trio.move_on_after(limit):
        await _RUNG.all_in.wait()
    return _RUNG.deliveries


async def _one_backend(url: str, count: int) -> tuple[float, dict[str, float]]:
    """(fired per second, lateness p50/p99 in ms) on the store at ``url``."""
    async with zl.open_node("bench-reminders", store=url, spots=[Alarm], listen=None,
                            active_object_ceiling=3 * count) as node:
        # How fast arming goes here, to put every due after the arming ends.
        started = trio.current_time()
        probe = min(200, count)
        await _arm(node, "probe", [1e12] * probe)  # never due in the run
        per_arm = (trio.current_time() - started) / probe
        margin = 2.0 * per_arm * count + 1.0
        # Burst: every reminder due at one moment.
        _RUNG.expect(count)
        due = _store_now(node) + margin
        await _arm(node, "burst", [due] * count)
        burst = await _rung(margin + 120.0)
        times = [at for _, at in burst]
        fired = ((len(times) - 1) / max(max(times) - min(times), 1e-9) if len(times) > 1
                 else 0.0)
        # Lag: count registered, a tenth due evenly over SPREAD seconds after the arming.
        gc.collect()
        due_now = max(1, count // 10)
        _RUNG.expect(due_now)
        start = _store_now(node) + margin
        await _arm(node, "spread", [start + SPREAD * i / due_now if i < due_now else 1e12
                                    for i in range(count)])
        lateness = sorted(late for late, _ in await _rung(margin + SPREAD + 60.0))
    if not lateness:
        return fired, {"p50": float("nan"), "p99": float("nan")}
    return fired, {"p50": 1000 * lateness[len(lateness) // 2],
                   "p99": 1000 * lateness[min(len(lateness) - 1,
                                              int(0.99 * len(lateness)))]}


def _store_now(node: zl.Node) -> float:
    probe = node.inspection.spot_context("probe-0")
    assert probe is not None
    return probe.now()


async def measure_reminders(backends: Sequence[str], *, count: int, redis_url: str,
                            cluster_url: str = "") -> dict[str, object]:
    """``reminders_fired_per_s`` and ``reminder_lag_ms`` (module docstring), each
    ``{backend: figure or None}``, plus ``unavailable`` when a backend could not be
    opened; ``cluster_url`` adds ``redis_cluster``."""
    if cluster_url and "redis_cluster" not in backends:
        backends = [*backends, "redis_cluster"]
    fired: dict[str, object] = {}
    lag: dict[str, object] = {}
    unavailable: dict[str, str] = {}
    for backend in backends:
        gc.collect()
        try:
            async with bench_store_url(backend, redis_url=redis_url,
                                       cluster_url=cluster_url) as url:
                rate, late = await _one_backend(url, count)
        except (zl.ZLinkError, OSError) as exc:
            unavailable[backend] = f"{type(exc).__name__}: {exc}"
            fired[backend] = lag[backend] = None
            continue
        fired[backend] = round(rate)
        lag[backend] = {k: round(v, 1) for k, v in late.items()}
    result: dict[str, object] = {"reminders_fired_per_s": fired, "reminder_lag_ms": lag}
    if unavailable:
        result["unavailable"] = unavailable
    return result

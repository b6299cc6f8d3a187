"""Relocation figures: how long a planned move takes, idle and under load, and what it loses.

Theory of operation
-------------------
:func:`measure_relocation` runs, per store backend, three nodes of this process on
one fresh store URL with real loopback links between them
(:func:`zlink_trio.bench.moving.three_nodes`), and times ``node.relocate(spot_id,
to=...)`` from the call to its COMMITTED result:

- **idle**: one Ready :class:`~zlink_trio.bench.moving.Moving` Spot nobody calls,
  moved back and forth between ``bench-a`` and ``bench-b`` (``moves`` times, after
  one untimed round trip that opens the link);
- **loaded**: the same while ``bench-c`` sends the Spot :data:`LOAD_PER_S` messages
  per second, requests and one-way sends in turn, paced on a schedule
  (``trio.sleep_until``; each message its own task, so one held by a move does not
  delay the next). Each loaded Spot moves once there and once back (``bench-a`` ->
  ``bench-b`` -> ``bench-a``), :data:`GAP` apart, and the next pair of moves takes a
  new Spot: ``bench-c``'s route cache keeps naming ``bench-a`` (it called before the
  first move), so its messages reach the Spot directly when it is at ``bench-a``,
  through the move's hold and relay while it moves, and through ``bench-a``'s Message
  Follow route while it is at ``bench-b`` -- the callers a relocation is for. (A third
  move of the same Spot would leave ``bench-a`` a route for a newer owner generation
  than that cache entry names, which it refuses until the entry expires; see
  docs/performance.md.)

Every message carries a sequence number; the Spot records the numbers it handles
and its record moves with it (``PreserveStateWith``). After the load has stopped
and every message has been answered or admitted, each loaded Spot's record is read
back (after ``bench-c``'s last message to it: one sender's messages keep their
order) and compared with what ``bench-c`` got accepted -- a request that returned
its reply, a send that returned (:func:`zlink_trio.bench.moving.tally`):
``relocation_lost_messages`` and ``relocation_duplicated_messages``. They are
reported as measured -- both should be 0 -- and never asserted; ``relocation_load``
says how many messages were sent, accepted and refused, and the rate reached.

The Message Follow relay rate (:mod:`zlink_trio.bench.follow`) is measured on one
of the backends, SQLite when it is measured (neither path reads the store).

A backend that cannot be opened (no Redis running) is ``null`` in every figure,
with the reason under ``unavailable`` (``{backend: reason}``); a move that does not
commit makes the backend's figures ``null`` with the reason under
``unavailable["relocation_<backend>"]``. Nothing here is a test: nothing is asserted.
"""

from __future__ import annotations

import gc
import itertools
import statistics
import time
from typing import TYPE_CHECKING, Final

import attrs
import trio

import zlink_trio as zl
from zlink_trio.bench.follow import measure_follow
from zlink_trio.bench.moving import (
    HANDLED,
    MOVING_TYPE,
    Mark,
    Report,
    Seen,
    mesh_url,
    tally,
    three_nodes,
)
from zlink_trio.store import open_store

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ("GAP", "LOAD_PER_S", "measure_relocation")

#: Messages per second ``bench-c`` sends the moving Spot in the loaded figure (requests
#: and sends in turn).
LOAD_PER_S: Final = 1_000
#: Seconds of load before, between and after the two moves of one loaded Spot.
GAP: Final = 0.03
#: Deadline of one benchmark call or move (generous: the machine may be loaded).
CALL_TIMEOUT: Final = 30.0


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 3), "p99": round(p99, 3)}


async def _move(node: zl.Node, spot_id: str, to: str) -> float:
    """Relocate ``spot_id`` from ``node`` to ``to``; milliseconds to the COMMITTED result."""
    start = time.perf_counter()
    result = await node.relocate(spot_id, to=to, timeout=CALL_TIMEOUT)
    elapsed = (time.perf_counter() - start) * 1000
    if result.outcome is not zl.RelocationOutcome.COMMITTED:
        raise zl.Unavailable(f"moving Spot {spot_id!r} from {node.node_id!r} to {to!r} ended "
                             f"{result.outcome.value.upper()}: {result.reason}")
    return elapsed


async def _idle(a: zl.Node, b: zl.Node, moves: int) -> list[float]:
    spot_id = "bench-relocation-idle"
    await a.client.request(spot_id, Mark(0), reply=Mark).instance_spot(MOVING_TYPE)
    await _move(a, spot_id, "bench-b")  # untimed: opens the link both ways
    await _move(b, spot_id, "bench-a")
    gc.collect()
    samples: list[float] = []
    for i in range(moves):
        node, to = ((a, "bench-b"), (b, "bench-a"))[i % 2]
        samples.append(await _move(node, spot_id, to))
    return samples


@attrs.define
class _Load:
    """What ``bench-c`` sent while the loaded moves ran."""

    target: str = ""
    sent: int = 0
    failed: int = 0
    accepted: list[tuple[str, int]] = attrs.Factory(list)
    spots: list[str] = attrs.Factory(list)
    #: Requests sent on the schedule, and for how long.
    paced: int = 0
    seconds: float = 0.0

    def next_n(self) -> int:
        self.sent += 1
        return self.sent

    async def request(self, node: zl.Node, spot_id: str, n: int, *,
                      activate: bool = False) -> None:
        """Request ``Mark(n)``; accepted when the reply came back."""
        call = node.client.request(spot_id, Mark(n), reply=Mark).timeout(CALL_TIMEOUT)
        try:
            await (call.instance_spot(MOVING_TYPE) if activate else call)
        except zl.ZLinkError:
            self.failed += 1
        else:
            self.accepted.append((spot_id, n))

    async def send(self, node: zl.Node, spot_id: str, n: int) -> None:
        """Send ``Mark(n)`` one way; accepted when the send returned (outbound admission)."""
        try:
            await node.client.send(spot_id, Mark(n)).timeout(CALL_TIMEOUT)
        except zl.ZLinkError:
            self.failed += 1
        else:
            self.accepted.append((spot_id, n))

    async def run(self, node: zl.Node, per_s: float, *,
                  task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        """Send to ``self.target`` on schedule until cancelled; waits for every request."""
        async with trio.open_nursery() as requests:
            with trio.CancelScope() as pacing:
                task_status.started(pacing)
                start = trio.current_time()
                for i in itertools.count(1):
                    await trio.sleep_until(start + i / per_s)
                    one = self.send if i % 2 else self.request
                    requests.start_soon(one, node, self.target, self.next_n())
                    self.paced = i
            self.seconds = trio.current_time() - start


async def _loaded(a: zl.Node, b: zl.Node, c: zl.Node, moves: int) -> dict[str, object]:
    HANDLED.clear()
    load = _Load()
    samples: list[float] = []
    failure: zl.ZLinkError | None = None
    gc.collect()
    async with trio.open_nursery() as nursery:
        pacing: trio.CancelScope | None = None
        try:
            for k in range(max(1, moves // 2)):
                spot_id = f"bench-relocation-loaded-{k}"
                await load.request(a, spot_id, load.next_n(), activate=True)  # at bench-a
                await load.request(c, spot_id, load.next_n())  # c's route names bench-a
                load.spots.append(spot_id)
                load.target = spot_id
                if pacing is None:
                    pacing = await nursery.start(load.run, c, LOAD_PER_S)
                await trio.sleep(GAP)
                for node, to in ((a, "bench-b"), (b, "bench-a")):
                    samples.append(await _move(node, spot_id, to))
                    await trio.sleep(GAP)
        except zl.ZLinkError as exc:
            failure = exc
        if pacing is not None:
            pacing.cancel()
    if failure is not None:
        raise failure
    records = {spot_id: (await c.client.request(spot_id, Report(), reply=Seen).timeout(
        CALL_TIMEOUT)).seqs for spot_id in load.spots}
    found = tally(records, load.accepted)
    return {"ms": _ms(samples), "lost": found.lost, "duplicated": found.duplicated,
            "messages": {"sent": load.sent, "accepted": len(load.accepted),
                         "failed": load.failed,
                         "per_s": round(load.paced / load.seconds) if load.seconds else None}}


async def _backend(url: str, moves: int) -> dict[str, object]:
    async with three_nodes(url) as (a, b, c):
        idle = await _idle(a, b, moves)
        loaded = await _loaded(a, b, c, moves)
    return {"idle": _ms(idle), **loaded}


async def _opens(url: str) -> None:
    """Raises what opening the store raises (the backend is unavailable then)."""
    async with open_store(url) as store:
        await store.location.statistics()


async def measure_relocation(backends: Sequence[str], *, moves: int, redis_url: str,
                             quick: bool) -> dict[str, object]:
    """The relocation figures for each of ``backends``; a JSON-ready dict.

    ``moves`` timed moves per backend and mode. Keys: ``relocation_ms`` (``{backend:
    {"idle": {"p50", "p99"}, "loaded": {"p50", "p99"}}}``, milliseconds),
    ``relocation_lost_messages``, ``relocation_duplicated_messages`` (``{backend:
    int}``), ``relocation_load`` (``{backend: {"sent", "accepted", "failed",
    "per_s"}}``: the loaded runs' requests), ``follow_relay_per_s`` and
    ``follow_relay_ratio`` (:mod:`zlink_trio.bench.follow`; ``quick``: short), plus
    ``unavailable`` when a backend or a figure could not be measured.
    """
    ms: dict[str, object] = {}
    lost: dict[str, object] = {}
    duplicated: dict[str, object] = {}
    load: dict[str, object] = {}
    unavailable: dict[str, str] = {}
    opened: list[str] = []
    for backend in backends:
        ms[backend] = lost[backend] = duplicated[backend] = load[backend] = None
        try:
            async with mesh_url(backend, redis_url=redis_url) as url:
                try:
                    await _opens(url)
                except (zl.ZLinkError, OSError) as exc:
                    unavailable[backend] = f"{type(exc).__name__}: {exc}"
                    continue
                opened.append(backend)
                figures = await _backend(url, moves)
        except (zl.ZLinkError, OSError) as exc:
            unavailable[f"relocation_{backend}"] = f"{type(exc).__name__}: {exc}"
            continue
        ms[backend] = {"idle": figures["idle"], "loaded": figures["ms"]}
        lost[backend] = figures["lost"]
        duplicated[backend] = figures["duplicated"]
        load[backend] = figures["messages"]
    result: dict[str, object] = {
        "relocation_ms": ms,
        "relocation_lost_messages": lost,
        "relocation_duplicated_messages": duplicated,
        "relocation_load": load,
    }
    follow_backend = "sqlite" if "sqlite" in opened else next(iter(opened), None)
    result["follow_relay_per_s"] = result["follow_relay_ratio"] = None
    if follow_backend is None:
        unavailable["follow_relay"] = "no store backend could be opened"
    else:
        try:
            async with mesh_url(follow_backend, redis_url=redis_url) as url:
                result.update(await measure_follow(url, quick=quick))
        except (zl.ZLinkError, OSError) as exc:
            unavailable["follow_relay"] = f"{type(exc).__name__}: {exc}"
    if unavailable:
        result["unavailable"] = unavailable
    return result

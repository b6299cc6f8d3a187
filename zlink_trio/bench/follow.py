"""The Message Follow relay rate, beside direct remote requests in the same process layout.

Theory of operation
-------------------
:func:`measure_follow` runs the three nodes of the relocation figures
(:func:`zlink_trio.bench.moving.three_nodes`) on one store URL. In every round a
new :class:`~zlink_trio.bench.moving.Moving` Spot is activated at ``bench-a`` and
``bench-c`` calls it once, so ``bench-c``'s route cache names ``bench-a``. Then,
one request at a time for a fixed time each:

- **direct**: ``bench-c`` -> ``bench-a``, which runs the handler (command 39,
  route kind 1, over one link) -- the same figure as ``remote_requests_per_s``, with
  both nodes in this process;
- ``bench-a`` relocates the Spot to ``bench-b``;
- **follow**: ``bench-c`` -> ``bench-a`` -> ``bench-b``: the cached route still
  names ``bench-a``, which no longer hosts the Spot and sends every request on along
  its Message Follow route (route kind 3); the reply comes back the same way.

A route cache entry lives ``route_cache_max_age`` (15 s), and at most until the
owner lease it was cached under ends (>= ~6 s after the claim was read); a round
lasts ~2 s from ``bench-c``'s first call. That no follow request resolved the Spot
afresh is checked with ``bench-c``'s route cache misses, which must not move while
the follow figure runs (else the figure is ``null``, with the reason). Rounds
alternate the two figures and the best of each is reported (load on a shared
machine only lowers a rate): ``follow_relay_per_s`` and ``follow_relay_ratio``
(follow / direct). Nothing here is a test: nothing is asserted.
"""

from __future__ import annotations

import gc
import time
from typing import Final

import trio

import zlink_trio as zl
from zlink_trio.bench.moving import MOVING_TYPE, Mark, three_nodes

__all__ = ("measure_follow",)

#: Deadline of one benchmark call (generous: the machine may be loaded).
CALL_TIMEOUT: Final = 30.0
#: Untimed requests before each figure (link, route cache, allocator).
WARM: Final = 20


async def _rate(node: zl.Node, spot_id: str, seconds: float) -> float:
    """Requests to ``spot_id`` per second, one at a time, for ``seconds``."""
    for n in range(WARM):
        await node.client.request(spot_id, Mark(n), reply=Mark).timeout(CALL_TIMEOUT)
    done = 0
    stop = trio.current_time() + seconds
    start = time.perf_counter()
    while trio.current_time() < stop:
        await node.client.request(spot_id, Mark(done), reply=Mark).timeout(CALL_TIMEOUT)
        done += 1
    return done / (time.perf_counter() - start)


async def measure_follow(url: str, *, quick: bool) -> dict[str, object]:
    """``follow_relay_per_s`` and ``follow_relay_ratio`` on the store at ``url``.

    ``quick``: one round of 0.2 s per figure; otherwise three rounds of 1 s. Raises
    :class:`~zlink_trio.Unavailable` when a follow request resolved the Spot afresh
    (the figure would not be a relay one) or the move did not commit, and what the
    nodes raise if a call fails.
    """
    rounds, seconds = (1, 0.2) if quick else (3, 1.0)
    best_direct = best_follow = 0.0
    async with three_nodes(url) as (a, _b, c):
        for r in range(rounds):
            spot_id = f"bench-follow-{r}"
            await a.client.request(spot_id, Mark(0), reply=Mark).instance_spot(
                MOVING_TYPE).timeout(CALL_TIMEOUT)
            gc.collect()
            best_direct = max(best_direct, await _rate(c, spot_id, seconds))
            moved = await a.relocate(spot_id, to="bench-b", timeout=CALL_TIMEOUT)
            if moved.outcome is not zl.RelocationOutcome.COMMITTED:
                raise zl.Unavailable(f"moving Spot {spot_id!r} to bench-b ended "
                                     f"{moved.outcome.value.upper()}: {moved.reason}")
            misses = c.statistics().route_cache.misses
            rate = await _rate(c, spot_id, seconds)
            if c.statistics().route_cache.misses != misses:
                raise zl.Unavailable(
                    "bench-c resolved the moved Spot afresh while the follow figure ran (its "
                    "route cache entry expired), so the requests were not relayed")
            best_follow = max(best_follow, rate)
    return {"follow_relay_per_s": round(best_follow),
            "follow_relay_ratio": round(best_follow / best_direct, 3)}

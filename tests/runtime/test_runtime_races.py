"""Randomised schedules of concurrent create / get_or_create / close / cold activation / idle
eviction on one node, checked against the spec's invariants.

Hypothesis chooses the operations, their IDs, start times and how many scheduling points
each task yields before it starts (so tasks released at the same instant interleave
differently); each example runs in its own ``trio.run`` on a ``MockClock``. Invariants:

- per ID, incarnations never overlap and generations strictly increase (so the factory
  runs at most once per (ID, generation) and at most one incarnation is live per ID);
- every call that succeeded had its message handled exactly once; a call that failed
  before admission had it handled never; a deadline leaves it at most once;
- the first message an Instance incarnation handles is one sent with Instance intent
  (the activating message runs first; nothing without intent overtakes it);
- a REJECTED result only answers an operation whose own request was rejected, and
  EXISTING / CREATED name an incarnation that became Ready;
- every lifecycle transition taken is one the compiled statecharts define.
"""

from __future__ import annotations

import itertools
from collections import Counter as Tally
from typing import Any

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_spots import Add, Counter, Note, Room, RoomSpec, Total, journal

import zlink_trio as zl
from zlink_trio.testing import Recorder

INSTANCE_IDS = ("a", "b")
ROOM_IDS = ("r", "s")

op_strategy = st.one_of(
    st.tuples(st.sampled_from(["req", "send"]), st.sampled_from(INSTANCE_IDS), st.booleans()),
    st.tuples(st.just("goc"), st.sampled_from(ROOM_IDS), st.sampled_from(["ok", "reject"])),
    st.tuples(st.just("close"), st.sampled_from(ROOM_IDS), st.just(False)),
    st.tuples(st.just("selfclose"), st.sampled_from(INSTANCE_IDS), st.just(True)),
)
scheduled = st.tuples(op_strategy, st.sampled_from([0.0, 0.0, 0.0, 0.2, 1.0, 2.5]),
                      st.integers(0, 3))

ALLOWED_ERRORS = (zl.NotFound, zl.StaleRoute, zl.DeadlineExceeded)


async def _scenario(ops: list[tuple[tuple[str, str, Any], float, int]]) -> None:
    events = journal()
    outcomes: list[tuple[str, int, str, object]] = []  # (kind, n, id, result or error)
    intent_ns: set[int] = set()
    numbers = itertools.count(1)

    async def run(op: tuple[str, str, Any], delay: float, yields: int) -> None:
        kind, spot_id, arg = op
        await trio.sleep(delay)
        for _ in range(yields):
            await trio.lowlevel.checkpoint()
        n = next(numbers)
        try:
            if kind in ("req", "send", "selfclose"):
                msg: object = Note("close-me") if kind == "selfclose" else Add(n)
                if arg:
                    intent_ns.add(n)
                if kind == "req":
                    call = node.client.request(spot_id, msg, reply=Total).timeout(3)
                else:
                    call = node.client.send(spot_id, msg).timeout(3)  # type: ignore[assignment]
                if arg:
                    call = call.instance_spot("counter")
                result: object = await call
            elif kind == "goc":
                request = RoomSpec(arg)
                result = await node.spots.get_or_create(spot_id, "room").request(request) \
                    .timeout(3)
                assert isinstance(result, zl.CreateResult)
                if result.state is zl.CreateState.REJECTED:
                    assert arg == "reject", "another attempt's REJECTED was shared"
            else:
                ref = await node.spots.find(spot_id)
                result = None if ref is None else await node.spots.close(ref)
        except (zl.InvalidOperation, *ALLOWED_ERRORS) as exc:
            result = exc
        if isinstance(result, zl.InvalidOperation):
            # Only a close that lost to a re-create may see another generation.
            assert kind == "close", result
            assert "never retargets" in result.message, result
        outcomes.append((kind, n, spot_id, result))

    with Recorder() as record, trio.fail_after(120):  # every chart step, checked
        async with zl.open_node("node-a", spots=[Counter, Room], instance_idle_timeout=1.5,
                                idle_sweep_interval=0.25, default_timeout=5) as node:
            async with trio.open_nursery() as nursery:
                for op, delay, yields in ops:
                    nursery.start_soon(run, op, delay, yields)
            await trio.sleep(1)
    record.check()

    # Incarnations of one ID never overlap; generations strictly increase.
    for spot_id in INSTANCE_IDS + ROOM_IDS:
        life = [e for e in events if e[0] in ("factory", "close") and e[1] == spot_id]
        assert [e[0] for e in life] == ["factory", "close"] * (len(life) // 2), life
        gens = [e[2] for e in life if e[0] == "factory"]
        assert gens == sorted(set(gens)), life
        assert [e[2] for e in life if e[0] == "close"] == gens
    # EXISTING / CREATED name an incarnation that became Ready (not a declined attempt).
    failed = {(e[1], e[2]) for e in events
              if e[0] == "close" and e[3] is zl.CloseReason.ACTIVATION_FAILED}
    built = {(e[1], e[2]) for e in events if e[0] == "factory"}
    for kind, _n, spot_id, result in outcomes:
        if kind == "goc" and isinstance(result, zl.CreateResult):
            key = (spot_id, result.ref.generation)
            assert key in built
            assert (key in failed) == (result.state is zl.CreateState.REJECTED), result
    # Delivered exactly once when the caller saw success, never when it saw an error.
    handled = Tally(e[3] for e in events if e[0] == "handle")
    for kind, n, _spot_id, result in outcomes:
        if kind not in ("req", "send"):
            continue
        if isinstance(result, zl.DeadlineExceeded):
            assert handled[n] <= 1
        elif isinstance(result, zl.ZLinkError):
            assert handled[n] == 0, (kind, n, result)
        else:
            assert handled[n] == 1, (kind, n, result)
            if kind == "req":
                assert isinstance(result, Total)
    # The first message of every Instance incarnation was sent with Instance intent.
    for index, event in enumerate(events):
        if event[0] == "factory" and event[1] in INSTANCE_IDS:
            first = next((e for e in events[index + 1:]
                          if e[0] in ("handle", "note") and e[1] == event[1]), None)
            if first is not None and first[0] == "handle":
                assert first[3] in intent_ns, (event, first)
    assert all(h == 1 for h in handled.values())


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(scheduled, min_size=1, max_size=14))
def test_concurrent_lifecycles_keep_the_spec_invariants(ops):
    trio.run(_scenario, ops, clock=trio.testing.MockClock(autojump_threshold=0))

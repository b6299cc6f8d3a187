"""The runtime invariants ``SpotRaceModel`` checks, as functions of what the model saw.

Theory of operation
-------------------
Each check reads the operations the model started (:class:`RaceOp`: what was called,
from which node, with what message, and how it ended) and the cluster's
:class:`~zlink_trio.testing.recorder.Recorder` (factory runs, turns, closes, logs), and
raises ``AssertionError`` saying what broke.  :func:`check_authority` also reads the
nodes' catalogs and the store.  They run on a settled snapshot, after every rule
(:func:`check_exactly_once` once every operation ended).

Messages are told apart by *value*: the kit cannot put an operation number into a
user's message, so the exactly-once checks compare multisets -- a message may run at
most as often as calls that were not refused sent it, and must run at least as often
as calls that got a reply or were admitted (less the sends that may legitimately be
lost, :func:`may_be_lost`).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Final

import attrs

import zlink_trio as zl
from zlink_trio.core.records import AuthorityState

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from zlink_trio.testing.cluster import TestCluster
    from zlink_trio.testing.recorder import Recorder

__all__ = ("AMBIGUOUS", "ENDINGS", "RaceOp", "ReminderWrite", "check_at_most_once",
           "check_authority", "check_deadlines", "check_durable_state",
           "check_exactly_once", "check_factory_runs", "check_first_turns",
           "check_reminders_apart", "check_reminders_delivered", "may_be_lost",
           "undelivered_reminders")

#: Errors that may leave it open whether the message ran (the call cannot tell).
AMBIGUOUS: Final = (zl.DeadlineExceeded, zl.Unavailable)
#: Close reasons after which an admitted send may legitimately never run.
ENDINGS: Final = frozenset({zl.CloseReason.CLOSED, zl.CloseReason.IDLE_EVICTED,
                            zl.CloseReason.OWNERSHIP_LOST, zl.CloseReason.ACTIVATION_FAILED})


@attrs.define(eq=False)
class RaceOp:
    """One operation the model started, and how it ended."""

    n: int
    kind: str  # request | send | goc | create | close | relocate
    spot_id: str
    node: str
    #: With Instance intent (request, send); from the owner (relocate).
    intent: bool = False
    timeout: float | None = None
    message: object = None
    ref: zl.SpotRef | None = None
    started_at: float = math.nan
    deadline: float = math.inf
    done: bool = False
    outcome: object = None
    ended_at: float = math.inf


@attrs.define(eq=False)
class ReminderWrite:
    """One ``ctx.remind`` (``action`` "set") or ``ctx.cancel_reminder`` ("cancel") the
    model made through the context of ``spot_id``'s incarnation ``generation``, and how it
    ended: the :class:`zl.Reminder` stored or whether one was cancelled, or the error."""

    n: int
    action: str
    spot_id: str
    node: str
    generation: int
    name: str
    #: Written through an incarnation that had ended (the ``zombie_remind`` rule).
    zombie: bool = False
    started_at: float = math.nan
    ended_at: float = math.nan
    done: bool = False
    outcome: object = None


async def check_authority(cluster: TestCluster, spot_ids: Sequence[str],
                          ops: Sequence[RaceOp]) -> None:
    """One Ready authority: at most one node serves an ID, and a Ready record's owner
    serves exactly that generation (unless a move of it runs)."""
    moving = {op.spot_id for op in ops if op.kind == "relocate" and not op.done}
    for spot_id in spot_ids:
        serving = [node.node_id for node in cluster
                   if (hosted := node.inspection.hosted_spot(spot_id)) is not None
                   and hosted.state == "serving"]
        assert len(serving) <= 1, f"{spot_id} is served by {serving}"
        with cluster.in_flight.io("the race model's own store read"):
            found = await cluster.store.location.find(spot_id)
        if found is None or found.state is not AuthorityState.READY or spot_id in moving:
            continue
        owners = [node for node in cluster if node.node_rid == found.owner.node_rid]
        hosted = owners[0].inspection.hosted_spot(spot_id) if owners else None
        served = None if hosted is None else hosted.generation
        assert served == found.object_generation, (
            f"{spot_id}: the store says Ready generation {found.object_generation} "
            f"at {found.owner}, which serves {served}")


def check_factory_runs(ops: Sequence[RaceOp], record: Recorder) -> None:
    """Factory once per incarnation: per (ID, generation), plus once per move asked."""
    moves = Counter(op.spot_id for op in ops if op.kind == "relocate")
    runs = Counter((r.spot_id, r.generation) for r in record.factory_runs)
    for (spot_id, generation), count in runs.items():
        assert count <= 1 + moves[spot_id], (
            f"the factory of {spot_id}@{generation} ran {count} times "
            f"({moves[spot_id]} relocations asked)")


def check_first_turns(ops: Sequence[RaceOp], record: Recorder,
                      instance_ids: set[str]) -> None:
    """First message first: an Instance incarnation's first turn ran a message some call
    with Instance intent sent (the one that activated it)."""
    for (spot_id, generation), turns in record.turns_by_incarnation().items():
        if spot_id not in instance_ids or isinstance(turns[0].message, zl.Reminder):
            continue  # (a due reminder activates its Spot with Instance intent too)
        first = turns[0]
        intended = {repr(op.message) for op in ops
                    if op.spot_id == spot_id and op.intent and op.kind != "relocate"}
        assert repr(first.message) in intended, (
            f"{spot_id}@{generation} first handled {first.message!r} on {first.node}, "
            "which no call with Instance intent sent: a message overtook the one that "
            "activated it")


def check_at_most_once(ops: Sequence[RaceOp], record: Recorder) -> None:
    """No message runs more often than calls that did not fail before admission sent it
    (a reminder's delivery is no call's: :func:`check_reminders_apart` judges those)."""
    handled = Counter((t.spot_id, repr(t.message)) for t in record.turns
                      if not isinstance(t.message, zl.Reminder))
    possible = Counter((op.spot_id, repr(op.message)) for op in ops
                       if op.kind in ("request", "send")
                       and (not op.done or not isinstance(op.outcome, Exception)
                            or isinstance(op.outcome, AMBIGUOUS)))
    for key, count in handled.items():
        assert count <= possible[key], (
            f"{key[0]}: {key[1]} ran {count} times, but only {possible[key]} calls sent "
            "it that did not fail before admission")


def check_deadlines(ops: Sequence[RaceOp], now: float) -> None:
    """Every call bounded: none still runs past its deadline."""
    late = [op for op in ops if not op.done and now > op.deadline + 1e-9]
    assert not late, f"operations outlived their deadline at t={now}: {late}"


def check_exactly_once(ops: Sequence[RaceOp], record: Recorder) -> None:
    """At the end: every request that got a reply and every admitted send ran (unless
    :func:`may_be_lost`)."""
    handled = Counter((t.spot_id, repr(t.message)) for t in record.turns)
    needed: Counter[tuple[str, str]] = Counter()
    for op in ops:
        replied = op.kind == "request" and not isinstance(op.outcome, Exception)
        admitted = op.kind == "send" and op.outcome is None and not may_be_lost(op, record)
        if replied or admitted:
            needed[op.spot_id, repr(op.message)] += 1
    for key, count in needed.items():
        assert handled[key] >= count, (
            f"{key[0]}: {key[1]} was accepted {count} times (a reply, or an admitted "
            f"send to a Spot that never closed after) but ran {handled[key]} times; "
            f"the calls: {[op for op in ops if op.spot_id == key[0]]}; "
            f"closes: {record.closes_of(key[0])}; logs: "
            f"{[log for log in record.logs if repr(key[0]) in log]}")


def may_be_lost(send: RaceOp, record: Recorder) -> bool:
    """Whether an admitted one-way send may legitimately never run: its Spot closed (or
    idled out, or lost its owner) after it was sent; or it was sent on a route cached
    before such a close, and the node that no longer owns the Spot dropped it with a
    warning (a remote send returns once sent, before the target admits it)."""
    closes = [c for c in record.closes_of(send.spot_id) if c.reason in ENDINGS]
    if any(c.at >= send.started_at - 1e-9 for c in closes):
        return True
    dropped = any("was not admitted" in log and repr(send.spot_id) in log
                  for log in record.logs)
    return bool(closes) and dropped


#: The closes after which a User Spot's or an Actor's durable state is gone: the Spot
#: itself ended (Release deletes it); a move, a failed activation or a lost lease
#: release nothing, and restart recovery keeps the state.
_STATE_ENDINGS: Final = frozenset({zl.CloseReason.CLOSED, zl.CloseReason.NODE_SHUTDOWN})


def check_durable_state(record: Recorder, ends_with_close: Callable[[str], bool]) -> None:
    """Durable state (docs/state.md): no write of an incarnation that had ended (closed,
    moved away, its activation failed) is acknowledged -- a zombie's write -- and every
    load reads the last write acknowledged for its Spot before it: nothing after a clear,
    or after the close of a Spot for which ``ends_with_close(spot_id)`` (a User Spot)."""
    endings: dict[str, list[int]] = {}
    for c in record.closes:
        if c.reason in _STATE_ENDINGS and ends_with_close(c.spot_id):
            endings.setdefault(c.spot_id, []).append(c.seq)
    last: dict[str, tuple[int, int, object]] = {}  # spot -> (seq, version, value)
    for e in sorted(record.state_events, key=lambda e: e.seq):
        where = f"{e.action} of {e.spot_id!r} generation {e.generation} on {e.node}"
        if e.action == "load":
            seq, version, value = last.get(e.spot_id, (0, 0, None))
            if any(seq < end < e.seq for end in endings.get(e.spot_id, ())):
                version, value = 0, None
            assert (e.version, e.value) == (version, value), (
                f"{where} read version {e.version} ({e.value!r}); the last write "
                f"acknowledged before it left version {version} ({value!r})")
        elif e.version is not None:
            assert not e.ended, (
                f"{where} was acknowledged after that incarnation ended: a write from "
                "an owner that no longer owns the Spot was applied")
            last[e.spot_id] = (e.seq, e.version, e.value if e.action == "save" else None)


def check_reminders_apart(record: Recorder, writes: Sequence[ReminderWrite]) -> None:
    """Durable reminders (docs/reminders.md): two deliveries of one due never run at the
    same time, and no write through an incarnation that had ended is acknowledged."""
    runs: dict[tuple[str, object], list[tuple[float, float]]] = {}
    for t in record.turns:
        if isinstance(t.message, zl.Reminder):
            end = math.inf if t.ended_at is None else t.ended_at
            for began, ended in runs.get((t.spot_id, t.message), ()):
                assert not (began < end and t.began_at < ended), (
                    f"{t.spot_id}: {t.message!r} ran twice at the same time "
                    f"(from {began} and from {t.began_at})")
            runs.setdefault((t.spot_id, t.message), []).append((t.began_at, end))
    for w in writes:
        assert not (w.zombie and w.done and not isinstance(w.outcome, Exception)), (
            f"the {w.action} of reminder {w.name!r} through {w.spot_id!r} generation "
            f"{w.generation}, which had ended, was acknowledged ({w.outcome!r})")


def undelivered_reminders(writes: Sequence[ReminderWrite], ops: Sequence[RaceOp],
                          record: Recorder, user_ids: Callable[[str], bool]
                          ) -> list[ReminderWrite]:
    """The acknowledged sets whose reminder must reach its Spot but has not yet: not
    cancelled (an acknowledged cancel that found it), its Spot not closed after, if
    ``user_ids(spot_id)`` (a User Spot: its close ends its reminders)."""
    delivered = {(t.spot_id, t.message) for t in record.turns
                 if isinstance(t.message, zl.Reminder) and t.done}
    cancelled = {(w.spot_id, w.name) for w in writes
                 if w.action == "cancel" and w.done and w.outcome is True}
    left = []
    for w in writes:
        if w.action != "set" or w.zombie or not isinstance(w.outcome, zl.Reminder):
            continue
        closed = user_ids(w.spot_id) and any(  # a close that ended after the set began
            op.kind == "close" and op.spot_id == w.spot_id and op.outcome is True
            and op.ended_at >= w.started_at for op in ops)
        if ((w.spot_id, w.name) in cancelled or closed
                or (w.spot_id, w.outcome) in delivered):
            continue
        left.append(w)
    return left


def check_reminders_delivered(writes: Sequence[ReminderWrite], ops: Sequence[RaceOp],
                              record: Recorder, user_ids: Callable[[str], bool]) -> None:
    """At the end, once the clock passed every due by more than a take's hold: every
    reminder set and not ended reached its Spot at least once."""
    left = undelivered_reminders(writes, ops, record, user_ids)
    assert not left, (
        f"reminders set and never delivered: {left}; logs: "
        f"{[log for log in record.logs if 'reminder' in log]}")

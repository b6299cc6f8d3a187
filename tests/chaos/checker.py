"""The chaos checker: pure functions over the callers' and handlers' JSON-lines logs.

Inputs (see ``node_worker.py``): one **call** line per call a caller made (``rid, spot,
start, end, deadline, outcome``; ``outcome`` is ``"ok"`` or the typed error's class
name) and one **handler** line per message a Spot handled (``rid, spot, node,
node_rid, generation, start, end``), plus the times the fault healed (``heals``: the
heal, or the restart, after which every Spot must serve again). :func:`check` returns
a :class:`Verdict`:

* **lost** -- acknowledged (``ok``) and no handler line: the reply claims an effect
  nobody applied;
* **duplicated** -- a request ID with two or more handler lines, split into the
  acknowledged ones (an error) and the unacknowledged ones (ran twice although the
  caller saw an error or nothing; reported too);
* **overlaps** -- two handler turns for one Spot whose ``[start, end]`` intersect: by one
  owner (a Spot runs one turn at a time), or by two owners (node lifecycle
  ``node_rid`` / ``generation``) that both held their lease when their turns began.
  **frozen overlaps** are reported apart: the earlier turn began before its owner's
  lease deadline, the process was frozen in it (SIGSTOP, a long GC pause), and the later
  turn -- the new owner's -- began only after that deadline. No runtime can stop the
  code of a frozen process from going on once it is resumed; what it must not do is
  acknowledge that turn, which a zombie ack (below) catches;
* **zombie turns** -- handler lines that ended after the lease deadline their own node
  lifecycle held at that moment (a turn that straddled a freeze or the deadline, or
  began once the lease had passed). A **zombie ack** -- the caller got ``ok`` -- breaks
  the lease's promise when the turn *began* past the lease, or when another owner ran a
  turn of that Spot before it ended (two owners acknowledged side by side). A **late
  ack** is any other acknowledged zombie turn: begun by a valid owner, answered a moment
  after the deadline, no other owner in between (reported);
* **late** -- calls that ended after ``deadline + slack``; **untyped** -- calls that
  ended with anything but ``ok`` or a ``ZLinkError`` subclass;
* **resets** -- Spots whose count did not go on by one from one handled message to the
  next (``value`` of a handler line, in the order the turns began): the state was lost
  or forked. A row whose fault keeps state (a planned stop moves every counter with it)
  fails on one; where a lease is lost the state goes with it by design (reported);
* **unusable** -- Spots with no ``ok`` call started after the last heal, or whose last
  call (the run ends under load, after the heal) failed: served once, then broke (a
  call that failed before the Spot first served again after the heal -- the system was
  still coming back -- does not count, even when it was the Spot's last);
  **serve_again** -- for each heal, the seconds until every Spot had an ``ok`` reply to
  a call started after it (the largest is reported).

Nothing here reads a clock or a file: the tests feed it hand-made logs.
"""

from __future__ import annotations

import collections
import itertools
import json
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

__all__ = ("Verdict", "check", "count_regressions", "read_lines")

Line = dict[str, Any]


@attrs.frozen(kw_only=True)
class Verdict:
    attempted: int
    acknowledged: int
    errors: dict[str, int]
    lost: list[str]
    duplicated_acked: list[str]
    duplicated_unacked: list[str]
    overlaps: list[tuple[Line, Line]]
    frozen_overlaps: list[tuple[Line, Line]]
    zombie_turns: list[Line]
    zombie_acks: list[Line]
    late_acks: list[Line]
    late: list[Line]
    untyped: list[Line]
    unusable: list[str]
    serve_again: float | None
    #: ``(spot, value before, value)`` where a Spot's count did not go on by one.
    resets: list[tuple[str, int, int]]
    #: Handler lines whose request ID no call line has (calls still in flight when a
    #: caller was stopped, never the case with a clean stop).
    unlogged_handlers: int

    @property
    def duplicated(self) -> int:
        return len(self.duplicated_acked) + len(self.duplicated_unacked)

    @property
    def ok(self) -> bool:
        """Every promise held (unacknowledged duplicates are reported, and fail too)."""
        return not (self.lost or self.duplicated or self.overlaps or self.zombie_acks
                    or self.late or self.untyped or self.unusable)

    def problems(self) -> str:
        """What broke, with the evidence, for an assertion message."""
        out = []
        for name in ("lost", "duplicated_acked", "duplicated_unacked", "unusable"):
            if getattr(self, name):
                out.append(f"{name}: {getattr(self, name)[:10]}")
        for name in ("overlaps", "zombie_acks", "late", "untyped"):
            if getattr(self, name):
                out.append(f"{name} ({len(getattr(self, name))}): "
                           + json.dumps(getattr(self, name)[:3]))
        return "\n".join(out) or "none"

    def summary(self) -> dict[str, Any]:
        return {"attempted": self.attempted, "acknowledged": self.acknowledged,
                "errors": self.errors, "lost": len(self.lost),
                "duplicated_acked": len(self.duplicated_acked),
                "duplicated_unacked": len(self.duplicated_unacked),
                "overlaps": len(self.overlaps), "frozen_overlaps": len(self.frozen_overlaps),
                "zombie_turns": len(self.zombie_turns),
                "zombie_acks": len(self.zombie_acks), "late_acks": len(self.late_acks),
                "late": len(self.late),
                "untyped": len(self.untyped), "unusable": self.unusable,
                "serve_again": self.serve_again, "resets": len(self.resets),
                "unlogged_handlers": self.unlogged_handlers}


def read_lines(paths: Iterable[Path]) -> list[Line]:
    """Every JSON line of ``paths``; a line not complete yet (its writer is in the middle
    of it, read live) is skipped."""
    lines = []
    for path in paths:
        for raw in path.read_text().splitlines(keepends=True):
            if not raw.endswith("\n"):
                continue  # still being written
            lines.append(dict(json.loads(raw)))
    return lines


def overlapping_turns(handlers: list[Line]) -> list[tuple[Line, Line]]:
    """Pairs of turns of one Spot whose ``[start, end]`` intersect (any owners)."""
    by_spot: dict[str, list[Line]] = collections.defaultdict(list)
    for line in handlers:
        by_spot[line["spot"]].append(line)
    pairs = []
    for turns in by_spot.values():
        turns.sort(key=lambda line: float(line["start"]))
        latest: Line | None = None  # the turn that ends last among those seen
        for turn in turns:
            if latest is not None and float(turn["start"]) < float(latest["end"]):
                pairs.append((latest, turn))
            if latest is None or float(turn["end"]) > float(latest["end"]):
                latest = turn
    return pairs


def frozen(first: Line, second: Line) -> bool:
    """Whether ``first`` (the earlier turn) overlaps ``second`` only because its owner
    was frozen in it: another owner, and ``second`` began after ``first``'s lease."""
    if (first["node_rid"], first["generation"]) == (second["node_rid"], second["generation"]):
        return False
    lease = first.get("lease_expires_at")
    return lease is not None and float(first["start"]) < float(lease) <= float(
        second["start"])


def breaks_lease(turn: Line, handlers: list[Line]) -> bool:
    """Whether a zombie ``turn`` began past its lease, or another owner of its Spot ran a
    turn before it ended."""
    if float(turn["start"]) >= float(turn["lease_expires_at"]):
        return True
    owner = (turn["node_rid"], turn["generation"])
    return any(other["spot"] == turn["spot"] and (other["node_rid"], other["generation"]) != owner
               and float(turn["start"]) < float(other["end"])
               and float(other["start"]) < float(turn["end"]) for other in handlers)


def count_resets(handlers: list[Line]) -> list[tuple[str, int, int]]:
    """Where a Spot's ``value`` did not go on by one, turn after turn (by start time)."""
    by_spot: dict[str, list[Line]] = collections.defaultdict(list)
    for line in handlers:
        if line.get("value") is not None:
            by_spot[line["spot"]].append(line)
    resets = []
    for spot, turns in sorted(by_spot.items()):
        turns.sort(key=lambda line: float(line["start"]))
        for before, after in itertools.pairwise(turns):
            if int(after["value"]) != int(before["value"]) + 1:
                resets.append((spot, int(before["value"]), int(after["value"])))
    return resets


def count_regressions(handlers: list[Line]) -> list[tuple[str, int, int]]:
    """Where a durable counter's acknowledged saves went back, save after save (by
    ``version``'s order of the store, then start time): ``(spot, value before, value)``.
    A save the store acknowledged whose handler line a kill cut off makes a count jump
    by two (at most once per kill); a count that does not grow was lost or forked."""
    by_spot: dict[str, list[Line]] = collections.defaultdict(list)
    for line in handlers:
        if line.get("value") is not None:
            by_spot[line["spot"]].append(line)
    back = []
    for spot, turns in sorted(by_spot.items()):
        turns.sort(key=lambda line: float(line["start"]))
        for before, after in itertools.pairwise(turns):
            if int(after["value"]) <= int(before["value"]):
                back.append((spot, int(before["value"]), int(after["value"])))
    return back


def serve_again_after(calls: list[Line], spots: Iterable[str], heal: float) -> float | None:
    """Seconds from ``heal`` until every Spot answered ``ok`` a call started after it and
    after the Spot's last failed call: served again for good, not once in between (a
    node that has not yet learned its lease is gone may still answer for a moment)."""
    since: dict[str, float] = collections.defaultdict(lambda: heal)
    for call in calls:
        if call["outcome"] != "ok" and float(call["start"]) >= heal:
            since[call["spot"]] = max(since[call["spot"]], float(call["start"]))
    first: dict[str, float] = {}
    for call in calls:
        spot = call["spot"]
        if call["outcome"] == "ok" and float(call["start"]) >= since[spot]:
            first[spot] = min(first.get(spot, float("inf")), float(call["end"]))
    wanted = list(spots)
    if not wanted or any(spot not in first for spot in wanted):
        return None
    return max(first[spot] for spot in wanted) - heal


def check(calls: list[Line], handlers: list[Line], *, spots: Iterable[str],
          heals: Iterable[float], slack: float) -> Verdict:
    """The verdict on one run's logs; see the module doc."""
    spots = sorted(spots)
    heals = sorted(heals)
    ran: collections.Counter[str] = collections.Counter(line["rid"] for line in handlers)
    acked = {call["rid"] for call in calls if call["outcome"] == "ok"}
    called = {call["rid"] for call in calls}
    errors = collections.Counter(call["outcome"] for call in calls if call["outcome"] != "ok")
    late = [call for call in calls
            if float(call["end"]) - float(call["start"]) > float(call["deadline"]) + slack]
    untyped = [call for call in calls if call["outcome"].startswith("untyped")]
    dup = sorted(rid for rid, count in ran.items() if count > 1)
    pairs = overlapping_turns(handlers)
    zombies = [line for line in handlers if line.get("lease_expires_at") is not None
               and float(line["end"]) > float(line["lease_expires_at"])]
    unusable: list[str] = []
    serve_again: float | None = 0.0 if not heals else None
    if heals:
        times = [serve_again_after(calls, spots, heal) for heal in heals]
        last = heals[-1]
        # Served once after the heal (its first ok call started since), then broke: the
        # last call started since that one failed. A call that failed while the system
        # was still coming back, before the Spot served again, is not that.
        first_ok: dict[str, float] = {}
        final: dict[str, Line] = {}
        for c in sorted(calls, key=lambda c: float(c["start"])):
            spot, start = c["spot"], float(c["start"])
            if spot not in first_ok and c["outcome"] == "ok" and start >= last:
                first_ok[spot] = start
            if spot in first_ok:
                final[spot] = c
        unusable = [spot for spot in spots if spot not in first_ok
                    or final[spot]["outcome"] != "ok"]
        serve_again = None if any(t is None for t in times) else max(
            t for t in times if t is not None)
    return Verdict(
        attempted=len(calls), acknowledged=len(acked), errors=dict(sorted(errors.items())),
        lost=sorted(rid for rid in acked if rid not in ran),
        duplicated_acked=[rid for rid in dup if rid in acked],
        duplicated_unacked=[rid for rid in dup if rid not in acked],
        overlaps=[pair for pair in pairs if not frozen(*pair)],
        frozen_overlaps=[pair for pair in pairs if frozen(*pair)], zombie_turns=zombies,
        zombie_acks=[z for z in zombies if z["rid"] in acked and breaks_lease(z, handlers)],
        late_acks=[z for z in zombies if z["rid"] in acked and not breaks_lease(z, handlers)],
        late=late,
        untyped=untyped,
        unusable=unusable, serve_again=serve_again, resets=count_resets(handlers),
        unlogged_handlers=sum(1 for rid in ran if rid not in called))


def check_reminders(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Durable reminders (``--remind`` servers): how many were set (acknowledged by the
    store), delivered, never delivered (``lost``: their keys), and delivered again (at
    least once allows it; counted)."""
    sets = {(line["spot"], line["name"], line["due"]) for line in lines
            if line["event"] == "set"}
    rung = collections.Counter((line["spot"], line["name"], line["due"]) for line in lines
                   if line["event"] == "rung")
    lost = sorted(sets - set(rung))
    first: dict[tuple[Any, Any, Any], float] = {}
    for line in lines:
        if line["event"] == "rung":
            key = (line["spot"], line["name"], line["due"])
            first[key] = min(first.get(key, float(line["t"])), float(line["t"]))
    lags = sorted(first[key] - float(key[2]) for key in sets & set(first))
    return {"reminders_set": len(sets), "reminders_delivered": len(sets & set(rung)),
            "reminders_lost": len(lost),
            "reminders_redelivered": sum(n - 1 for n in rung.values() if n > 1),
            # How late the first delivery came: the ones due while a node was down
            # waited for its restart (and a take's hold, when a first try failed).
            "reminders_max_lag": round(lags[-1], 3) if lags else None,
            "reminders_late_1s": sum(lag > 1.0 for lag in lags),
            "lost": lost}

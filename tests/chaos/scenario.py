"""One run of one fault row: start the cluster, load it, break it, heal it, check the logs.

:func:`run_fault` is what every ``test_chaos`` test calls. The run:

1. :meth:`Fault.prepare` (e.g. a relay in front of Redis), then the cluster
   (``cluster.open_cluster``: 3 servers, 2 caller processes of 3 tasks -- 3 in the long
   mode --, 12 counter Spots);
2. **warm-up** until every Spot answered ``ok`` once, then ``steady`` seconds of load;
3. :meth:`Fault.inject` -- the fault and its heal (or restart) under the same load;
4. **recovery** until every Spot answered ``ok`` to a call started after the last
   heal (bounded by ``RECOVERY``), then ``tail`` seconds more;
5. the callers stop (each logs its last call), every process is killed and reaped, and
   ``checker.check`` reads every caller's and handler's log; the row's own promises
   (no lease lost where none may be, no error at all for the delay, a restarted node
   serving within 2 leases of its open) are checked beside it.

The result -- the checker's counts, the driver's timeline, the seconds it took -- is
appended as one JSON line to ``$ZLINK_CHAOS_REPORT`` when that is set
(``report.py`` renders the table of ``docs/reliability.md`` from it) and returned.
"""

from __future__ import annotations

import json
import os
import random
import time
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import attrs
import trio
from checker import Verdict, check, check_reminders, count_regressions, read_lines
from cluster import open_cluster
from faults import FAULTS, Knobs

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ("Outcome", "run_fault")

#: Seconds past its deadline a call may end (scheduling on a loaded 2-core machine).
SLACK = 0.5
LEASE = 1.5
DEADLINE = 2.0
#: How long every Spot may take to serve again after the last heal: a restarted
#: process's start-up (~2 s on a loaded 2-core machine) plus three leases.
RECOVERY = 2.0 + 3 * LEASE
#: How long the servers get to deliver the reminders set before the callers stopped:
#: those due while a node was down wait for its restart, then a take's hold (two call
#: deadlines) when a first delivery failed.
REMINDERS_WAIT = 20.0


@attrs.frozen
class Outcome:
    verdict: Verdict
    record: dict[str, Any]
    logs: Path

    @property
    def ok(self) -> bool:
        """Every promise held: the checker's and the row's own (leases, errors)."""
        return self.verdict.ok and not self.record["broken_promises"]

    def problems(self) -> str:
        return "\n".join([self.verdict.problems(), *self.record["broken_promises"]])


async def run_fault(key: str, backend: str, url: str, logs: Path, *, long: bool,
                    seed: int | None = None) -> Outcome:
    """One run of fault ``key`` (a ``faults.FAULTS`` key) on ``url``; see the module doc."""
    fault = FAULTS[key]()
    seed = random.randrange(1 << 30) if seed is None else seed
    rng = random.Random(seed)
    knobs = Knobs(lease=LEASE, long=long, seed=seed)
    steady, tail = (3.0, 3.0) if long else (0.3, 0.3)
    began = time.time()
    async with AsyncExitStack() as stack:
        url = await fault.prepare(stack, url, knobs)
        async with open_cluster(url, logs, lease=LEASE, deadline=DEADLINE,
                                callers=3 if long else 2, spots=fault.spots,
                                caller_deadlines=fault.caller_deadlines,
                                **({"durable": 1} if fault.durable else {}),
                                **({"remind": fault.remind_after} if fault.remind_after
                                   else {})) as cluster:
            warm = await cluster.wait_served(cluster.events[0]["t"], 15 + fault.spots / 30)
            assert warm, f"not every Spot answered before the fault; logs in {logs}"
            await trio.sleep(steady)
            heals = await fault.inject(cluster, knobs, rng)
            served = await cluster.wait_served(max(heals), RECOVERY + fault.spots / 30)
            cluster.mark("served" if served else "not_served")
            await trio.sleep(tail)
            await cluster.stop_callers(max((DEADLINE, *fault.caller_deadlines)) + 5)
            if fault.remind_after:  # no new ones now: the servers deliver the last ones
                await wait_reminders(logs, REMINDERS_WAIT)
                cluster.mark("reminders_waited")
            events = cluster.events
            node_events = [{"name": proc.name, "pid": proc.proc.pid,
                            "events": [line["event"] for line in proc.lines],
                            "times": [round(line["t"], 3) for line in proc.lines]}
                           for proc in [*cluster.retired, *cluster.servers.values(),
                                        *cluster.callers]]
    calls, handlers = read_logs(logs)
    verdict = check(calls, handlers, spots=[f"chaos-{i}" for i in range(fault.spots)],
                    heals=heals, slack=SLACK)
    lease_losses = sum(entry["events"].count("lease_lost") for entry in node_events)
    broken = []
    if lease_losses and not fault.may_lose_lease:
        broken.append("a lease was lost")
    if fault.no_errors and verdict.errors:
        broken.append("calls failed")
    refused = read_refused(logs) if fault.durable else []
    regressions = count_regressions(handlers) if fault.durable else []
    if regressions:
        broken.append(f"{len(regressions)} durable count(s) went back (a lost save, or a "
                      f"stale one applied): {regressions[:5]}")
    reminders = check_reminders(read_reminders(logs)) if fault.remind_after else None
    if reminders is not None and reminders["reminders_lost"]:
        broken.append(f"{reminders['reminders_lost']} reminder(s) set and never delivered: "
                      f"{reminders['lost'][:5]}")
    if fault.keeps_state and verdict.resets:
        broken.append(f"{len(verdict.resets)} counter(s) did not go on by one: "
                      f"{verdict.resets[:5]}")
    within = fault.serves_within_leases
    if within is not None and (verdict.serve_again is None
                               or verdict.serve_again > within * LEASE):
        broken.append(f"Spots served again {verdict.serve_again} s after the heal (more "
                      f"than {within:g} leases)")
    faulted = [e["t"] for e in events if e["event"] == "fault"]
    added_latency = None
    if faulted:  # the slowest ok call from the first fault to the end, past the usual
        before = sorted(float(c["end"]) - float(c["start"]) for c in calls
                        if c["outcome"] == "ok" and float(c["end"]) < faulted[0])
        during = [float(c["end"]) - float(c["start"]) for c in calls
                  if c["outcome"] == "ok" and float(c["start"]) >= faulted[0]]
        if before and during:
            added_latency = round(max(during) - before[len(before) // 2], 3)
    reopened = [e["at"] for e in events if e["event"] == "reopened"]
    after_open = None
    if reopened and verdict.serve_again is not None:  # the restart's own share of it
        after_open = round(max(heals) + verdict.serve_again - reopened[-1], 3)
        if after_open > 2 * LEASE:
            broken.append(f"Spots served {after_open} s after the restarted node opened "
                          f"(more than 2 leases)")
    overshoot = max((float(c["end"]) - float(c["start"]) - float(c["deadline"])
                     for c in calls), default=0.0)
    record = {"fault": key, "row": fault.name, "backend": backend,
              "mode": "long" if long else "default", "seed": seed,
              "seconds": round(time.time() - began, 2), "promise": fault.promise,
              **verdict.summary(), "lease_losses": lease_losses, "broken_promises": broken,
              "refused_writes": len(refused) if fault.durable else None,
              "durable_regressions": len(regressions) if fault.durable else None,
              **({k: v for k, v in reminders.items() if k != "lost"} if reminders else {}),
              "max_overshoot": round(overshoot, 3), "serve_after_reopen": after_open,
              "max_added_latency": added_latency,
              "timeline": events,
              "node_events": node_events}
    append_report(record)
    return Outcome(verdict, record, logs)


def read_logs(logs: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every caller's call lines and every handler's lines of one run."""
    return (read_lines(sorted(logs.glob("calls-*.jsonl"))),
            read_lines(sorted(logs.glob("handlers-*.jsonl"))))


def read_reminders(logs: Path) -> list[dict[str, Any]]:
    """The reminders set and delivered in one run (``--remind`` servers)."""
    return read_lines(sorted(logs.glob("reminders-*.jsonl")))


async def wait_reminders(logs: Path, limit: float) -> None:
    """Until every reminder set was delivered, at most ``limit`` seconds (the check then
    counts what is missing)."""
    with trio.move_on_after(limit):
        # Other processes' files: no event crosses processes, so poll.
        while check_reminders(read_reminders(logs))["reminders_lost"]:  # noqa: ASYNC110
            await trio.sleep(0.2)


def read_refused(logs: Path) -> list[dict[str, Any]]:
    """The saves of durable state the store refused in one run (``--durable`` servers)."""
    return read_lines(sorted(logs.glob("refused-*.jsonl")))


def append_report(record: dict[str, Any]) -> None:
    """One JSON line to ``$ZLINK_CHAOS_REPORT``, when it is set."""
    report = os.environ.get("ZLINK_CHAOS_REPORT")
    if report:
        with open(report, "a") as out:
            out.write(json.dumps(record) + "\n")

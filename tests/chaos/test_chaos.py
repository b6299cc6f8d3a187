"""The chaos rows (issue #13 item 8): one test per fault, on each store it applies to.

Each run starts 3 server and 2 caller node processes on a real store, loads them,
injects the fault, heals it and checks every caller's and handler's log
(``checker.py``): no acknowledged request lost, none applied twice, no two owners of a
Spot running turns at overlapping times, every call ended within its deadline + slack
with a reply or a typed error, and every Spot serves again after the heal. The
results go to ``$ZLINK_CHAOS_REPORT`` (``report.py`` renders docs/reliability.md's
table). Real processes and sockets: the real clock, bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import pytest
import trio
from faults import FAULTS
from scenario import run_fault
from stores import chaos_store

#: One run of one row, start-up to reaped processes (the long mode: per run).
RUN_TIMEOUT = 60
LONG_RUN_TIMEOUT = 120

#: Rows that find a runtime bug today, by ``faults.FAULTS`` key -> the bug: the run and
#: its record stay real (the report shows them), the test is an expected failure until
#: the bug is fixed. Empty: the zombie acks and the renewal back-off the harness found
#: are fixed (docs/reliability.md, Findings).
KNOWN_BUGS: dict[str, str] = {}

ROWS = [pytest.param(key, backend, id=f"{key}-{backend}", marks=[
            pytest.mark.xfail(reason=KNOWN_BUGS[key], strict=False)] if key in KNOWN_BUGS
        else []) for key, fault in FAULTS.items() for backend in fault.backends]


@pytest.mark.parametrize(("key", "backend"), ROWS)
async def test_fault_row(key, backend, tmp_path, chaos_long, chaos_runs):
    outcomes = []
    for run in range(chaos_runs):  # every run is recorded, then all are judged
        logs = tmp_path / f"run-{run}"
        logs.mkdir()
        with trio.fail_after(LONG_RUN_TIMEOUT if chaos_long else RUN_TIMEOUT):
            async with chaos_store(
                    backend, logs, own_server=FAULTS[key].acts_on_the_store_server) as url:
                outcomes.append(await run_fault(key, backend, url, logs, long=chaos_long))
    for run, outcome in enumerate(outcomes):
        assert outcome.verdict.acknowledged > 0, outcome.record
        assert outcome.ok, (f"{key} on {backend} (run {run}, seed {outcome.record['seed']}, "
                            f"logs in {outcome.logs}):\n{outcome.problems()}\n"
                            f"errors: {outcome.record['errors']}\n"
                            f"timeline: {outcome.record['timeline']}\n"
                            f"nodes: {outcome.record['node_events']}")

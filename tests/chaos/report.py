"""Render the chaos harness's results as the fault matrix of docs/reliability.md.

``python tests/chaos/report.py RESULTS.jsonl [MORE.jsonl ...]`` reads the JSON lines the
runs appended to ``$ZLINK_CHAOS_REPORT`` (one per run, see ``scenario.py``) and prints
one Markdown table row per (fault, store, mode) -- runs, requests attempted /
acknowledged / lost / duplicated, the slowest time to serve again, calls past their
deadline + slack, and whether every promise held -- then a second table with the
details (the errors callers saw, by type; lease losses; zombie turns and acks; frozen
overlaps; how far the slowest call ended past its deadline) and what each row promises.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ("render",)

HEADER = ("| fault | store | mode | runs | attempted | acknowledged | lost | duplicated "
          "(acked / unacked) | max s to serve again | past deadline + slack | promises held |")
RULE = "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
DETAILS = ("| fault | store | mode | errors the callers saw | lease losses | zombie turns / "
           "acks / late acks | frozen overlaps | slowest call vs its deadline (s) |")
DETAILS_RULE = "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |"


def _held(run: dict[str, Any]) -> bool:
    return not (run["lost"] or run["duplicated_acked"] or run["duplicated_unacked"]
                or run["overlaps"] or run.get("zombie_acks") or run["late"]
                or run["untyped"] or run["unusable"] or run.get("broken_promises"))


def _again(runs: list[dict[str, Any]]) -> str:
    never = [run for run in runs if run["serve_again"] is None]
    if never:
        spots = max(len(run["unusable"]) for run in never)
        return f"never, in {len(never)} run(s) ({spots} Spots)"
    return f"{max(run['serve_again'] for run in runs):.2f}"


def _why(runs: list[dict[str, Any]]) -> str:
    reasons: set[str] = set()
    for run in runs:
        for name in ("lost", "duplicated_acked", "duplicated_unacked", "overlaps",
                     "zombie_acks", "late", "untyped"):
            if run.get(name):
                reasons.add(name.replace("_", " "))
        if run["unusable"]:
            reasons.add("not usable again")
        reasons.update(run.get("broken_promises") or [])
    return "no: " + ", ".join(sorted(reasons))


def render(runs: list[dict[str, Any]]) -> str:
    """The Markdown table and the promise list for ``runs``."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for run in runs:
        groups[(run["row"], run["backend"], run["mode"])].append(run)
    lines = [HEADER, RULE]
    promises: dict[str, str] = {}
    for (row, backend, mode), group in groups.items():
        promises[row] = group[0]["promise"]
        held = sum(_held(run) for run in group)
        lines.append("| " + " | ".join([
            row, backend, mode, str(len(group)),
            str(sum(run["attempted"] for run in group)),
            str(sum(run["acknowledged"] for run in group)),
            str(sum(run["lost"] for run in group)),
            f"{sum(r['duplicated_acked'] for r in group)} / "
            f"{sum(r['duplicated_unacked'] for r in group)}",
            _again(group), str(sum(run["late"] for run in group)),
            "yes" if held == len(group) else _why(group)]) + " |")
    lines += ["", DETAILS, DETAILS_RULE]
    for (row, backend, mode), group in groups.items():
        errors: collections.Counter[str] = collections.Counter()
        for run in group:
            errors.update(run["errors"])
        shown = ", ".join(f"{name} {count}" for name, count in sorted(errors.items()))
        lines.append("| " + " | ".join([
            row, backend, mode, shown or "none",
            str(sum(run.get("lease_losses", 0) for run in group)),
            f"{sum(r.get('zombie_turns', 0) for r in group)} / "
            f"{sum(r.get('zombie_acks', 0) for r in group)} / "
            f"{sum(r.get('late_acks', 0) for r in group)}",
            str(sum(run.get("frozen_overlaps", 0) for run in group)),
            f"{max(run.get('max_overshoot', 0.0) for run in group):+.3f}"]) + " |")
    lines += ["", "What each row promises:", ""]
    lines += [f"- **{row}**: {promise}." for row, promise in promises.items()]
    return "\n".join(lines) + "\n"


def main(paths: list[str]) -> None:
    runs = [json.loads(raw) for path in paths for raw in Path(path).read_text().splitlines()
            if raw.strip()]
    sys.stdout.write(render(runs))


if __name__ == "__main__":
    main(sys.argv[1:])

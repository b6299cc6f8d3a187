"""``zlink-trio nodes --store URL [--mesh M]``: the live nodes, their endpoints, leases and Spots.

Theory of operation
-------------------
One ``LocationStore.descriptors`` read gives the live claims (lease not over at
wall-clock now, the clock nodes stamp leases with on shared stores), of every Mesh or
of ``--mesh``. Per-node Spot counts come from walking the authority records with the
bounded ``query`` (pages of 1000, one store read each) and counting the non-Entry
records each lifecycle owns, by state; the walk stops after ``--max-records``
(default 100,000), and counts are then lower bounds (shown ``>=N``, ``"spotsComplete":
false``). Like ``inspect``'s list the walk is not one snapshot.

Columns: NODE ID, MESH, LIFECYCLE, ENDPOINT, ROLES (``server,client`` or ``client``:
a client-only node), LEASE LEFT (seconds), PLACEMENT (``open``, or ``draining`` once
the node drained), SPOTS, NODE RID -- aligned to the widest value.

``--json``: ``{"nodes": [NODE...], "spotsComplete": bool, "recordsRead": N}``; a NODE
is its descriptor's ``to_json`` fields plus ``lifecycleGeneration``,
``leaseExpiresAt`` (ISO 8601 UTC), ``leaseLeft`` (seconds), ``acceptsPlacements``,
``spots`` and ``spotsByState`` (state -> count).

Exit status: 0 (also with no live node: the list is empty), 1 store unavailable, 2
usage error.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import TYPE_CHECKING, TextIO

import trio

from zlink_trio.cli.store_command import (
    EXIT_OK,
    UsageError,
    add_store_arguments,
    iso,
    open_cli_store,
    run_command,
    wall_time,
)
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import SpotKind, validate_mesh_name
from zlink_trio.core.placement import Role
from zlink_trio.store import MAX_PAGE_SIZE

if TYPE_CHECKING:
    import argparse

    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.core.records import OwnerFence
    from zlink_trio.store import Store

__all__ = ("add_parser", "count_spots", "run")

_DEFAULT_MAX_RECORDS = 100_000
_COLUMNS = ("NODE ID", "MESH", "LIFECYCLE", "ENDPOINT", "ROLES", "LEASE LEFT", "PLACEMENT",
            "SPOTS", "NODE RID")
_RIGHT = frozenset({2, 5, 7})


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


_count.__name__ = "record count (>= 0)"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``nodes``."""
    parser = commands.add_parser(
        "nodes", help="list the live nodes: NodeId, endpoint, lease left, Spot count",
        description="List the live node claims of the store (every Mesh, or --mesh) with "
                    "their endpoint, lease left and the Spots each owns. Read-only. Exit 0, "
                    "1 store unavailable, 2 usage error.")
    add_store_arguments(parser)
    parser.add_argument("--mesh", metavar="MESH", help="only this Mesh's nodes")
    parser.add_argument("--max-records", type=_count, default=_DEFAULT_MAX_RECORDS,
                        metavar="N", help="read at most N authority records to count Spots "
                                          f"(default {_DEFAULT_MAX_RECORDS:,}; 0: no counts)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=run)


async def count_spots(store: Store, max_records: int, timeout: float,  # noqa: ASYNC109
                      ) -> tuple[dict[OwnerFence, Counter[str]], int, bool]:
    """Non-Entry records per owner lifecycle, by state: (counts, records read, complete)."""
    counts: dict[OwnerFence, Counter[str]] = {}
    read, cursor = 0, None
    while read < max_records:
        with trio.fail_after(timeout):
            page = await store.location.query(
                page_size=min(MAX_PAGE_SIZE, max_records - read), cursor=cursor)
        read += len(page.records)
        for record in page.records:
            if record.kind is not SpotKind.ENTRY:
                counts.setdefault(record.owner, Counter())[record.state.value] += 1
        cursor = page.next_cursor
        if cursor is None:
            return counts, read, True
    return counts, read, False


def run(args: argparse.Namespace) -> int:
    """Run ``nodes`` with parsed ``args``; returns the exit status."""
    out = sys.stdout

    async def body() -> int:
        if args.mesh is not None:
            try:
                validate_mesh_name(args.mesh)
            except InvalidOperation as error:
                raise UsageError(error.message) from None
        async with open_cli_store(args.store) as store:
            now = wall_time()
            with trio.fail_after(args.timeout):
                claims = await store.location.descriptors(args.mesh, now=now)
            counts, read, complete = await count_spots(store, args.max_records, args.timeout)
        claims.sort(key=lambda c: (c.descriptor.mesh, c.descriptor.node_id,
                                   c.lifecycle_generation))
        if args.json:
            print(json.dumps({"nodes": [_node_json(c, counts, now) for c in claims],
                              "spotsComplete": complete, "recordsRead": read}, indent=2),
                  file=out)
        else:
            _print_table(claims, counts, complete, now, out)
            if not complete:
                print(f"Spot counts are lower bounds: the walk stopped after {read} record(s) "
                      "(raise --max-records to count them all)", file=out)
        return EXIT_OK

    return run_command("nodes", body, as_json=args.json)


def _roles(claim: NodeClaim) -> str:
    roles = claim.descriptor.roles
    return ",".join(name for role, name in ((Role.OBJECT_SERVER, "server"),
                                            (Role.OBJECT_CLIENT, "client")) if role in roles)


def _node_json(claim: NodeClaim, counts: dict[OwnerFence, Counter[str]],
               now: float) -> dict[str, object]:
    by_state = counts.get(claim.owner(), Counter())
    return {**claim.descriptor.to_json(), "lifecycleGeneration": claim.lifecycle_generation,
            "leaseExpiresAt": iso(claim.lease_expires_at),
            "leaseLeft": round(claim.lease_expires_at - now, 3),
            "acceptsPlacements": claim.accepts_placements,
            "spots": sum(by_state.values()), "spotsByState": dict(sorted(by_state.items()))}


def _print_table(claims: list[NodeClaim], counts: dict[OwnerFence, Counter[str]],
                 complete: bool, now: float, out: TextIO) -> None:
    rows = [_COLUMNS]
    for claim in claims:
        d = claim.descriptor
        spots = sum(counts.get(claim.owner(), Counter()).values())
        rows.append((d.node_id, d.mesh, str(claim.lifecycle_generation), d.endpoint,
                     _roles(claim), f"{claim.lease_expires_at - now:.1f}s",
                     "open" if claim.accepts_placements else "draining",
                     str(spots) if complete else f">={spots}", str(d.node_rid)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    for row in rows:
        print("  ".join(cell.rjust(w) if i in _RIGHT else cell.ljust(w)
                        for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip(),
              file=out)
    print(f"{len(claims)} live node(s)", file=out)

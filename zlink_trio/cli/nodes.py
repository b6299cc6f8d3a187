"""``zlink-trio nodes --store URL [--mesh M] [--all]``: the live nodes, their endpoints,
leases and Spots -- and, with ``--all``, the dead lifecycles that still own Spots.

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
the node drained), SPOTS -- aligned to the widest value. Nodes are named by NodeId; the
NodeRid is in ``--json`` only.

``--all`` adds the *dead lifecycles* that still own records: an owner the walk counted
whose lease is over (``LocationStore.dead_claims``: a dead lifecycle keeps its claim
while it owns records, as ``zlink-trio release --node`` and a restart's release --
``store.dead_lifecycle`` -- need it to find them), and an owner no claim names any more.
Each with its record count and what to run: ``zlink-trio release --store URL --node
NODE_ID`` (the exact command), a restart when that NodeId runs again (its start releases
them; ``release --node`` is refused while it is live), or, for an owner no claim names,
``zlink-trio release`` of each Spot (``zlink-trio inspect`` prints the command).

``--json``: ``{"nodes": [NODE...], "spotsComplete": bool, "recordsRead": N}``; a NODE
is its descriptor's ``to_json`` fields plus ``lifecycleGeneration``,
``leaseExpiresAt`` (ISO 8601 UTC), ``leaseLeft`` (seconds), ``acceptsPlacements``,
``spots`` and ``spotsByState`` (state -> count). ``--all`` adds ``"deadLifecycles":
[DEAD...]``, a DEAD being ``{"nodeId" (null: no claim names it), "nodeRid", "mesh"
(null likewise), "lifecycleGeneration", "leaseExpiresAt" (null likewise), "spots",
"spotsByState", "release"}`` with ``release`` the command to run (or what to do).

Exit status: 0 (also with no live node: the list is empty), 1 store unavailable, 2
usage error.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections import Counter
from typing import TYPE_CHECKING, TextIO

import attrs
import trio

from zlink_trio.cli.store_command import (
    EXIT_OK,
    UsageError,
    add_store_arguments,
    iso,
    open_cli_store,
    release_node_command,
    run_command,
    wall_time,
)
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import SpotKind, validate_mesh_name
from zlink_trio.core.placement import Role
from zlink_trio.store import MAX_PAGE_SIZE

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.core.records import AuthorityRecord, OwnerFence
    from zlink_trio.store import Store

__all__ = ("DEFAULT_MAX_RECORDS", "DeadLifecycle", "Survey", "add_parser", "count_spots",
           "dead_lifecycles", "node_json", "record_count", "run", "survey")

#: How many authority records a walk reads at most unless ``--max-records`` says.
DEFAULT_MAX_RECORDS = 100_000
_COLUMNS = ("NODE ID", "MESH", "LIFECYCLE", "ENDPOINT", "ROLES", "LEASE LEFT", "PLACEMENT",
            "SPOTS")
_RIGHT = frozenset({2, 5, 7})
_DEAD_COLUMNS = ("NODE ID", "MESH", "LIFECYCLE", "LEASE ENDED", "SPOTS", "TO RELEASE THEM")
_DEAD_RIGHT = frozenset({2, 4})


def record_count(text: str) -> int:
    """``--max-records``'s argparse type: a count of records, 0 or more."""
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


record_count.__name__ = "record count (>= 0)"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``nodes``."""
    parser = commands.add_parser(
        "nodes", help="list the live nodes: NodeId, endpoint, lease left, Spot count",
        description="List the live node claims of the store (every Mesh, or --mesh) with "
                    "their endpoint, lease left and the Spots each owns; with --all also the "
                    "dead lifecycles that still own Spots and the command that releases them. "
                    "Read-only. Exit 0, 1 store unavailable, 2 usage error.")
    add_store_arguments(parser)
    parser.add_argument("--mesh", metavar="MESH", help="only this Mesh's nodes")
    parser.add_argument("--max-records", type=record_count, default=DEFAULT_MAX_RECORDS,
                        metavar="N", help="read at most N authority records to count Spots "
                                          f"(default {DEFAULT_MAX_RECORDS:,}; 0: no counts)")
    parser.add_argument("--all", action="store_true",
                        help="also list the dead lifecycles that still own Spots, with the "
                             "command that releases them")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=run)


async def count_spots(store: Store, max_records: int, timeout: float,  # noqa: ASYNC109
                      visit: Callable[[AuthorityRecord], object] | None = None,
                      ) -> tuple[dict[OwnerFence, Counter[str]], int, bool]:
    """Non-Entry records per owner lifecycle, by state: (counts, records read, complete).

    Reads at most ``max_records`` records, each page bounded by ``timeout``
    (:class:`trio.TooSlowError`); ``visit`` is called with every record read, Entry
    claims included, in Spot ID order.
    """
    counts: dict[OwnerFence, Counter[str]] = {}
    read, cursor = 0, None
    while read < max_records:
        with trio.fail_after(timeout):
            page = await store.location.query(
                page_size=min(MAX_PAGE_SIZE, max_records - read), cursor=cursor)
        read += len(page.records)
        for record in page.records:
            if visit is not None:
                visit(record)
            if record.kind is not SpotKind.ENTRY:
                counts.setdefault(record.owner, Counter())[record.state.value] += 1
        cursor = page.next_cursor
        if cursor is None:
            return counts, read, True
    return counts, read, False


@attrs.frozen
class Survey:
    """What one :func:`survey` read: the live nodes, the Spot counts, the dead owners."""

    #: Wall-clock time the claims were read at.
    now: float
    #: The live claims, by Mesh, NodeId and lifecycle.
    claims: list[NodeClaim]
    #: The dead lifecycles that still own records (empty unless asked for).
    dead: list[DeadLifecycle]
    #: Non-Entry records per owner lifecycle, by state (:func:`count_spots`).
    counts: dict[OwnerFence, Counter[str]]
    #: Records the walk read, and whether it read them all (else counts are lower bounds).
    read: int
    complete: bool


async def survey(store: Store, *, store_url: str, mesh: str | None, max_records: int,
                 timeout: float, dead: bool,  # noqa: ASYNC109
                 visit: Callable[[AuthorityRecord], object] | None = None,
                 now: float | None = None) -> Survey:
    """Read what ``zlink-trio nodes`` shows: the live claims of ``mesh`` (``None``: every
    Mesh), the Spot counts of a walk of at most ``max_records`` records (``visit`` sees
    each record, as in :func:`count_spots`) and, when ``dead``, the dead lifecycles
    still owning records (release commands name ``store_url``). Each store read is
    bounded by ``timeout`` (:class:`trio.TooSlowError`); store errors propagate. Leases
    are judged at ``now`` (default: wall-clock time, as nodes on shared stores stamp
    them)."""
    now = wall_time() if now is None else now
    with trio.fail_after(timeout):
        claims = await store.location.descriptors(mesh, now=now)
        dead_claims = await store.location.dead_claims(mesh, now=now) if dead else []
    counts, read, complete = await count_spots(store, max_records, timeout, visit)
    claims.sort(key=lambda c: (c.descriptor.mesh, c.descriptor.node_id, c.lifecycle_generation))
    found = (dead_lifecycles(store_url, mesh, claims, dead_claims, counts, complete)
             if dead else [])
    return Survey(now, claims, found, counts, read, complete)


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
            found = await survey(store, store_url=args.store, mesh=args.mesh,
                                 max_records=args.max_records, timeout=args.timeout,
                                 dead=args.all)
        claims, dead, counts, now = found.claims, found.dead, found.counts, found.now
        read, complete = found.read, found.complete
        if args.json:
            shown: dict[str, object] = {
                "nodes": [node_json(c, counts, now) for c in claims]}
            if args.all:
                shown["deadLifecycles"] = [d.to_json() for d in dead]
            print(json.dumps({**shown, "spotsComplete": complete, "recordsRead": read},
                             indent=2), file=out)
        else:
            _print_table(claims, counts, complete, now, out)
            if args.all:
                _print_dead(dead, complete, out)
            if not complete:
                print(f"Spot counts are lower bounds: the walk stopped after {read} record(s) "
                      "(raise --max-records to count them all)", file=out)
        return EXIT_OK

    return run_command("nodes", body, as_json=args.json)


def _roles(claim: NodeClaim) -> str:
    roles = claim.descriptor.roles
    return ",".join(name for role, name in ((Role.OBJECT_SERVER, "server"),
                                            (Role.OBJECT_CLIENT, "client")) if role in roles)


def node_json(claim: NodeClaim, counts: dict[OwnerFence, Counter[str]],
              now: float) -> dict[str, object]:
    """One live node as ``--json`` shows it (module docstring: a NODE), its Spots from
    ``counts`` (:func:`count_spots`) and its lease left at ``now``."""
    by_state = counts.get(claim.owner(), Counter())
    return {**claim.descriptor.to_json(), "lifecycleGeneration": claim.lifecycle_generation,
            "leaseExpiresAt": iso(claim.lease_expires_at),
            "leaseLeft": round(claim.lease_expires_at - now, 3),
            "acceptsPlacements": claim.accepts_placements,
            "spots": sum(by_state.values()), "spotsByState": dict(sorted(by_state.items()))}


def _print_table(claims: list[NodeClaim], counts: dict[OwnerFence, Counter[str]],
                 complete: bool, now: float, out: TextIO) -> None:
    rows: list[tuple[str, ...]] = [_COLUMNS]
    for claim in claims:
        d = claim.descriptor
        spots = sum(counts.get(claim.owner(), Counter()).values())
        rows.append((d.node_id, d.mesh, str(claim.lifecycle_generation), d.endpoint,
                     _roles(claim), f"{claim.lease_expires_at - now:.1f}s",
                     "open" if claim.accepts_placements else "draining",
                     _count_text(spots, complete)))
    _print_rows(rows, _RIGHT, out)
    print(f"{len(claims)} live node(s)", file=out)


def _count_text(spots: int, complete: bool) -> str:
    return str(spots) if complete else f">={spots}"


def _print_rows(rows: list[tuple[str, ...]], right: frozenset[int], out: TextIO) -> None:
    """``rows`` (the headings first) in columns aligned to the widest value."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                        for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip(),
              file=out)


@attrs.frozen
class DeadLifecycle:
    """A dead lifecycle that still owns records; ``claim`` is ``None`` when none names it."""

    owner: OwnerFence
    claim: NodeClaim | None
    by_state: Counter[str]
    #: What to run (or do) to release what it owns.
    release: str

    def to_json(self) -> dict[str, object]:
        claim = self.claim
        """As ``--json`` shows it (module docstring: a DEAD)."""
        return {"nodeId": None if claim is None else claim.descriptor.node_id,
                "nodeRid": str(self.owner.node_rid),
                "mesh": None if claim is None else claim.descriptor.mesh,
                "lifecycleGeneration": self.owner.lifecycle_generation,
                "leaseExpiresAt": None if claim is None else iso(claim.lease_expires_at),
                "spots": sum(self.by_state.values()),
                "spotsByState": dict(sorted(self.by_state.items())),
                "release": self.release}


def dead_lifecycles(store_url: str, mesh: str | None, live: list[NodeClaim],
                    dead_claims: list[NodeClaim], counts: dict[OwnerFence, Counter[str]],
                    complete: bool) -> list[DeadLifecycle]:
    """The owners the walk counted that hold no live claim, each with its claim if one is
    left and what releases its records (commands naming ``store_url``); a dead claim the
    walk counted nothing for is listed only when the walk stopped early (it may own
    records past it). ``mesh``: the Mesh ``live`` and ``dead_claims`` were read for, or
    ``None`` for every Mesh."""
    live_owners = {claim.owner() for claim in live}
    live_ids = {claim.descriptor.node_id: claim for claim in live}
    by_owner = {claim.owner(): claim for claim in dead_claims}
    found: list[DeadLifecycle] = []
    for owner in (set(counts) | set(by_owner)) - live_owners:
        claim = by_owner.get(owner)
        by_state = counts.get(owner, Counter())
        if (not by_state and complete) or (claim is None and mesh is not None):
            continue  # owns nothing; or no claim tells its Mesh (a live one of another?)
        found.append(DeadLifecycle(owner, claim, by_state,
                                   _release_hint(store_url, claim, live_ids)))
    found.sort(key=lambda d: ("" if d.claim is None else d.claim.descriptor.node_id,
                              d.owner.lifecycle_generation, d.owner.node_rid.value))
    return found


def _release_hint(store_url: str, claim: NodeClaim | None,
                  live_ids: dict[str, NodeClaim]) -> str:
    if claim is None:
        return (f"no claim names its NodeId: release each Spot with zlink-trio release "
                f"(zlink-trio inspect --store {shlex.quote(store_url)} SPOT_ID prints it)")
    node_id = claim.descriptor.node_id
    running = live_ids.get(node_id)
    if running is not None:
        return (f"NodeId {node_id!r} runs again (lifecycle {running.lifecycle_generation}): "
                "its next start releases them, or stop it and run "
                f"{release_node_command(store_url, node_id)}")
    return release_node_command(store_url, node_id)


def _print_dead(dead: list[DeadLifecycle], complete: bool, out: TextIO) -> None:
    if not dead:
        print("no dead lifecycle owns Spots", file=out)
        return
    rows: list[tuple[str, ...]] = [_DEAD_COLUMNS]
    for entry in dead:
        claim = entry.claim
        rows.append((f"(rid {entry.owner.node_rid})" if claim is None
                     else claim.descriptor.node_id,
                     "?" if claim is None else claim.descriptor.mesh,
                     str(entry.owner.lifecycle_generation),
                     "?" if claim is None else iso(claim.lease_expires_at),
                     _count_text(sum(entry.by_state.values()), complete), entry.release))
    _print_rows(rows, _DEAD_RIGHT, out)
    print(f"{len(dead)} dead lifecycle(s) still own Spots", file=out)

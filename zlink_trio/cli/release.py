"""``zlink-trio release --store URL SPOT_ID --generation G --owner-generation OG``,
and ``zlink-trio release --store URL --node NODE_ID``.

Theory of operation
-------------------
The operator's way to free a Ready Spot whose owner's lease has expired and
will not come back (an expired owner cannot change authority
itself). It runs the Location Store's one fenced transaction
``release_expired`` with ``now`` = wall-clock ``time.time()`` -- the clock
nodes stamp leases with on shared stores -- and reports what happened:

- exit 0: released; the Spot is Missing and its next activation creates a new
  incarnation (a larger ObjectGeneration);
- exit 1: refused, nothing written -- the owner's lease is live (it must close
  the Spot itself), the fence is stale (re-read with ``zlink-trio inspect``),
  the Spot is Missing, an Entry claim, or not Ready (the message names the
  transaction to use) -- or the store could not answer;
- exit 2: a usage error.

The fence (``--generation`` and ``--owner-generation``, both shown by
``inspect``) makes it safe: it never frees a newer incarnation or a Spot that
moved since it was read. Only a human runs it (a restarted node does the same for its
own NodeId, ``--node`` below).

``--node NODE_ID`` releases everything the dead lifecycles of a NodeId still own
-- what a restart of that NodeId would do itself (``store.dead_lifecycle``), for a
NodeId that will not come back: Ready Spots, unfinished closes, creations and moves
that had not reached relay-ready, each with its own fenced transaction, then the dead
claims that own nothing any more (with their Entry claims). It is refused (exit 1,
nothing written) while any process holds a live claim of that NodeId. Exit 0 when
every record was released; 1 when some were left (each is printed with the reason).

``--json`` prints one JSON document: ``{"released": RECORD, "inboxLeft": N}`` for a
Spot (``RECORD`` as ``AuthorityRecord.to_json`` of the record as it was, ``N`` the
unhandled durable-inbox records counted, ``"1024+"`` past the read bound), and
``{"nodeId", "released": [RECORD...], "left": [{"record": RECORD, "reason"}...],
"claimsRemoved": N}`` for ``--node``; a failure is ``{"error": {...}}``.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import trio

from zlink_trio.cli.store_command import (
    EXIT_OK,
    EXIT_REFUSED,
    UsageError,
    add_store_arguments,
    iso,
    name_owner,
    node_names,
    open_cli_store,
    positive_int,
    run_command,
    wall_time,
)
from zlink_trio.core.errors import InvalidOperation, ZLinkError
from zlink_trio.core.identity import validate_node_id, validate_spot_id
from zlink_trio.store import MAX_INBOX_READ
from zlink_trio.store.dead_lifecycle import release_dead_node

if TYPE_CHECKING:
    import argparse
    from typing import TextIO

    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.store import Store

__all__ = ("add_parser", "run")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``release``."""
    parser = commands.add_parser(
        "release", help="free a Ready Spot whose owner's lease expired, or everything a "
                        "dead NodeId owned (operator action)",
        description="Release the Ready authority of SPOT_ID whose owner's lease has expired, "
                    "fenced by its object and owner generations (see zlink-trio inspect). "
                    "Refuses a live owner, a stale fence, Entry claims and records that are "
                    "not Ready. With --node NODE_ID instead: release everything the dead "
                    "lifecycles of NODE_ID own (refused while it has a live claim). Exit 0 "
                    "released, 1 refused (or, with --node, some records left), 2 usage error.")
    add_store_arguments(parser)
    parser.add_argument("spot_id", metavar="SPOT_ID", nargs="?",
                        help="the Spot to release (or --node)")
    parser.add_argument("--generation", type=positive_int, metavar="G",
                        help="the record's object generation (with SPOT_ID)")
    parser.add_argument("--owner-generation", type=positive_int, metavar="OG",
                        help="the record's owner generation (with SPOT_ID)")
    parser.add_argument("--node", metavar="NODE_ID",
                        help="release everything the dead lifecycles of NODE_ID own, and "
                             "their claims (refused while NODE_ID has a live claim)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=run)


def _check_form(args: argparse.Namespace) -> None:
    """Exactly one of SPOT_ID (with both generations) and --node."""
    if args.node is not None:
        if (args.spot_id, args.generation, args.owner_generation) != (None, None, None):
            raise UsageError("--node NODE_ID releases a whole node; give it without SPOT_ID, "
                             "--generation and --owner-generation")
        try:
            validate_node_id(args.node)
        except InvalidOperation as error:
            raise UsageError(error.message) from None
        return
    if args.spot_id is None or args.generation is None or args.owner_generation is None:
        raise UsageError("give SPOT_ID --generation G --owner-generation OG (see zlink-trio "
                         "inspect), or --node NODE_ID")
    try:
        validate_spot_id(args.spot_id)
    except InvalidOperation as error:
        raise UsageError(error.message) from None


def run(args: argparse.Namespace) -> int:
    """Run ``release`` with parsed ``args``; returns the exit status."""
    out = sys.stdout

    async def body() -> int:
        _check_form(args)
        if args.node is not None:
            return await _release_node(args, out)
        async with open_cli_store(args.store) as store:
            with trio.fail_after(args.timeout):
                record = await store.location.release_expired(
                    args.spot_id, object_generation=args.generation,
                    owner_generation=args.owner_generation, now=wall_time())
            left: str | None = None
            names = {}
            with trio.move_on_after(args.timeout):
                left = await _inbox_left(store, record)
                names = await node_names(store, wall_time())
        if args.json:
            print(json.dumps({"released": record.to_json(), "inboxLeft": left}), file=out)
            return EXIT_OK
        print(f"released {record.spot_id!r}: generation {record.object_generation}, "
              f"owner generation {record.owner_generation}, owner "
              f"{name_owner(record.owner, names)} (lease over). The Spot is Missing now; "
              "its next activation creates a new incarnation with a larger generation.",
              file=out)
        if left not in (None, "0"):
            print(f"note: {left} unhandled record(s) remain in the released incarnation's "
                  "durable inbox; they are not delivered to the new incarnation", file=out)
        return EXIT_OK

    return run_command("release", body, as_json=args.json)


async def _release_node(args: argparse.Namespace, out: TextIO) -> int:
    """``--node``: refuse a live NodeId, else release what its dead lifecycles own."""
    async with open_cli_store(args.store) as store:
        with trio.fail_after(args.timeout):
            live = [c for c in await store.location.descriptors(now=wall_time())
                    if c.descriptor.node_id == args.node]
            if live:
                holder = live[0]
                raise InvalidOperation(
                    f"NodeId {args.node!r} holds a live claim (lifecycle "
                    f"{holder.lifecycle_generation}, lease until "
                    f"{iso(holder.lease_expires_at)}): a running node ends its own Spots; "
                    "stop it, or wait for its lease to end, then retry")
            done = await release_dead_node(store, args.node, now=wall_time)
    status = EXIT_REFUSED if done.left else EXIT_OK
    if args.json:
        print(json.dumps({
            "nodeId": args.node, "released": [r.to_json() for r in done.released],
            "left": [{"record": r.to_json(), "reason": why} for r, why in done.left],
            "claimsRemoved": done.claims_removed}, indent=2), file=out)
        return status
    for record in done.released:
        print(f"released {record.spot_id!r}: {record.kind.name.lower()}, generation "
              f"{record.object_generation}, was {record.state.value}", file=out)
    for record, why in done.left:
        print(f"left {record.spot_id!r}: generation {record.object_generation}, "
              f"{record.state.value}: {why}", file=out)
    print(f"NodeId {args.node!r}: {len(done.released)} Spot(s) released, {len(done.left)} "
          f"left, {done.claims_removed} dead claim(s) removed. Released Instance Spots "
          "activate anew on their next call; released User Spots must be created again.",
          file=out)
    return status


async def _inbox_left(store: Store, record: AuthorityRecord) -> str | None:
    """How many records the released incarnation's durable inbox still holds (``"N"``,
    ``"N+"`` past the read bound), ``None`` when the store could not say."""
    try:
        left = await store.relocation.inbox_read(record.spot_id, record.object_generation,
                                                 limit=MAX_INBOX_READ)
    except ZLinkError:
        return None  # released either way; the count is a courtesy
    return f"{len(left)}+" if len(left) == MAX_INBOX_READ else str(len(left))

"""``zlink-trio release --store URL SPOT_ID --generation G --owner-generation OG``.

Theory of operation
-------------------
The operator's way to free a Ready Spot whose owner's lease has expired and
will not come back (spec 06 §9: an expired owner cannot change authority
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
moved since it was read. Nothing ever runs this automatically.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import trio

from zlink_trio.cli.store_command import (
    EXIT_OK,
    UsageError,
    add_store_arguments,
    describe_owner,
    open_cli_store,
    positive_int,
    run_command,
    wall_time,
)
from zlink_trio.core.errors import InvalidOperation, ZLinkError
from zlink_trio.core.identity import validate_spot_id
from zlink_trio.store import MAX_INBOX_READ

if TYPE_CHECKING:
    import argparse

    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.store import Store

__all__ = ("add_parser", "run")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``release``."""
    parser = commands.add_parser(
        "release", help="free a Ready Spot whose owner's lease expired (operator action)",
        description="Release the Ready authority of SPOT_ID whose owner's lease has expired, "
                    "fenced by its object and owner generations (see zlink-trio inspect). "
                    "Refuses a live owner, a stale fence, Entry claims and records that are "
                    "not Ready. Exit 0 released, 1 refused, 2 usage error.")
    add_store_arguments(parser)
    parser.add_argument("spot_id", metavar="SPOT_ID")
    parser.add_argument("--generation", type=positive_int, required=True, metavar="G",
                        help="the record's object generation")
    parser.add_argument("--owner-generation", type=positive_int, required=True, metavar="OG",
                        help="the record's owner generation")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``release`` with parsed ``args``; returns the exit status."""
    out = sys.stdout

    async def body() -> int:
        try:
            validate_spot_id(args.spot_id)
        except InvalidOperation as error:
            raise UsageError(error.message) from None
        async with open_cli_store(args.store) as store:
            with trio.fail_after(args.timeout):
                record = await store.location.release_expired(
                    args.spot_id, object_generation=args.generation,
                    owner_generation=args.owner_generation, now=wall_time())
            print(f"released {record.spot_id!r}: generation {record.object_generation}, "
                  f"owner generation {record.owner_generation}, owner "
                  f"{describe_owner(record.owner)} (lease over). The Spot is Missing now; "
                  "its next activation creates a new incarnation with a larger generation.",
                  file=out)
            with trio.move_on_after(args.timeout):
                note = await _inbox_note(store, record)
                if note:
                    print(note, file=out)
        return EXIT_OK

    return run_command("release", body)


async def _inbox_note(store: Store, record: AuthorityRecord) -> str:
    """A warning when the released incarnation's durable inbox still holds messages."""
    try:
        left = await store.relocation.inbox_read(record.spot_id, record.object_generation,
                                                 limit=MAX_INBOX_READ)
    except ZLinkError:
        return ""  # released either way; the note is a courtesy
    if not left:
        return ""
    count = f"{len(left)}+" if len(left) == MAX_INBOX_READ else str(len(left))
    return (f"note: {count} unhandled record(s) remain in the released incarnation's durable "
            "inbox; they are not delivered to the new incarnation")

"""``zlink-trio inspect --store URL [SPOT_ID]``: read authority records, never write.

Theory of operation
-------------------
Without ``SPOT_ID`` it lists authority records (every state, Entry claims
included) in Spot ID order with the Location Store's bounded ``query``: one
page of ``--page-size`` records (1..1000, default 100; the store also stops a
page at 4 MiB), then the cursor to continue with ``--cursor``; ``--all``
walks every page. Each page is one store read, so a long walk is not one
snapshot: records created or deleted meanwhile may or may not appear, and
every record present for the whole walk appears exactly once.

With ``SPOT_ID`` it shows that one record, every field, plus whether its
owner's lease is live now (wall-clock time, as nodes stamp leases on shared
stores) -- which tells whether ``zlink-trio release`` may free it, printing the
commands that do -- or says the Spot is Missing (exit 1).

Owners are named by NodeId (``store_command.node_names``: the claims the store keeps,
live or dead); the NodeRid appears in ``--json`` only, or where no claim names it.

``--json``: the list is one JSON document ``{"records": [...], "nextCursor":
...}`` streamed page by page (records as ``AuthorityRecord.to_json``); one
record is its ``to_json`` plus ``ownerLease``.
"""

from __future__ import annotations

import json
import shlex
import sys
from typing import TYPE_CHECKING, TextIO

import trio

from zlink_trio.cli.store_command import (
    EXIT_OK,
    EXIT_REFUSED,
    HEADER,
    UsageError,
    add_store_arguments,
    column_widths,
    iso,
    name_owner,
    node_names,
    open_cli_store,
    owner_lease,
    record_line,
    release_node_command,
    run_command,
    wall_time,
)
from zlink_trio.core._json_fields import encode_kind
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import SpotKind, validate_spot_id
from zlink_trio.core.records import AuthorityState
from zlink_trio.store import MAX_PAGE_SIZE

if TYPE_CHECKING:
    import argparse

    from zlink_trio.core.identity import NodeRid
    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.store import Page, Store

__all__ = ("add_parser", "run")

_DEFAULT_PAGE = 100


def _page_size(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_PAGE_SIZE:
        raise ValueError(text)
    return value


_page_size.__name__ = f"page size (1..{MAX_PAGE_SIZE})"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``inspect``."""
    parser = commands.add_parser(
        "inspect", help="list authority records, or show one Spot's",
        description="List the Location Store's authority records page by page, or show "
                    "one Spot's record. Read-only. Exit 0 shown, 1 the Spot is Missing or the "
                    "store is unavailable, 2 usage error.")
    add_store_arguments(parser)
    parser.add_argument("spot_id", nargs="?", metavar="SPOT_ID",
                        help="show this Spot's record (exit 1 when it is Missing)")
    parser.add_argument("--page-size", type=_page_size, metavar="N",
                        help=f"records per page, 1..{MAX_PAGE_SIZE} (default {_DEFAULT_PAGE})")
    parser.add_argument("--cursor", help="continue a listing where it stopped")
    parser.add_argument("--all", action="store_true", help="walk every page")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``inspect`` with parsed ``args``; returns the exit status."""
    out = sys.stdout

    async def body() -> int:
        if args.spot_id is not None:
            if args.cursor is not None or args.all or args.page_size is not None:
                raise UsageError("--page-size, --cursor and --all list records; they do not "
                                 "go with a SPOT_ID")
            try:
                validate_spot_id(args.spot_id)
            except InvalidOperation as error:
                raise UsageError(error.message) from None
        async with open_cli_store(args.store) as store:
            if args.spot_id is not None:
                return await _show(store, args, out)
            return await _list(store, args, out)

    return run_command("inspect", body, as_json=args.json)


async def _query(store: Store, args: argparse.Namespace, cursor: str | None) -> Page:
    with trio.fail_after(args.timeout):
        try:
            return await store.location.query(page_size=args.page_size or _DEFAULT_PAGE,
                                              cursor=cursor)
        except InvalidOperation as error:
            raise UsageError(f"--cursor {cursor!r}: {error.message}") from None


async def _list(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    page = await _query(store, args, args.cursor)  # before any output: a bad cursor is usage
    count = 0
    names = {}
    if not args.json:
        with trio.fail_after(args.timeout):
            names = await node_names(store, wall_time())  # owners by NodeId
    widths = column_widths(page.records, names)  # the first page sets the columns
    if args.json:
        out.write('{"records": [')
    else:
        print(record_line(HEADER, widths), file=out)
    while True:
        for record in page.records:
            if args.json:
                out.write(("," if count else "") + "\n  " + json.dumps(record.to_json()))
            else:
                print(record_line(record, widths, names), file=out)
            count += 1
        if page.next_cursor is None or not args.all:
            break
        page = await _query(store, args, page.next_cursor)
    cursor = page.next_cursor
    if args.json:
        out.write(f'\n], "nextCursor": {json.dumps(cursor)}}}\n')
    elif cursor is None:
        print(f"{count} record(s)", file=out)
    else:
        size = "" if args.page_size is None else f" --page-size {args.page_size}"
        print(f"{count} record(s); more: zlink-trio inspect --store {shlex.quote(args.store)}"
              f"{size} --cursor {shlex.quote(cursor)}   (or add --all)", file=out)
    return EXIT_OK


async def _show(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    spot_id: str = args.spot_id
    with trio.fail_after(args.timeout):
        record = await store.location.find(spot_id)
    if record is None:
        if args.json:
            print(json.dumps({"spotId": spot_id, "state": "missing"}), file=out)
        else:
            print(f"{spot_id!r} is Missing: the store has no authority record for it", file=out)
        return EXIT_REFUSED
    now = wall_time()
    with trio.fail_after(args.timeout):
        lease = await owner_lease(store, record, now)
    if args.json:
        shown = record.to_json()
        shown["ownerLease"] = {"live": lease is not None, "expiresAt": lease}
        print(json.dumps(shown, indent=2), file=out)
        return EXIT_OK
    with trio.fail_after(args.timeout):
        names = await node_names(store, now)
    for name, value in _fields(record, lease, now, names):
        print(f"{name:<19}{value}", file=out)
    if (record.state is AuthorityState.READY and record.kind is not SpotKind.ENTRY
            and lease is None):
        print("\nIts owner's lease is over. If that node is gone for good, an operator may "
              "free the Spot with:\n  zlink-trio release --store "
              f"{shlex.quote(args.store)} {shlex.quote(spot_id)} --generation "
              f"{record.object_generation} --owner-generation {record.owner_generation}",
              file=out)
        node_id = names.get(record.owner.node_rid)
        if node_id is not None:
            print(f"or free everything NodeId {node_id!r} owned with:\n  "
                  f"{release_node_command(args.store, node_id)}", file=out)
    return EXIT_OK


def _fields(record: AuthorityRecord, lease: float | None, now: float,
            names: dict[NodeRid, str]) -> list[tuple[str, str]]:
    intent, pointer, target = (record.creation_intent, record.recovery_pointer,
                               record.relocation_target)
    return [
        ("spot id", record.spot_id),
        ("kind", encode_kind(record.kind)),
        ("stable type", record.stable_type),
        ("mesh", record.mesh),
        ("state", record.state.value),
        ("object generation", str(record.object_generation)),
        ("owner generation", str(record.owner_generation)),
        ("store version", str(record.store_version)),
        ("owner", name_owner(record.owner, names)),
        ("owner lease", "not live: no current claim of that lifecycle (expired, removed or "
                        "replaced)" if lease is None else
                        f"live until {iso(lease)} ({lease - now:.1f} s left)"),
        ("creation intent", "none" if intent is None else
         f"content {intent.content_ref} sha256 {intent.sha256} size {intent.size}"),
        ("recovery pointer", "none" if pointer is None else
         f"root {pointer.root_ref} sha256 {pointer.sha256} size {pointer.size} "
         f"version {pointer.version}"),
        ("relocation target", "none" if target is None else name_owner(target, names)),
    ]

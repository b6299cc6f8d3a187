"""What the store subcommands of ``zlink-trio`` share: opening, errors, exit codes, formats.

Theory of operation
-------------------
A store command is one short Trio run (:func:`run_command`) against a store
other processes share. Its exit status is one of three:

- ``0`` (:data:`EXIT_OK`): it did what was asked;
- ``1`` (:data:`EXIT_REFUSED`): the store refused or could not answer, or the
  Spot is Missing -- the message says why and what to do;
- ``2`` (:data:`EXIT_USAGE`): the command line or the store URL is wrong
  (argparse's own errors exit 2 as well).

Every typed zlink_trio error becomes one readable line on stderr, never a
traceback; with ``--json`` the same failure is also printed on stdout as
``{"error": {"command", "status", "message"}}`` (:func:`run_command`), so a script
reads one JSON document whatever happened.

``memory://`` is refused: a memory store lives inside one process, so a command in
another process would only ever see an empty store. A ``sqlite:///`` path must name an
existing file, so a typo does not quietly create an empty store. Each store call is
bounded by ``--timeout``.

Output names a node by its NodeId: a record names its owner only by NodeRid and
lifecycle, so a command reads the claims the store keeps, live and dead
(:func:`node_names`), and prints the NodeId (:func:`name_owner`, :func:`owner_cell`); the
NodeRid itself appears only in ``--json``, or when no claim names the lifecycle any more.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, TextIO

import trio

from zlink_trio.core._json_fields import encode_kind
from zlink_trio.core.descriptor import describe_owner
from zlink_trio.core.errors import (
    DeadlineExceeded,
    InvalidConfiguration,
    NotFound,
    StaleFence,
    Unavailable,
    ZLinkError,
)
from zlink_trio.store import OwnerAlive, open_store

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping

    from zlink_trio.core.identity import NodeRid
    from zlink_trio.core.records import AuthorityRecord, OwnerFence
    from zlink_trio.store import Store

__all__ = (
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "HEADER",
    "UsageError",
    "add_store_arguments",
    "check_url",
    "column_widths",
    "iso",
    "name_owner",
    "node_names",
    "open_cli_store",
    "owner_cell",
    "owner_lease",
    "positive_int",
    "record_line",
    "release_node_command",
    "run_command",
    "wall_time",
)

EXIT_OK: Final = 0
EXIT_REFUSED: Final = 1
EXIT_USAGE: Final = 2


class UsageError(Exception):
    """The command line cannot work (exit 2); the message says how to fix it."""


def positive_int(text: str) -> int:
    """argparse ``type``: a generation (1 .. 2**63-1)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 2**63 - 1:
        raise ValueError(text)
    return value


positive_int.__name__ = "generation"  # argparse names the type in its error message


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """``--store URL`` and ``--timeout SECONDS``, shared by every store command."""
    parser.add_argument("--store", required=True, metavar="URL",
                        help="the store the nodes share: sqlite:///path.db or "
                             "redis://host:port/db (memory:// cannot be reached from here)")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                        help="bound on each store call (default 30)")


def check_url(url: str) -> None:
    """Refuse (UsageError) a URL no command can use: ``memory://``, a missing SQLite file."""
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme == "memory":
        raise UsageError(
            f"{url!r} is an in-process memory store: it lives inside the process that opened "
            "it, so this command would only see an empty store; pass the sqlite:///... or "
            "redis://... URL the nodes share"
        )
    if scheme == "sqlite":
        from zlink_trio.store.sqlite.schema import parse_url

        path = parse_url(url).path
        if not os.path.isfile(path):
            raise UsageError(f"no SQLite store at {path!r} (no such file); check the path in "
                             "--store")


@asynccontextmanager
async def open_cli_store(url: str) -> AsyncIterator[Store]:
    """Open ``url`` for a command, after refusing URLs no command can use."""
    check_url(url)
    async with open_store(url) as store:
        yield store


def wall_time() -> float:
    """Now on the clock shared stores stamp leases with (wall-clock seconds)."""
    return time.time()


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def run_command(command: str, body: Callable[[], Awaitable[int]], *,
                err: TextIO | None = None, as_json: bool = False,
                unavailable: str = "store unavailable", not_found: str = "not released",
                too_slow: str = "the store did not answer within --timeout; nothing is known "
                                "to have changed, check with zlink-trio inspect") -> int:
    """Run ``body`` in ``trio.run``; turn every expected failure into a line and a status.

    ``as_json`` also prints the failure on stdout as ``{"error": {...}}``;
    ``unavailable`` labels Unavailable / DeadlineExceeded, ``not_found`` NotFound, and
    ``too_slow`` is the line for a ``--timeout`` that ran out (the operator commands
    reach nodes, not only a store).
    """
    err = sys.stderr if err is None else err
    try:
        return trio.run(body)
    except BaseException as raised:
        error = _leaf(raised)
        status, line = _failure(error, unavailable, not_found, too_slow)
        if status is None:
            if error is raised:
                raise
            raise error from raised
        print(f"zlink-trio {command}: {line}", file=err)
        if as_json:
            print(json.dumps({"error": {"command": command, "status": status,
                                        "message": line}}))
        return status


def _failure(error: BaseException, unavailable: str, not_found: str,
             too_slow: str) -> tuple[int | None, str]:
    if isinstance(error, UsageError | InvalidConfiguration):
        return EXIT_USAGE, f"error: {error}"
    if isinstance(error, trio.TooSlowError):
        return EXIT_REFUSED, too_slow
    # StaleFence is an Unavailable, but it is the store's answer, not a fault.
    if isinstance(error, DeadlineExceeded | Unavailable) and not isinstance(error, StaleFence):
        return EXIT_REFUSED, f"{unavailable}: {error.message}"
    if isinstance(error, ZLinkError):
        label = not_found if isinstance(error, NotFound) else "refused"
        extra = (f" (the lease ends {iso(error.lease_expires_at)})"
                 if isinstance(error, OwnerAlive) else "")
        return EXIT_REFUSED, f"{label}: {error.message}{extra}"
    return None, ""


async def node_names(store: Store, now: float) -> dict[NodeRid, str]:
    """NodeRid -> NodeId of every claim the store keeps, live or dead (lease over, not
    removed yet): how a command names the owner a record gives only by NodeRid."""
    claims = [*await store.location.descriptors(now=now),
              *await store.location.dead_claims(now=now)]
    return {claim.descriptor.node_rid: claim.descriptor.node_id for claim in claims}


def name_owner(owner: OwnerFence, names: Mapping[NodeRid, str]) -> str:
    """``node 'a' (lifecycle 3)`` (``core.descriptor.describe_owner``) by ``names``
    (:func:`node_names`)."""
    return describe_owner(owner, names.get(owner.node_rid))


def owner_cell(owner: OwnerFence, names: Mapping[NodeRid, str]) -> str:
    """``a/3`` -- NodeId / lifecycle -- for a table, or ``(rid <hex>)/3`` when no claim
    names the lifecycle's NodeId any more."""
    node_id = names.get(owner.node_rid)
    return f"{node_id if node_id is not None else f'(rid {owner.node_rid})'}/" \
           f"{owner.lifecycle_generation}"


def release_node_command(url: str, node_id: str) -> str:
    """The command that releases everything the dead lifecycles of ``node_id`` own, as an
    operator types it (``zlink-trio release --node``)."""
    return f"zlink-trio release --store {shlex.quote(url)} --node {shlex.quote(node_id)}"


async def owner_lease(store: Store, record: AuthorityRecord, now: float) -> float | None:
    """The owner's lease expiry when its claim is live at ``now``, else ``None``."""
    for claim in await store.location.descriptors(record.mesh, now=now):
        if claim.owner() == record.owner:
            return claim.lease_expires_at
    return None


def iso(seconds: float) -> str:
    """Wall-clock seconds as an ISO 8601 UTC time."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


#: Column headings of ``inspect``'s list.
HEADER: Final = ("SPOT ID", "KIND", "TYPE", "STATE", "GENERATION", "OWNER GEN",
                 "OWNER NODE/LIFECYCLE", "VERSION")
#: Columns aligned right (numbers); the others are aligned left.
_RIGHT: Final = frozenset({4, 5, 7})


def _cells(record: AuthorityRecord, names: Mapping[NodeRid, str]) -> tuple[str, ...]:
    r = record
    return (r.spot_id, encode_kind(r.kind), r.stable_type, r.state.value,
            str(r.object_generation), str(r.owner_generation), owner_cell(r.owner, names),
            str(r.store_version))


def column_widths(records: Iterable[AuthorityRecord],
                  names: Mapping[NodeRid, str]) -> tuple[int, ...]:
    """Widths that fit :data:`HEADER` and every one of ``records`` (owners named by
    ``names``, :func:`node_names`)."""
    widths = [len(heading) for heading in HEADER]
    for record in records:
        for index, cell in enumerate(_cells(record, names)):
            widths[index] = max(widths[index], len(cell))
    return tuple(widths)


def record_line(values: tuple[str, ...] | AuthorityRecord,
                widths: tuple[int, ...] | None = None,
                names: Mapping[NodeRid, str] | None = None) -> str:
    """One list line -- a record (its owner named by ``names``), or the header when given
    :data:`HEADER` -- in columns of ``widths`` (:func:`column_widths`; a wider value
    pushes the rest right)."""
    cells = values if isinstance(values, tuple) else _cells(values, names or {})
    widths = widths or tuple(len(cell) for cell in cells)
    return "  ".join(cell.rjust(width) if index in _RIGHT else cell.ljust(width)
                     for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
                     ).rstrip()

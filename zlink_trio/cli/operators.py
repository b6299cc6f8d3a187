"""``zlink-trio relocate SPOT_ID [--to NODE]``, ``drain NODE`` and ``undrain NODE``: act on
running nodes.

Theory of operation
-------------------
They need the running Mesh, not only its store, so the command joins it for the
duration of one request: it opens a *client-only* node (``open_node(...,
client_only=True)``: it hosts no Spots, takes no placements and is never a
relocation target) on the store the nodes share, in ``--mesh`` (default ``world``),
authenticated with the Mesh's secret, and asks through it:

- ``relocate``: ``Node.ask_relocate`` -- the Spot's owner moves it to the node named
  by ``--to`` (a NodeId) or to one placement picks, exactly as ``node.relocate`` there;
- ``drain``: ``Node.ask_drain`` -- node ``NODE`` stops taking new Spots and moves every
  Spot it hosts (it keeps running: stop it afterwards);
- ``undrain``: ``Node.ask_undrain`` -- node ``NODE`` takes new Spots again (the undo of
  ``drain`` for a node that stays; the Spots it moved stay where they went).

The secret is read from ``--secret-file FILE`` (its bytes, surrounding whitespace
stripped) or the ``ZLINK_SECRET`` environment variable -- never from the command line,
where other users could read it in the process list. With neither, the development
secret that nodes on loopback use by default is used. The client node listens on
``--listen`` (default ``127.0.0.1:0``) under the NodeId ``--as`` (default
``zlink-trio-<8 hex>``, fresh per run) and leaves the Mesh when the command ends.
``--timeout`` bounds the request (default 30 s) and, separately, joining the Mesh.
Nodes that serve ``wss://`` (TLS) are dialled trusting ``--ca-file FILE`` (PEM), or the
system's certificate authorities without it.

Exit status: ``0`` relocated (COMMITTED) / drained with every Spot moved / undrained;
``1`` the move was refused or aborted (the reason is printed), some Spots did not move,
the Spot or node is unknown, a node or the store is unavailable, or the request timed
out (what was done stays done: check with ``zlink-trio nodes`` / ``inspect``); ``2``
usage error (including a bad secret).

Nodes are named by NodeId; the NodeRid of the new owner appears only in ``--json``
(its ``ref``). ``--json``: relocate prints ``{"spotId", "outcome", "ref", "reason",
"node"}`` (``ref`` as ``SpotRef.to_json``, ``node`` the new owner's NodeId when known);
drain prints ``{"nodeId", "moved": [...], "notMoved": [...], "unlisted"}`` with entries
``{"spotId", "outcome", "ref", "reason", "node"}``; undrain prints ``{"nodeId",
"acceptsPlacements": true}``; a failure is ``{"error": {...}}``.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import trio

import zlink_trio as zl
from zlink_trio.cli.store_command import (
    EXIT_OK,
    EXIT_REFUSED,
    UsageError,
    add_store_arguments,
    run_command,
    wall_time,
)
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import validate_mesh_name, validate_node_id, validate_spot_id

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator

    from zlink_trio.core.identity import NodeRid

__all__ = ("SECRET_ENV", "add_parsers", "client_node", "read_secret", "result_json")

#: The environment variable holding the Mesh secret.
SECRET_ENV = "ZLINK_SECRET"
_ACROSS = ("unavailable", "the request did not finish within --timeout; what was done stays "
                          "done: check with zlink-trio nodes and zlink-trio inspect")


def _add_mesh_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_arguments(parser)
    parser.add_argument("--mesh", default="world", metavar="MESH",
                        help="the Mesh the nodes serve (default world)")
    parser.add_argument("--secret-file", type=Path, metavar="FILE",
                        help=f"file holding the Mesh secret (else ${SECRET_ENV}; never pass "
                             "a secret on the command line)")
    parser.add_argument("--ca-file", type=Path, metavar="FILE",
                        help="PEM certificates to trust when the nodes serve wss:// (TLS); "
                             "default: the system's")
    parser.add_argument("--listen", default="127.0.0.1:0", metavar="HOST:PORT",
                        help="where this command's client-only node listens "
                             "(default 127.0.0.1:0)")
    parser.add_argument("--as", dest="node_id", metavar="NODE_ID",
                        help="NodeId of this command's client-only node (default "
                             "zlink-trio-<random>)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``relocate``, ``drain`` and ``undrain``."""
    relocate = commands.add_parser(
        "relocate", help="move a Spot to another node (its owner does the move)",
        description="Join the Mesh as a client-only node and ask the owner of SPOT_ID to "
                    "relocate it, to --to NODE or to a node placement picks. Exit 0 "
                    "relocated, 1 refused / aborted / unavailable, 2 usage error.")
    relocate.add_argument("spot_id", metavar="SPOT_ID")
    relocate.add_argument("--to", metavar="NODE", help="the NodeId to move it to")
    _add_mesh_arguments(relocate)
    relocate.set_defaults(run=run_relocate)
    drain = commands.add_parser(
        "drain", help="move every Spot off a node and close it to new Spots",
        description="Join the Mesh as a client-only node and ask node NODE to drain: it "
                    "takes no new Spots and relocates every Spot it hosts (then stop it). "
                    "Exit 0 every Spot moved, 1 some did not / unavailable, 2 usage error.")
    drain.add_argument("node", metavar="NODE", help="the NodeId to drain")
    _add_mesh_arguments(drain)
    drain.set_defaults(run=run_drain)
    undrain = commands.add_parser(
        "undrain", help="let a drained node take new Spots again",
        description="Join the Mesh as a client-only node and ask node NODE to undrain: it "
                    "takes new Spots again (the Spots its drain moved stay where they went). "
                    "Exit 0 undrained, 1 unknown node / unavailable, 2 usage error.")
    undrain.add_argument("node", metavar="NODE", help="the NodeId to undrain")
    _add_mesh_arguments(undrain)
    undrain.set_defaults(run=run_undrain)


def read_secret(secret_file: Path | None, environ: dict[str, str] | None = None) -> bytes | None:
    """The Mesh secret: ``secret_file``'s bytes, else ``$ZLINK_SECRET``, else ``None``."""
    environ = dict(os.environ) if environ is None else environ
    if secret_file is not None:
        try:
            return secret_file.read_bytes().strip()
        except OSError as error:
            raise UsageError(f"cannot read --secret-file {str(secret_file)!r}: "
                             f"{error.strerror or error}") from None
    value = environ.get(SECRET_ENV)
    return value.strip().encode("utf-8") if value else None


def _check(args: argparse.Namespace) -> None:
    try:
        validate_mesh_name(args.mesh)
        if args.node_id is not None:
            validate_node_id(args.node_id)
        if getattr(args, "spot_id", None) is not None:
            validate_spot_id(args.spot_id)
        for name in ("to", "node"):
            if getattr(args, name, None) is not None:
                validate_node_id(getattr(args, name))
    except InvalidOperation as error:
        raise UsageError(error.message) from None


@asynccontextmanager
async def client_node(args: argparse.Namespace) -> AsyncIterator[zl.Node]:
    """A command's client-only node, joined to the Mesh for the ``async with``.

    ``args`` carries ``store``, ``mesh``, ``secret_file``, ``ca_file``, ``listen``,
    ``node_id`` (``None``: a fresh ``zlink-trio-<8 hex>``) and ``timeout``, as the
    options of these commands give them (module docstring); a bad secret, CA file or
    store URL is a :class:`~zlink_trio.cli.store_command.UsageError`."""
    from zlink_trio.cli.store_command import open_cli_store

    secret = read_secret(args.secret_file)
    tls = _client_tls(args.ca_file)
    async with open_cli_store(args.store):  # refuses memory:// and a missing SQLite file
        pass
    node_id = args.node_id or f"zlink-trio-{uuid.uuid4().hex[:8]}"
    async with zl.open_node(node_id, store=args.store, mesh=args.mesh, client_only=True,
                            listen=args.listen, secret=secret, client_ssl_context=tls,
                            default_timeout=args.timeout) as node:
        yield node


def _client_tls(ca_file: Path | None) -> ssl.SSLContext:
    """How this command dials ``wss://`` nodes: trusting ``ca_file``, else the system."""
    try:
        return ssl.create_default_context(cafile=None if ca_file is None else str(ca_file))
    except (OSError, ssl.SSLError) as error:
        raise UsageError(f"cannot use --ca-file {str(ca_file)!r}: "
                         f"{getattr(error, 'strerror', None) or error}") from None


def result_json(result: zl.RelocationResult, names: dict[NodeRid, str]) -> dict[str, object]:
    """One relocation for ``--json``: ``node`` is the owner's NodeId when ``names`` has it."""
    return {"spotId": result.ref.spot_id, "outcome": result.outcome.value,
            "ref": result.ref.to_json(), "reason": result.reason,
            "node": names.get(result.ref.node_rid)}


def _name(result: zl.RelocationResult, names: dict[NodeRid, str]) -> str:
    """The new owner's NodeId, quoted; what is known of it when no claim names it."""
    node_id = names.get(result.ref.node_rid)
    return repr(node_id) if node_id is not None else (
        f"(no claim names it any more; rid {result.ref.node_rid})")


async def _node_ids(args: argparse.Namespace) -> dict[NodeRid, str]:
    """NodeRid -> NodeId of the claims the store keeps ({} if the store is slow)."""
    from zlink_trio.cli.store_command import node_names, open_cli_store

    found: dict[NodeRid, str] = {}
    with trio.move_on_after(args.timeout):
        async with open_cli_store(args.store) as store:
            found = await node_names(store, wall_time())
    return found


def run_relocate(args: argparse.Namespace) -> int:
    """Run ``relocate`` with parsed ``args``; returns the exit status."""
    out = sys.stdout

    async def body() -> int:
        _check(args)
        async with client_node(args) as node:
            result = await node.ask_relocate(args.spot_id, to=args.to, timeout=args.timeout)
            names = (await _node_ids(args)
                     if result.outcome is zl.RelocationOutcome.COMMITTED else {})
        if args.json:
            print(json.dumps(result_json(result, names)), file=out)
        elif result.outcome is zl.RelocationOutcome.COMMITTED:
            print(f"relocated {args.spot_id!r} to node {_name(result, names)}, generation "
                  f"{result.ref.generation}", file=out)
        else:
            print(f"not relocated {args.spot_id!r}: {result.outcome.value}: {result.reason}",
                  file=out)
        return EXIT_OK if result.outcome is zl.RelocationOutcome.COMMITTED else EXIT_REFUSED

    return run_command("relocate", body, as_json=args.json, unavailable=_ACROSS[0],
                       not_found="not found", too_slow=_ACROSS[1])


def run_drain(args: argparse.Namespace) -> int:
    """Run ``drain`` with parsed ``args``; returns the exit status."""
    out = sys.stdout

    async def body() -> int:
        _check(args)
        async with client_node(args) as node:
            result = await node.ask_drain(args.node, timeout=args.timeout)
            names = await _node_ids(args) if result.moved else {}
        complete = not result.not_moved and not result.unlisted
        if args.json:
            print(json.dumps({"nodeId": args.node,
                              "moved": [result_json(r, names) for r in result.moved],
                              "notMoved": [result_json(r, names) for r in result.not_moved],
                              "unlisted": result.unlisted}, indent=2), file=out)
            return EXIT_OK if complete else EXIT_REFUSED
        for moved in result.moved:
            print(f"moved {moved.ref.spot_id!r} to node {_name(moved, names)}", file=out)
        for left in result.not_moved:
            print(f"not moved {left.ref.spot_id!r}: {left.outcome.value}: {left.reason}",
                  file=out)
        unlisted = f", {result.unlisted} more not listed" if result.unlisted else ""
        print(f"node {args.node!r} drained: {len(result.moved)} Spot(s) moved, "
              f"{len(result.not_moved)} not moved{unlisted}. It takes no new Spots; stop it "
              "when ready.", file=out)
        return EXIT_OK if complete else EXIT_REFUSED

    return run_command("drain", body, as_json=args.json, unavailable=_ACROSS[0],
                       not_found="not found", too_slow=_ACROSS[1])


def run_undrain(args: argparse.Namespace) -> int:
    """Run ``undrain`` with parsed ``args``; returns the exit status."""
    out = sys.stdout

    async def body() -> int:
        _check(args)
        async with client_node(args) as node:
            await node.ask_undrain(args.node, timeout=args.timeout)
        if args.json:
            print(json.dumps({"nodeId": args.node, "acceptsPlacements": True}), file=out)
        else:
            print(f"node {args.node!r} undrained: it takes new Spots again (the Spots its "
                  "drain moved stay where they went)", file=out)
        return EXIT_OK

    return run_command("undrain", body, as_json=args.json, unavailable=_ACROSS[0],
                       not_found="not found", too_slow=_ACROSS[1])

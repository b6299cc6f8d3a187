"""``zlink-trio dashboard --store URL [--listen HOST:PORT] [--secret-file F]``: a live web page
of the Mesh.

Theory of operation
-------------------
The command opens the store once and serves a local web page about it with Hypercorn's
Trio worker (:mod:`.dashboard_app` is the app) until Ctrl-C. Once it listens it prints
``zlink-trio dashboard: serving http://HOST:PORT/`` on standard output (``--listen``,
default ``127.0.0.1:8765``; port ``0`` picks a free one, so read the URL from that line).

The page loads nothing but its own three files (``zlink_trio/cli/dashboard_page/``) and
polls the app's JSON every ``--refresh`` seconds (default 1), showing:

- the live nodes: NodeId, Mesh, lifecycle, endpoint, roles, lease left, placement weight,
  placement (``open`` / ``draining``) and Spot counts by state -- ``zlink-trio nodes``'
  survey (:func:`zlink_trio.cli.nodes.survey`), with the same ``--max-records`` bound;
- the dead lifecycles still owning records, each with the command that releases them
  (``zlink-trio nodes --all``);
- the moves in flight: records Relocating, Sealed or RelayReady, from their source to
  their target, found by the same walk;
- a Spot's record by ID (``zlink-trio inspect ID``), kept fresh while shown;
- each lifecycle chart drawn as SVG (:func:`statecharts.svg.svg`, pure Python) in the
  page, where a recorded trace (``--trace FILE``, or a file picked in the page and
  checked by the app) is replayed step by step: Prev / Next / Play highlight the
  current state and the transition just taken.

Each store read is bounded by ``--timeout``; a failed read is an error banner in the page
(the server keeps serving), and bad input (unknown Spot or chart, malformed trace) an
error object, never a crash.

The page also has a Relocate button on the Spot shown: like ``zlink-trio relocate``, it
joins the Mesh of that Spot as a client-only node for the one request
(:mod:`.operators`), authenticated with the Mesh secret from ``--secret-file FILE`` or
``$ZLINK_SECRET`` (the development secret without either), trusting ``--ca-file`` for
``wss://`` nodes. Those options serve that button only; the rest of the page reads the
store and needs no secret.

Starlette and Hypercorn are the optional extra ``dashboard``; without them the command
exits 2 saying ``pip install 'zlink-trio[dashboard]'``. Ctrl-C (SIGINT) or SIGTERM stops
it: it stops serving and closes the store. Exit status: 0 once stopped that way, 1
the store is unavailable at start, 2 usage error (a bad option, an address that cannot be
bound, an unreadable or malformed ``--trace``, the extra missing).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from zlink_trio.cli.nodes import DEFAULT_MAX_RECORDS, record_count
from zlink_trio.cli.operators import SECRET_ENV, client_node, result_json
from zlink_trio.cli.store_command import (
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_store_arguments,
    node_names,
    open_cli_store,
    run_command,
    wall_time,
)
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import validate_mesh_name, validate_node_id, validate_spot_id

if TYPE_CHECKING:
    from statecharts.trace import TraceRecord
    from zlink_trio.cli.dashboard_app import Relocate

__all__ = ("DEFAULT_LISTEN", "add_parser", "relocator", "run")

#: Where the page is served unless ``--listen`` says otherwise.
DEFAULT_LISTEN = "127.0.0.1:8765"
_INSTALL = "pip install 'zlink-trio[dashboard]'"


def _seconds(text: str) -> float:
    value = float(text)
    if not 0.1 <= value <= 3600:
        raise ValueError(text)
    return value


_seconds.__name__ = "seconds (0.1 .. 3600)"



def _listen(text: str) -> str:
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(text)
    return text


_listen.__name__ = "HOST:PORT"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``dashboard``."""
    parser = commands.add_parser(
        "dashboard", help="serve a live web page of the nodes, moves, Spots and charts",
        description="Serve a local web page that refreshes by itself: the live nodes (leases, "
                    "weights, draining, Spot counts), the dead lifecycles still owning "
                    "records, the moves in flight, a Spot's record by ID, and each lifecycle "
                    "chart with a recorded trace replayed step by step. Reads the store; the "
                    "page's Relocate button joins the Mesh like zlink-trio relocate. Needs "
                    f"the 'dashboard' extra ({_INSTALL}). Runs until Ctrl-C or SIGTERM. Exit "
                    "0 stopped, 1 store unavailable, 2 usage error.")
    add_store_arguments(parser)
    parser.add_argument("--mesh", metavar="MESH", help="only this Mesh's nodes and moves")
    parser.add_argument("--listen", type=_listen, default=DEFAULT_LISTEN, metavar="HOST:PORT",
                        help=f"where to serve the page (default {DEFAULT_LISTEN}; port 0: any "
                             "free port, printed)")
    parser.add_argument("--refresh", type=_seconds, default=1.0, metavar="SECONDS",
                        help="how often the page polls (default 1)")
    parser.add_argument("--max-records", type=record_count, default=DEFAULT_MAX_RECORDS,
                        metavar="N", help="read at most N authority records per refresh to "
                                          f"count Spots and find moves (default "
                                          f"{DEFAULT_MAX_RECORDS:,})")
    parser.add_argument("--trace", type=Path, metavar="FILE",
                        help="a JSON-lines chart trace (statecharts.trace) to replay in the "
                             "page")
    parser.add_argument("--secret-file", type=Path, metavar="FILE",
                        help=f"file holding the Mesh secret, for the page's Relocate button "
                             f"(else ${SECRET_ENV})")
    parser.add_argument("--ca-file", type=Path, metavar="FILE",
                        help="PEM certificates to trust when the nodes serve wss://, for the "
                             "Relocate button")
    parser.set_defaults(run=run)


def _read_trace_file(path: Path) -> list[TraceRecord]:
    from statecharts.trace import TraceFormatError, read_trace

    try:
        with path.open(encoding="utf-8") as file:
            return read_trace(file)
    except OSError as error:
        raise UsageError(f"cannot read --trace {str(path)!r}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--trace {str(path)!r} is not UTF-8 text") from None
    except TraceFormatError as error:
        raise UsageError(f"--trace {str(path)!r}: {error}") from None


def relocator(store_url: str, *, secret_file: Path | None = None, ca_file: Path | None = None,
              timeout: float = 30.0) -> Relocate:
    """The page's Relocate action over the store at ``store_url``: ``(spot_id, mesh, to)``
    -> ``zlink-trio relocate --json``'s object. Each call joins ``mesh`` as a client-only
    node (:func:`zlink_trio.cli.operators.client_node`: the secret from ``secret_file`` or
    ``$ZLINK_SECRET``, ``wss://`` trusting ``ca_file``) for one ``ask_relocate`` bounded by
    ``timeout``; a malformed ID or a bad secret is a
    :class:`~zlink_trio.cli.store_command.UsageError`."""

    async def relocate(spot_id: str, mesh: str, to: str | None) -> dict[str, object]:
        try:
            validate_spot_id(spot_id)
            validate_mesh_name(mesh)
            if to is not None:
                validate_node_id(to)
        except InvalidOperation as error:
            raise UsageError(error.message) from None
        joined = argparse.Namespace(
            store=store_url, mesh=mesh, secret_file=secret_file, ca_file=ca_file,
            listen="127.0.0.1:0", node_id=None, timeout=timeout)
        async with client_node(joined) as node:
            result = await node.ask_relocate(spot_id, to=to, timeout=timeout)
        with trio.move_on_after(timeout):
            async with open_cli_store(store_url) as store:
                return result_json(result, await node_names(store, wall_time()))
        return result_json(result, {})

    return relocate


async def _stop_on_signal(scope: trio.CancelScope) -> None:
    """Cancel ``scope`` -- stop serving, close the store -- at SIGINT (Ctrl-C) or SIGTERM."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return


def run(args: argparse.Namespace) -> int:
    """Run ``dashboard`` with parsed ``args``; returns the exit status (0 once stopped by
    Ctrl-C or SIGTERM)."""
    try:
        import hypercorn  # noqa: F401
        import starlette  # noqa: F401
    except ImportError as error:
        print(f"zlink-trio dashboard: error: it needs Starlette and Hypercorn (missing "
              f"{error.name!r}): {_INSTALL}", file=sys.stderr)
        return EXIT_USAGE
    from zlink_trio.cli.dashboard_app import build_app, serve_app

    async def body() -> int:
        if args.mesh is not None:
            try:
                validate_mesh_name(args.mesh)
            except InvalidOperation as error:
                raise UsageError(error.message) from None
        trace = _read_trace_file(args.trace) if args.trace is not None else []
        async with open_cli_store(args.store) as store:
            with trio.fail_after(args.timeout):  # fail at start, not in the first poll
                await store.location.descriptors(args.mesh, now=wall_time())
            app = build_app(store, store_url=args.store, mesh=args.mesh,
                            timeout=args.timeout, max_records=args.max_records,
                            refresh=args.refresh, trace=trace,
                            relocate=relocator(args.store, secret_file=args.secret_file,
                                              ca_file=args.ca_file, timeout=args.timeout))
            async with trio.open_nursery() as nursery:
                url = await nursery.start(partial(serve_app, app, args.listen))
                if threading.current_thread() is threading.main_thread():
                    nursery.start_soon(_stop_on_signal, nursery.cancel_scope)
                print(f"zlink-trio dashboard: serving {url}/ (Ctrl-C stops it)", flush=True)
        return EXIT_OK

    try:
        return run_command("dashboard", body)
    except KeyboardInterrupt:
        return EXIT_OK

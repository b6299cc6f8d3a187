"""The ASGI app behind ``zlink-trio dashboard``: the page, its assets and the JSON it polls.

Theory of operation
-------------------
:func:`build_app` makes a Starlette app over one open :class:`~zlink_trio.store.Store`
(the command opens it once, for as long as it serves); :func:`serve_app` serves it with
Hypercorn's Trio worker in the caller's Trio run, so every store call runs in the same
event loop as the store. Nothing here writes to the store.

Routes (every JSON answer is one object; every error is ``{"error": {"status",
"message"}}`` with that HTTP status, never an HTML page or a traceback):

- ``GET /`` -- the page; ``GET /dashboard.js`` and ``/dashboard.css`` -- its script and
  style. The three are files of ``zlink_trio/cli/dashboard_page/``, read once; the page
  loads nothing else, from nowhere else.
- ``GET /api/config`` -- ``{"refresh"`` (seconds between polls), ``"store"`` (the URL,
  any password hidden), ``"mesh"`` (``null``: every Mesh), ``"traceCharts"`` (the
  charts ``--trace`` has records of)}.
- ``GET /api/overview`` -- what the page polls: one :func:`zlink_trio.cli.nodes.survey`
  (one claims read and one bounded walk of the records) as ``{"nodes", "deadLifecycles",
  "moves", "spotsComplete", "recordsRead", "now"}``. ``nodes`` and ``deadLifecycles``
  are exactly ``zlink-trio nodes --all --json``'s; a move is a record in a moving state
  (Relocating, Sealed, RelayReady: the chart's ``moving`` tag) as ``{"spotId", "kind",
  "stableType", "mesh", "state", "objectGeneration", "source", "target"}``, each end
  ``{"nodeId" (null when no claim names it), "nodeRid", "lifecycleGeneration"}``.
  ``GET /api/nodes`` and ``GET /api/moves`` are the same survey cut to
  ``nodes``/``deadLifecycles`` and to ``moves``.
- ``GET /api/spot/{id}`` -- one authority record as ``zlink-trio inspect --json ID``
  prints it (``to_json`` plus ``ownerLease``), plus ``ownerNode`` and
  ``relocationTargetNode`` (NodeIds, or ``null``); 404 when the Spot is Missing, 400
  for a malformed ID.
- ``GET /api/charts`` -- ``{"charts": [...]}`` as ``zlink-trio statecharts --json``
  lists them; ``GET /api/charts/{name}.svg`` -- the chart drawn by
  :func:`statecharts.svg.svg` (each state a ``<g class="state" data-state>``, each
  transition a ``<g class="transition" data-source data-event data-target>``: the
  page highlights them by those attributes); 404 for an unknown chart.
- ``GET /api/charts/{name}/trace`` -- the records of that chart in ``--trace``
  (``{"chart", "records": [...]}``, empty without ``--trace``); ``POST`` the same path
  with a trace file's text as the body to have it read and checked
  (:func:`statecharts.trace.read_trace`, :func:`~statecharts.trace.check_trace`): the
  answer is the same object, or 400 naming the line or step that is wrong (at most
  :data:`MAX_TRACE_BYTES`, else 413).
- ``POST /api/relocate/{id}`` with ``{"to": NODE_ID or null}`` -- the page's Relocate
  button, when the app was built with a ``relocate`` action (else 404): 200 and
  ``zlink-trio relocate --json``'s object when committed, 409 and that object when
  refused or aborted. The only route that changes anything, so it answers only a JSON
  request from the page's own origin at an IP address or ``localhost`` (403 / 415
  otherwise): another site the operator's browser visits cannot trigger it.
- Any other path or method: 404 / 405 as an error object.

Every store read is bounded by ``timeout``: a slow store answers 504, an unavailable one
503, another refusal 502, and an unexpected failure 500 with its type and message -- the
server keeps serving and the page shows the error in a banner until a poll succeeds.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING, Final, TypeAlias
from urllib.parse import urlsplit, urlunsplit

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from statecharts import compile
from statecharts.svg import svg
from statecharts.trace import TraceFormatError, check_trace, read_trace
from zlink_trio.cli.charts import chart_named, chart_rows
from zlink_trio.cli.nodes import node_json, survey
from zlink_trio.cli.store_command import (
    UsageError,
    iso,
    node_names,
    owner_cell,
    owner_lease,
    wall_time,
)
from zlink_trio.core.errors import DeadlineExceeded, InvalidOperation, Unavailable, ZLinkError
from zlink_trio.core.identity import validate_spot_id
from zlink_trio.core.records import MOVING_STATES

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from hypercorn.typing import ASGIFramework
    from starlette.requests import Request

    from statecharts import StrictChart
    from statecharts.trace import TraceRecord
    from zlink_trio.core.identity import NodeRid
    from zlink_trio.core.records import AuthorityRecord, OwnerFence
    from zlink_trio.store import Store

__all__ = ("MAX_TRACE_BYTES", "Relocate", "build_app", "serve_app", "shown_url")

#: The page's Relocate action: ``(spot_id, mesh, to)`` -> ``zlink-trio relocate --json``'s
#: object (``zlink_trio.cli.dashboard`` joins the Mesh as a client-only node for it).
Relocate: TypeAlias = Callable[[str, str, str | None], Awaitable[dict[str, object]]]

#: The largest trace file the page may post (bytes).
MAX_TRACE_BYTES: Final = 1 << 20

_PAGE_FILES: Final = {"/": ("index.html", "text/html; charset=utf-8"),
                      "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
                      "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8")}

_log = logging.getLogger("zlink_trio.cli.dashboard")

class _Refused(Exception):
    """A request the dashboard answers with an error object: ``status`` and ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"status": status, "message": message}}, status_code=status)


def shown_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (what the page may show)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _page_file(name: str) -> str:
    return (resources.files("zlink_trio.cli") / "dashboard_page" / name).read_text("utf-8")


class _Dashboard:
    """The views over one store; each bounds its store reads by ``timeout``."""

    def __init__(self, store: Store, *, store_url: str, mesh: str | None, timeout: float,
                 max_records: int, refresh: float, trace: Sequence[TraceRecord],
                 clock: Callable[[], float], relocate: Relocate | None) -> None:
        self.store = store
        self.relocate = relocate
        self.store_url = store_url
        self.mesh = mesh
        self.timeout = timeout
        self.max_records = max_records
        self.refresh = refresh
        self.trace = list(trace)
        self.clock = clock
        self.files = {path: (_page_file(name), media) for path, (name, media)
                      in _PAGE_FILES.items()}

    # -- the page ---------------------------------------------------------------------

    async def page_file(self, request: Request) -> Response:
        text, media = self.files[request.url.path]
        return Response(text, media_type=media, headers={"Cache-Control": "no-cache"})

    async def config(self, request: Request) -> Response:
        charts = {record.chart for record in self.trace}
        names = [str(row["name"]) for row in chart_rows() if row["chart"] in charts]
        return JSONResponse({"refresh": self.refresh, "store": shown_url(self.store_url),
                             "mesh": self.mesh, "traceCharts": names,
                             "relocate": self.relocate is not None})

    # -- the store ----------------------------------------------------------------------

    async def _overview(self) -> dict[str, object]:
        moving: list[AuthorityRecord] = []

        def visit(record: AuthorityRecord) -> None:
            if record.state in MOVING_STATES and (self.mesh is None
                                                  or record.mesh == self.mesh):
                moving.append(record)

        found = await survey(self.store, store_url=self.store_url, mesh=self.mesh,
                             max_records=self.max_records, timeout=self.timeout, dead=True,
                             visit=visit, now=self.clock())
        names: dict[NodeRid, str] = {c.descriptor.node_rid: c.descriptor.node_id
                                     for c in found.claims}
        for dead in found.dead:
            if dead.claim is not None:
                names.setdefault(dead.claim.descriptor.node_rid, dead.claim.descriptor.node_id)
        return {"nodes": [node_json(c, found.counts, found.now) for c in found.claims],
                "deadLifecycles": [d.to_json() for d in found.dead],
                "moves": [_move_json(r, names) for r in moving],
                "spotsComplete": found.complete, "recordsRead": found.read,
                "now": iso(found.now)}

    async def overview(self, request: Request) -> Response:
        return JSONResponse(await self._overview())

    async def nodes(self, request: Request) -> Response:
        shown = await self._overview()
        return JSONResponse({key: shown[key] for key in
                             ("nodes", "deadLifecycles", "spotsComplete", "recordsRead")})

    async def moves(self, request: Request) -> Response:
        shown = await self._overview()
        return JSONResponse({key: shown[key] for key in
                             ("moves", "spotsComplete", "recordsRead")})

    async def _record(self, spot_id: str, if_missing: str) -> AuthorityRecord:
        """The record of ``spot_id``: 400 for an ID that is not one, 404 (``if_missing``
        says what that means) when the store has none."""
        try:
            validate_spot_id(spot_id)
        except InvalidOperation as error:
            raise _Refused(400, f"not a Spot ID: {error.message}") from None
        with trio.fail_after(self.timeout):
            record = await self.store.location.find(spot_id)
        if record is None:
            raise _Refused(404, f"{spot_id!r} is Missing: {if_missing}")
        return record

    async def spot(self, request: Request) -> Response:
        spot_id = str(request.path_params["spot_id"])
        record = await self._record(spot_id, "the store has no authority record for it "
                                             "(check the ID)")
        now = self.clock()
        with trio.fail_after(self.timeout):
            lease = await owner_lease(self.store, record, now)
            names = await node_names(self.store, now)
        shown = record.to_json()
        shown["ownerLease"] = {"live": lease is not None, "expiresAt": lease}
        target = record.relocation_target
        shown["ownerNode"] = names.get(record.owner.node_rid)
        shown["relocationTargetNode"] = None if target is None else names.get(target.node_rid)
        shown["owner"] = {**record.owner.to_json(),
                          "shown": owner_cell(record.owner, names)}
        return JSONResponse(shown)

    async def relocate_spot(self, request: Request) -> Response:
        if self.relocate is None:
            raise _Refused(404, "this dashboard does not relocate (it was built without a "
                                "Relocate action)")
        _same_site(request)
        spot_id = str(request.path_params["spot_id"])
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            raise _Refused(400, 'the body is not JSON: send {"to": NODE_ID or null}') from None
        to = body.get("to") if isinstance(body, dict) else None
        if not isinstance(body, dict) or not (to is None or isinstance(to, str)):
            raise _Refused(400, 'the body is {"to": NODE_ID or null}')
        record = await self._record(spot_id, "there is nothing to relocate")
        try:
            shown = await self.relocate(spot_id, record.mesh, to or None)
        except UsageError as error:
            raise _Refused(400, str(error)) from None
        return JSONResponse(shown, status_code=200 if shown.get("outcome") == "committed"
                            else 409)

    # -- the charts ---------------------------------------------------------------------

    async def charts(self, request: Request) -> Response:
        return JSONResponse({"charts": chart_rows()})

    async def chart_svg(self, request: Request) -> Response:
        chart = _chart(request)
        return Response(svg(chart), media_type="image/svg+xml")

    async def chart_trace(self, request: Request) -> Response:
        chart = _chart(request)
        if request.method == "POST":
            body = await request.body()
            if len(body) > MAX_TRACE_BYTES:
                raise _Refused(413, f"the trace is {len(body)} bytes; at most "
                                    f"{MAX_TRACE_BYTES} are read")
            try:
                records = read_trace(body.decode("utf-8").splitlines())
            except UnicodeDecodeError:
                raise _Refused(400, "the trace is not UTF-8 text") from None
            except TraceFormatError as error:
                raise _Refused(400, f"not a trace file: {error}") from None
            source = "the file"
        else:
            records, source = self.trace, "--trace"
        try:
            mine = check_trace(compile(chart), records)
        except TraceFormatError as error:
            raise _Refused(400, f"{source} does not fit {chart.__name__}: {error}") from None
        if request.method == "POST" and not mine:
            charts = sorted({record.chart for record in records})
            raise _Refused(400, f"the file has no records of {chart.__name__} "
                                f"({'it has: ' + ', '.join(charts) if charts else 'it is empty'})"
                                "; pick the chart the trace followed")
        return JSONResponse({"chart": chart.__name__,
                             "records": [record.to_json() for record in mine]})


def _same_site(request: Request) -> None:
    """Refuse a request that could come from another site the operator's browser visits:
    the one action that changes something must be JSON (a cross-site form or a simple
    ``fetch`` cannot send that without a CORS preflight, which this app never grants),
    from this page's own origin when the browser names one, and addressed to an IP
    address or ``localhost`` (a DNS name could be rebound to this address)."""
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media != "application/json":
        raise _Refused(415, "send the request as application/json: "
                            '{"to": NODE_ID or null}')
    host = request.headers.get("host", "")
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != host:
        raise _Refused(403, f"refused a request from another site ({origin}); use the "
                            "dashboard's own page")
    name = urlsplit(f"//{host}").hostname or ""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        if name != "localhost":
            raise _Refused(403, f"the Relocate action answers only at an IP address or "
                                f"localhost, not {name!r}; open the URL the command "
                                "printed") from None


def _chart(request: Request) -> type[StrictChart]:
    try:
        return chart_named(str(request.path_params["name"]))
    except UsageError as error:
        raise _Refused(404, str(error)) from None


def _end(owner: OwnerFence, names: Mapping[NodeRid, str]) -> dict[str, object]:
    return {"nodeId": names.get(owner.node_rid), "nodeRid": str(owner.node_rid),
            "lifecycleGeneration": owner.lifecycle_generation}


def _move_json(record: AuthorityRecord, names: Mapping[NodeRid, str]) -> dict[str, object]:
    target = record.relocation_target
    shown = record.to_json()
    return {key: shown[key] for key in ("spotId", "kind", "stableType", "mesh", "state",
                                        "objectGeneration")} | {
        "source": _end(record.owner, names),
        "target": None if target is None else _end(target, names)}


def _guarded(view: Callable[[Request], Awaitable[Response]], timeout: float,
             ) -> Callable[[Request], Awaitable[Response]]:
    """``view`` answering every failure with an error object (module docstring)."""

    async def guarded(request: Request) -> Response:
        try:
            return await view(request)
        except _Refused as refused:
            return _error(refused.status, refused.message)
        except trio.TooSlowError:
            return _error(504, f"the store did not answer within {timeout:g} s (--timeout); "
                               "is it overloaded or unreachable?")
        except (Unavailable, DeadlineExceeded) as error:
            return _error(503, f"store unavailable: {error.message}")
        except ZLinkError as error:
            return _error(502, f"the store refused: {error.message}")
        except Exception as error:  # the server keeps serving; the page shows the error
            _log.exception("dashboard request %s failed", request.url.path)
            return _error(500, f"unexpected {type(error).__name__}: {error}")

    return guarded


def build_app(store: Store, *, store_url: str, mesh: str | None = None, timeout: float = 30.0,
              max_records: int = 100_000, refresh: float = 1.0,
              trace: Sequence[TraceRecord] = (),
              clock: Callable[[], float] = wall_time,
              relocate: Relocate | None = None) -> Starlette:
    """The dashboard over the open ``store`` (reached at ``store_url``, which the page shows
    with any password hidden and the release commands name).

    ``mesh``: only that Mesh's nodes and moves (``None``: every Mesh); ``timeout`` bounds
    each store read; ``max_records`` bounds the walk that counts Spots and finds moves;
    ``refresh`` is how often the page polls (seconds); ``trace`` is the ``--trace`` file's
    records; ``clock`` gives the time leases are judged at (wall-clock time, as nodes on
    shared stores stamp them); ``relocate``, when given, is what the page's Relocate
    button calls (``POST /api/relocate/{id}`` with ``{"to": NODE_ID or null}``: 200 and
    the result when committed, 409 and the result when refused or aborted).
    """
    board = _Dashboard(store, store_url=store_url, mesh=mesh, timeout=timeout,
                       max_records=max_records, refresh=refresh, trace=trace, clock=clock,
                       relocate=relocate)

    def route(path: str, view: Callable[[Request], Awaitable[Response]],
              methods: Sequence[str] = ("GET",)) -> Route:
        return Route(path, _guarded(view, timeout), methods=list(methods))

    routes = [route(path, board.page_file) for path in _PAGE_FILES]
    routes += [
        route("/api/config", board.config),
        route("/api/overview", board.overview),
        route("/api/nodes", board.nodes),
        route("/api/moves", board.moves),
        route("/api/spot/{spot_id:path}", board.spot),
        route("/api/relocate/{spot_id:path}", board.relocate_spot, ("POST",)),
        route("/api/charts", board.charts),
        route("/api/charts/{name}.svg", board.chart_svg),
        route("/api/charts/{name}/trace", board.chart_trace, ("GET", "POST")),
    ]
    return Starlette(routes=routes, exception_handlers={404: _no_route, 405: _no_route})


async def _no_route(request: Request, exc: Exception) -> Response:
    """A path or method the dashboard does not serve: an error object, as every answer."""
    status = getattr(exc, "status_code", 404)
    return _error(status, f"{request.method} {request.url.path}: no such page or API here "
                          "(the API is GET /api/overview, /api/nodes, /api/moves, "
                          "/api/spot/ID, /api/charts, /api/charts/NAME.svg, "
                          "/api/charts/NAME/trace)")


async def serve_app(app: Starlette, listen: str, *,
                    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``app`` on ``listen`` (``HOST:PORT``, port 0: any free one) with Hypercorn's
    Trio worker until cancelled; ``task_status`` is started with the base URL
    (``http://HOST:PORT``) once it listens. An address that cannot be bound raises
    :class:`~zlink_trio.cli.store_command.UsageError` saying so."""
    config = Config()
    config.bind = [listen]
    config.accesslog = None
    config.errorlog = None  # the command prints where it serves; errors are answered as JSON
    # Starlette's and Hypercorn's ASGI type declarations differ; both follow ASGI 3.
    framework: ASGIFramework = app  # type: ignore[assignment]
    try:
        async with trio.open_nursery() as nursery:
            binds: list[str] = await nursery.start(serve, framework, config)
            task_status.started(binds[0])
    except OSError as error:
        raise UsageError(f"cannot listen on --listen {listen!r}: "
                         f"{error.strerror or error}; pick another HOST:PORT") from None


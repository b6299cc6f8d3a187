"""A node's HTTP edge: where users connect, join a room, post and read their inbox.

Routes (JSON in, JSON out; a typed zlink_trio error is ``409`` for what the caller did,
``503`` for what may pass -- its message says which):

- ``POST /users`` ``{"name": ..., "room": ..., "hall": false}`` -- the user becomes an
  Actor on this node's Entry Spot, then joins the room (created on first use: a
  ``ChatHall`` when ``hall`` is true, else a ``ChatRoom``); a room on another node
  means the user moves there.
- ``POST /rooms/{room}/posts`` ``{"user": ..., "text": ...}`` -- the room takes the post
  and hands it to each member; answers the post's ID and how many members it reached.
- ``GET /users/{user}/inbox`` -- the post IDs the user received, in order, and where the
  user is now (its room and node).
- ``POST /users/{user}/join`` ``{"room": ..., "hall": false}`` and
  ``POST /users/{user}/leave`` -- on the node that hosts the user (else ``409``
  NotFound: ask that node's edge).
- ``GET /node`` -- this node's NodeId and NodeRid; ``POST /drain`` (what moved, in the
  drain's order: a room's members it carried right after it; what did not, and why),
  ``POST /undrain``.

:func:`serve_edge` runs it with Hypercorn's Trio worker on loopback.
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import TYPE_CHECKING, cast

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

import zlink_trio as zl
from zlink_trio.samples.chatrooms.chat import (
    HALL_TYPE,
    ROOM_TYPE,
    USER_TYPE,
    Inbox,
    Post,
    Posted,
    ReadInbox,
)

if TYPE_CHECKING:
    from hypercorn.typing import ASGIFramework
    from starlette.requests import Request

__all__ = ("build_app", "serve_edge")


def _room_type(body: dict[str, object]) -> str:
    """The type a join's room is created as: a hall, or a room."""
    return HALL_TYPE if body.get("hall") is True else ROOM_TYPE


def _error(exc: zl.ZLinkError) -> JSONResponse:
    status = 503 if isinstance(exc, zl.Unavailable | zl.DeadlineExceeded) else 409
    return JSONResponse({"error": type(exc).__name__, "message": exc.message}, status)


def build_app(node: zl.Node) -> Starlette:
    """The edge of ``node`` as a Starlette app."""

    async def connect(request: Request) -> JSONResponse:
        body = await request.json()
        name, room = str(body["name"]), str(body["room"])
        try:
            user = await node.actors.create(USER_TYPE, f"user-{name}")
            created = await node.spots.get_or_create(room, _room_type(body))
            assert created.ref is not None
            user = await node.actors.join(user, created.ref)
        except zl.ZLinkError as exc:
            return _error(exc)
        return JSONResponse({"user": user.actor_id, "room": user.container,
                             "edge": node.node_id}, 201)

    async def post(request: Request) -> JSONResponse:
        body = await request.json()
        msg = Post(uuid.uuid4().hex, str(body["user"]), str(body["text"]))
        try:
            posted = await node.client.request(request.path_params["room"], msg,
                                               reply=Posted)
        except zl.ZLinkError as exc:
            return _error(exc)
        return JSONResponse({"post": posted.post_id, "members": posted.members,
                             "missed": posted.missed})

    async def join(request: Request) -> JSONResponse:
        body = await request.json()
        try:
            user = await node.actors.find(request.path_params["user"])
            if user is None:
                raise zl.NotFound(f"user {request.path_params['user']!r} is not connected")
            created = await node.spots.get_or_create(str(body["room"]), _room_type(body))
            assert created.ref is not None
            user = await node.actors.join(user, created.ref)
        except zl.ZLinkError as exc:
            return _error(exc)
        return JSONResponse({"user": user.actor_id, "room": user.container})

    async def leave(request: Request) -> JSONResponse:
        try:
            user = await node.actors.find(request.path_params["user"])
            if user is None:
                raise zl.NotFound(f"user {request.path_params['user']!r} is not connected")
            user = await node.actors.leave(user)
        except zl.ZLinkError as exc:
            return _error(exc)
        return JSONResponse({"user": user.actor_id, "room": user.container})

    async def about(request: Request) -> JSONResponse:
        return JSONResponse({"node": node.node_id, "rid": str(node.node_rid)})

    async def drain(request: Request) -> JSONResponse:
        try:
            result = await node.drain()
        except zl.ZLinkError as exc:
            return _error(exc)
        return JSONResponse({"moved": [r.ref.spot_id for r in result.moved], "not_moved": [
            [r.ref.spot_id, r.reason] for r in result.not_moved]})

    async def undrain(request: Request) -> JSONResponse:
        try:
            await node.undrain()
        except zl.ZLinkError as exc:
            return _error(exc)
        return JSONResponse({})

    async def inbox(request: Request) -> JSONResponse:
        try:
            got = await node.client.request_actor(request.path_params["user"], ReadInbox(),
                                                  reply=Inbox)
        except zl.ZLinkError as exc:
            return _error(exc)
        return JSONResponse({"posts": got.post_ids, "room": got.room, "rid": got.node_rid})

    return Starlette(routes=[
        Route("/users", connect, methods=["POST"]),
        Route("/rooms/{room}/posts", post, methods=["POST"]),
        Route("/users/{user}/inbox", inbox, methods=["GET"]),
        Route("/users/{user}/join", join, methods=["POST"]),
        Route("/users/{user}/leave", leave, methods=["POST"]),
        Route("/node", about, methods=["GET"]),
        Route("/drain", drain, methods=["POST"]),
        Route("/undrain", undrain, methods=["POST"]),
    ])


async def serve_edge(node: zl.Node, *,
                     task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``node``'s edge on a free loopback port until cancelled; started with its
    base URL."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.loglevel = "WARNING"  # (no "Running on ..." line: the runner says where)
    # Longer than a client keeps an idle connection: a client never reuses one the edge
    # is closing (Hypercorn's default is 5 s).
    config.keep_alive_timeout = 75
    config.keep_alive_max_requests = 1_000_000  # (the default, 1,000, closes busy clients')
    # Starlette's and Hypercorn's ASGI type declarations differ; both follow ASGI 3.
    app = cast("ASGIFramework", build_app(node))
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(partial(serve, app, config))
        task_status.started(binds[0])

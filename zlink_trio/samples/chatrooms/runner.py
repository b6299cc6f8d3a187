"""Three chat nodes, users on every edge, posts while a node drains, and the self-check.

The story, printed as it happens:

1. Three nodes (``chat-a``, ``chat-b``, ``chat-c``) open on one SQLite file with a shared
   secret; each serves its HTTP edge (``edge``).
2. Twelve users connect, four per edge, and join one of three rooms each (the room is
   created where placement puts it; a user whose room lives elsewhere moves there). The
   lobby is a hall (PerActor), the others are rooms (SpotWide).
3. Posts go to every room in rounds, each room's posts one after another, through the
   edges in turn. After the first rounds the node that hosts the most rooms is drained
   while the posts go on: its rooms move with their members in one commit, a hall
   first and its members after it.
4. The self-check: each user's inbox holds exactly the posts its room acknowledged, in
   that order, none lost and none twice -- and the drained node hosts no room any more.
   Only then does the runner print ``chatrooms=completed`` (and exit 0; else 1).
"""

from __future__ import annotations

import secrets
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import trio

import zlink_trio as zl
from zlink_trio.samples.chatrooms.chat import ChatHall, ChatRoom, ChatUser
from zlink_trio.samples.chatrooms.edge import serve_edge

__all__ = ("main", "run")

NODES = ("chat-a", "chat-b", "chat-c")
ROOMS = ("lobby", "trio", "actors")
#: The rooms created as halls (PerActor); the others are SpotWide rooms.
HALLS = ("lobby",)
USERS = 12
ROUNDS = 12
#: The round after which the busiest node is drained (the posts go on meanwhile).
DRAIN_AFTER = 4
#: Bounds the whole run (real seconds): a healthy one takes a few.
LIMIT = 120.0


async def _post_rounds(http: httpx.AsyncClient, edges: list[str], room: str,
                       members: list[str], acked: list[str], rounds: range) -> None:
    """Post to ``room`` once per round, one post after another, through the edges in turn."""
    for i in rounds:
        edge = edges[(i + len(room)) % len(edges)]
        response = await http.post(f"{edge}/rooms/{room}/posts",
                                   json={"user": members[i % len(members)],
                                         "text": f"round {i}"})
        response.raise_for_status()
        body = response.json()
        if body["missed"]:
            raise RuntimeError(f"post {body['post']} to {room} missed {body['missed']}")
        acked.append(body["post"])


def _difference(got: list[str], want: list[str]) -> str:
    """How an inbox differs from its room's posts: lost, twice, or out of order."""
    lost = [p for p in want if p not in got]
    twice = sorted({p for p in got if got.count(p) > 1})
    extra = [p for p in got if p not in want]
    order = "" if [p for p in got if p in want] == want else ", out of order"
    return (f"{len(lost)} lost (at {[want.index(p) for p in lost]}), {len(twice)} twice, "
            f"{len(extra)} foreign{order}")


async def _inboxes_match(http: httpx.AsyncClient, edges: list[str],
                         joined: dict[str, str], acked: dict[str, list[str]]) -> list[str]:
    """Poll until every inbox equals its room's posts (bounded); what still differs."""
    wrong: list[str] = []
    with trio.move_on_after(10):
        while True:
            wrong = []
            for n, (user, room) in enumerate(sorted(joined.items())):
                response = await http.get(f"{edges[n % len(edges)]}/users/{user}/inbox")
                response.raise_for_status()
                got = response.json()["posts"]
                if got != acked[room]:
                    wrong.append(f"{user} ({_difference(got, acked[room])})")
            if not wrong:
                return []
            await trio.sleep(0.05)  # (a post acknowledged late: look again)
    return wrong


async def _owner(node: zl.Node, room: str) -> zl.NodeRid:
    """The node that owns ``room`` now (by its SpotRef)."""
    ref = await node.spots.find(room)
    if ref is None:
        raise zl.NotFound(f"room {room!r} is gone; every room of the story lives to its end")
    return ref.node_rid


async def run(directory: Path, log: Any = print, store: str | None = None) -> bool:
    """The story of the module docstring; ``True`` when the self-check passed.

    ``store`` is the store URL the nodes share (default: a SQLite file in ``directory``).
    """
    store = f"sqlite://{directory / 'chat.db'}" if store is None else store
    secret = secrets.token_bytes(32)
    async with AsyncExitStack() as stack:
        nursery = await stack.enter_async_context(trio.open_nursery())
        nodes: list[zl.Node] = []
        edges: list[str] = []
        for name in NODES:
            node = await stack.enter_async_context(zl.open_node(
                name, store=store, spots=[ChatUser, ChatRoom, ChatHall], secret=secret,
                on_stop="close"))
            nodes.append(node)
            edges.append(await nursery.start(serve_edge, node))
        log(f"nodes: {', '.join(NODES)} serve edges {', '.join(edges)}")
        # No kept-alive connections: a request never races an edge closing an idle one.
        http = await stack.enter_async_context(httpx.AsyncClient(
            timeout=10, limits=httpx.Limits(max_keepalive_connections=0)))
        joined: dict[str, str] = {}
        for i in range(USERS):
            response = await http.post(f"{edges[i % len(edges)]}/users",
                                       json={"name": f"u{i}", "room": ROOMS[i % len(ROOMS)],
                                             "hall": ROOMS[i % len(ROOMS)] in HALLS})
            response.raise_for_status()
            body = response.json()
            joined[body["user"]] = body["room"]
        log(f"users: {USERS} connected on {len(edges)} edges and joined {len(ROOMS)} rooms")
        owners = {room: await _owner(nodes[0], room) for room in ROOMS}
        busiest = max(nodes, key=lambda n: sum(o == n.node_rid for o in owners.values()))
        members = {room: sorted(u for u, r in joined.items() if r == room) for room in ROOMS}
        acked: dict[str, list[str]] = {room: [] for room in ROOMS}
        async with trio.open_nursery() as posting:
            for room in ROOMS:
                posting.start_soon(_post_rounds, http, edges, room, members[room],
                                   acked[room], range(DRAIN_AFTER))
        drained: list[zl.DrainResult] = []

        async def drain() -> None:
            drained.append(await busiest.drain(timeout=30))

        async with trio.open_nursery() as posting:
            posting.start_soon(drain)
            for room in ROOMS:
                posting.start_soon(_post_rounds, http, edges, room, members[room],
                                   acked[room], range(DRAIN_AFTER, ROUNDS))
        result = drained[0]
        log(f"drain of {busiest.node_id} while posting: {len(result.moved)} moved "
            f"({', '.join(sorted(r.ref.spot_id for r in result.moved)) or 'none'}), "
            f"{len(result.not_moved)} not moved")
        wrong = await _inboxes_match(http, edges, joined, acked)
        still_there = [room for room in ROOMS
                       if await _owner(nodes[0], room) == busiest.node_rid]
        posts = sum(len(a) for a in acked.values())
        log(f"posts: {posts} acknowledged; inboxes complete and in order: "
            f"{USERS - len(wrong)} of {USERS}")
        nursery.cancel_scope.cancel()
    ok = not wrong and not still_there and not result.not_moved
    if still_there:
        log(f"rooms still on the drained node: {', '.join(still_there)}")
    if wrong:
        log(f"inboxes that differ: {', '.join(wrong)}")
    return ok


def main() -> None:
    """Run the sample in a fresh directory; print ``chatrooms=completed`` when it holds."""
    with tempfile.TemporaryDirectory() as tmp:
        ok = trio.run(_bounded, Path(tmp))
    print("chatrooms=completed" if ok else "chatrooms=failed")
    sys.exit(0 if ok else 1)


async def _bounded(directory: Path) -> bool:
    with trio.fail_after(LIMIT):
        return await run(directory)

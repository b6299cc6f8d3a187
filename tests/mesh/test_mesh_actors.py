"""Actors across processes: 3 chat nodes, 200 users joining and leaving 20 rooms under load.

Three ``python -m zlink_trio.samples.chatrooms node`` processes share one store (a
SQLite file, Redis, or Redis Cluster, whose members follow their room's SpotWide move
in their own buckets) and authenticate their links with one secret. The test drives
them only through their HTTP edges (``samples/chatrooms/edge``):

- 200 users connect, spread over the three edges, and join one of 20 rooms each (a user
  whose room lives on another node moves there);
- then, all at once: every room gets a stream of posts (one after another per room,
  through the edges in turn); users leave their room and join another; one node is
  drained -- its rooms move (half of them SpotWide: the room and its members in one
  commit; half PerActor halls: the hall, then each member after it) and the users on
  its Entry Spot move to the other nodes' -- and undrained again.

What must hold -- nothing lost, nothing twice: every post's room reports the members it
delivered to and none it missed; at the end each user holds exactly the posts delivered
to it, each once, and the posts of one room in that room's order. Each post is an
acknowledged ToActor request from the room (``samples/chatrooms/chat``), so "delivered"
means "in the member's inbox". The numbers are in ``docs/actors.md``.
"""

from __future__ import annotations

import json
import random
import secrets
import subprocess
import sys
from collections import defaultdict
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import httpx
import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

LIMIT = 240
USERS = 200
ROOMS = 20
POSTS = 8  # per room
MOVES = 60
NODES = ("chat-a", "chat-b", "chat-c")
#: How often an edge call that met a move (409 NotFound: the user is elsewhere now, or
#: 503: try again) is retried after locating the user anew.
RETRIES = 8


@attrs.define
class Node:
    name: str
    proc: trio.Process
    edge: str = ""
    rid: str = ""


async def _ready(node: Node, stdout: Any) -> None:
    """Read the node's ready line (``chatrooms-node NAME ready URL``)."""
    buffer = b""
    while b"\n" not in buffer:
        chunk = await stdout.receive_some(4096)
        if not chunk:
            raise AssertionError(f"{node.name} exited before it was ready")
        buffer += chunk
    line = buffer.split(b"\n", 1)[0].decode()
    assert line.startswith(f"chatrooms-node {node.name} ready "), line
    node.edge = line.rsplit(" ", 1)[1]


@asynccontextmanager
async def chat_nodes(url: str, tmp_path: Path) -> AsyncIterator[list[Node]]:
    """The three node processes, ready; always terminated and reaped at the end."""
    secret = tmp_path / "secret"
    secret.write_bytes(secrets.token_bytes(32))
    nodes: list[Node] = []
    async with AsyncExitStack() as stack:
        for name in NODES:
            err = stack.enter_context((tmp_path / f"{name}.err").open("wb"))
            proc = await trio.lowlevel.open_process(
                [sys.executable, "-m", "zlink_trio.samples.chatrooms", "node", name,
                 "--store", url, "--secret-file", str(secret)],
                stdout=subprocess.PIPE, stderr=err)
            nodes.append(Node(name, proc))
            stack.push_async_callback(_reap, proc)
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for node in nodes:
                    nursery.start_soon(_ready, node, node.proc.stdout)
        yield nodes


async def _reap(proc: trio.Process) -> None:
    proc.kill()  # the test is over: no graceful stop needed (and no drain between them)
    with trio.CancelScope(shield=True), trio.move_on_after(10):
        await proc.wait()
        assert proc.stdout is not None
        await proc.stdout.aclose()


@attrs.define
class World:
    http: httpx.AsyncClient
    nodes: list[Node]
    by_rid: dict[str, str] = attrs.Factory(dict)
    #: room -> [(post ID, members it was delivered to)], in the room's order.
    posts: dict[str, list[tuple[str, list[str]]]] = attrs.Factory(lambda: defaultdict(list))
    missed: list[str] = attrs.Factory(list)
    moves: int = 0
    #: Set once a quarter of the posts are in: the drain starts then, amid the traffic.
    busy: trio.Event = attrs.Factory(trio.Event)
    drained: list[str] = attrs.Factory(list)

    async def call(self, method: str, edge: str, path: str, **kw: Any) -> httpx.Response:
        return await self.http.request(method, f"{edge}{path}", **kw)

    async def locate(self, user: str) -> str:
        """The edge of the node that hosts ``user`` now."""
        response = await self.call("GET", self.nodes[0].edge, f"/users/{user}/inbox")
        assert response.status_code == 200, f"locating {user}: {response.text}"
        return self.by_rid[response.json()["rid"]]

    async def on_its_node(self, user: str, path: str, body: dict[str, Any] | None) -> None:
        """POST ``path`` to the edge of the node that hosts ``user``, again where it moved."""
        for _ in range(RETRIES):
            edge = await self.locate(user)
            response = await self.call("POST", edge, path, json=body or {})
            if response.status_code in (409, 503):
                await trio.sleep(0.05)  # it met a move: find it again
                continue
            response.raise_for_status()
            return
        raise AssertionError(f"{path} for {user} kept meeting moves: {response.text}")


def _room(k: int) -> dict[str, Any]:
    """Room ``k``'s join body: the odd ones are halls (PerActor), the even ones SpotWide."""
    return {"room": f"room-{k}", "hall": k % 2 == 1}


async def _connect(world: World, i: int, limiter: trio.CapacityLimiter) -> None:
    async with limiter:
        edge = world.nodes[i % len(world.nodes)].edge
        response = await world.call("POST", edge, "/users",
                                    json=_room(i % ROOMS) | {"name": f"u{i}"})
        assert response.status_code == 201, response.text


async def _post(world: World, room: str) -> None:
    for i in range(POSTS):
        edge = world.nodes[(i + hash(room)) % len(world.nodes)].edge
        for _ in range(RETRIES):
            response = await world.call("POST", edge, f"/rooms/{room}/posts",
                                        json={"user": "driver", "text": f"{room} #{i}"})
            if response.status_code != 503:
                break
            await trio.sleep(0.05)  # the room met a move: post again
        response.raise_for_status()
        body = response.json()
        world.posts[room].append((body["post"], body["members"]))
        world.missed.extend(body["missed"])
        if sum(len(p) for p in world.posts.values()) >= ROOMS * POSTS // 4:
            world.busy.set()


async def _move_users(world: World, rng: random.Random) -> None:
    for _ in range(MOVES):
        user = f"user-u{rng.randrange(USERS)}"
        await world.on_its_node(user, f"/users/{user}/leave", None)
        await world.on_its_node(user, f"/users/{user}/join", _room(rng.randrange(ROOMS)))
        world.moves += 1


async def _drain_and_undrain(world: World, node: Node) -> None:
    await world.busy.wait()
    response = await world.call("POST", node.edge, "/drain", timeout=60)
    response.raise_for_status()
    assert response.json()["not_moved"] == [], response.text
    world.drained = response.json()["moved"]
    response = await world.call("POST", node.edge, "/undrain")
    response.raise_for_status()


async def _inboxes(world: World) -> dict[str, list[str]]:
    got: dict[str, list[str]] = {}
    for i in range(USERS):
        response = await world.call("GET", world.nodes[i % 3].edge, f"/users/user-u{i}/inbox")
        response.raise_for_status()
        got[f"user-u{i}"] = response.json()["posts"]
    return got


def _check(world: World, got: dict[str, list[str]]) -> list[str]:
    """Every difference between what was delivered and what each user holds."""
    wanted: dict[str, list[str]] = defaultdict(list)
    order = {post: (room, n) for room, posts in world.posts.items()
             for n, (post, _members) in enumerate(posts)}
    for posts in world.posts.values():
        for post, members in posts:
            for user in members:
                wanted[user].append(post)
    problems = []
    for user, inbox in got.items():
        if sorted(inbox) != sorted(wanted[user]):
            lost = set(wanted[user]) - set(inbox)
            twice = {p for p in inbox if inbox.count(p) > 1}
            problems.append(f"{user}: {len(lost)} lost, {len(twice)} twice")
            continue
        for room in {order[p][0] for p in inbox}:
            seq = [order[p][1] for p in inbox if order[p][0] == room]
            if seq != sorted(seq):
                problems.append(f"{user}: the posts of {room} out of order")
    return problems


def _drained(moved: list[str]) -> dict[str, int]:
    """What the drain moved: SpotWide rooms, PerActor halls, and users (the members a
    room carried, those that followed a hall, and those moved off an Entry Spot)."""
    halls = [s for s in moved if s.startswith("room-") and _room(int(s[5:]))["hall"]]
    rooms = [s for s in moved if s.startswith("room-") and s not in halls]
    return {"drained": len(moved), "rooms": len(rooms), "halls": len(halls),
            "users": len(moved) - len(rooms) - len(halls)}


async def test_users_join_and_leave_rooms_across_processes_while_a_node_drains(
        chat_url, tmp_path):
    with trio.fail_after(LIMIT):
        # No kept-alive connections: a request never races the edge closing an idle one.
        async with chat_nodes(chat_url, tmp_path) as nodes, httpx.AsyncClient(
                timeout=30, limits=httpx.Limits(max_keepalive_connections=0)) as http:
            world = World(http, nodes)
            for node in nodes:
                about = (await world.call("GET", node.edge, "/node")).json()
                node.rid = about["rid"]
                world.by_rid[about["rid"]] = node.edge
            limiter = trio.CapacityLimiter(16)
            async with trio.open_nursery() as nursery:
                for i in range(USERS):
                    nursery.start_soon(_connect, world, i, limiter)
            rng = random.Random(7)
            async with trio.open_nursery() as nursery:
                for room in range(ROOMS):
                    nursery.start_soon(_post, world, f"room-{room}")
                for _ in range(4):
                    nursery.start_soon(_move_users, world, random.Random(rng.random()))
                nursery.start_soon(_drain_and_undrain, world, nodes[2])
            assert world.missed == []
            # A post's reply comes after each member acknowledged it: no waiting here.
            assert _check(world, await _inboxes(world)) == []
            delivered = sum(len(m) for posts in world.posts.values() for _, m in posts)
            assert world.drained  # the drain moved rooms and users amid the traffic
            print(json.dumps({"posts": ROOMS * POSTS, "deliveries": delivered,
                              "moves": world.moves, **_drained(world.drained)}))

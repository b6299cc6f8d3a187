"""One mesh node process for the multi-process tests, driven by JSON lines on stdin/stdout.

``python mesh_node_worker.py --node NODE_ID --store URL --log FILE [--lease S]
[--secret S] [--weight W] [--timeout S]`` opens a node on ``127.0.0.1:0`` serving
``MeshCounter`` (Instance Spot ``meshcounter``) and ``MeshRoom`` (User Spot
``meshroom``), prints one ready line ``{"ready": true, "node_rid": ..., "endpoint":
..., "pid": ...}`` and then answers one JSON line per command line, in order:

* ``{"op": "request", "spot": ID, "n": N, "intent": bool, "timeout": S}`` -- a
  ``request(Add(n))`` (with ``.instance_spot()`` when ``intent``);
* ``{"op": "burst", "ids": [...], "count": K, "timeout": S}`` -- K concurrent requests
  ``Add(1)`` with Instance intent, request ``i`` to ``ids[i % len(ids)]``;
* ``{"op": "find", "spot": ID}``; ``{"op": "get_or_create", "spot": ID}``;
  ``{"op": "close", "spot": ID}`` (finds the ref, then closes it);
* ``{"op": "quit"}`` (or end of stdin) -- close the node and exit 0.

A call answers ``{"ok": true, "value": total, "node": owner NodeId}`` or
``{"ok": false, "error": class name, "message": ...}``. Every factory run appends
``factory SPOT_ID GENERATION NODE_ID PID`` to ``--log`` with one ``O_APPEND`` write,
so the log survives SIGKILL and proves how often each incarnation was built.
``ZLINK_CRASH_AT`` (see ``zlink_trio/runtime/coordinators/crash_points.py``) may kill the
process at a cold-activation step. ``--timeout`` bounds the whole process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import attrs
import trio

import zlink_trio as zl

NODE = ""
LOG = ""


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Total:
    value: int
    node: str


@attrs.frozen
class RoomSpec:
    topic: str


def side_effect(*words: object) -> None:
    line = (" ".join(str(w) for w in words) + "\n").encode()
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one write: lines of concurrent processes never interleave
    finally:
        os.close(fd)


@zl.instance_spot("meshcounter", relocation=zl.DisableRelocation())
class MeshCounter:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.total = 0
        side_effect("factory", ctx.spot_id, ctx.generation, NODE, os.getpid())

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total, NODE)


@zl.user_spot("meshroom", relocation=zl.DisableRelocation())
class MeshRoom:
    def __init__(self, ctx: zl.SpotContext, request: RoomSpec | None) -> None:
        self.total = 0
        side_effect("factory", ctx.spot_id, ctx.generation, NODE, os.getpid())

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total, NODE)


def failure(error: zl.ZLinkError) -> dict[str, Any]:
    return {"ok": False, "error": type(error).__name__, "message": error.message}


async def request(node: zl.Node, spot: str, n: int, intent: bool, seconds: float
                  ) -> dict[str, Any]:
    call = node.client.request(spot, Add(n), reply=Total)
    if intent:
        call = call.instance_spot("meshcounter")
    try:
        total = await call.timeout(seconds)
    except zl.ZLinkError as error:
        return failure(error)
    return {"ok": True, "value": total.value, "node": total.node}


def ref_json(ref: zl.SpotRef | None) -> dict[str, Any] | None:
    return None if ref is None else {"generation": ref.generation, "node_rid": str(ref.node_rid)}


async def handle(node: zl.Node, cmd: dict[str, Any]) -> dict[str, Any]:
    op = cmd["op"]
    timeout = float(cmd.get("timeout", 10.0))
    if op == "request":
        return await request(node, cmd["spot"], int(cmd.get("n", 1)),
                             bool(cmd.get("intent", False)), timeout)
    if op == "burst":
        ids, count = list(cmd["ids"]), int(cmd["count"])
        results: list[dict[str, Any]] = [{}] * count

        async def one(i: int) -> None:
            results[i] = await request(node, ids[i % len(ids)], 1, True, timeout)
            results[i]["spot"] = ids[i % len(ids)]

        async with trio.open_nursery() as nursery:
            for i in range(count):
                nursery.start_soon(one, i)
        return {"ok": True, "results": results}
    if op == "find":
        return {"ok": True, "ref": ref_json(await node.spots.find(cmd["spot"]))}
    if op == "get_or_create":
        try:
            result = await node.spots.get_or_create(cmd["spot"], "meshroom").request(
                RoomSpec(str(cmd.get("topic", "")))).timeout(timeout)
        except zl.ZLinkError as error:
            return failure(error)
        return {"ok": True, "state": result.state.value, "ref": ref_json(result.ref)}
    if op == "close":
        try:
            ref = await node.spots.find(cmd["spot"])
            closed = ref is not None and await node.spots.close(ref)
        except zl.ZLinkError as error:
            return failure(error)
        return {"ok": True, "closed": closed}
    raise SystemExit(f"mesh_node_worker: unknown op {op!r}; expected request, burst, find, "
                     "get_or_create, close or quit")


async def lines(stream: trio.lowlevel.FdStream) -> Any:
    buffer = b""
    while True:
        while b"\n" not in buffer:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            buffer += chunk
        line, _, buffer = buffer.partition(b"\n")
        yield line


async def main(args: argparse.Namespace) -> None:
    global NODE, LOG
    NODE, LOG = args.node, args.log
    options: dict[str, Any] = {"lease": args.lease, "placement_weight": args.weight}
    if args.secret:
        options["secret"] = args.secret.encode()  # >= 32 bytes, shared by the mesh
    with trio.fail_after(args.timeout):
        async with zl.open_node(args.node, store=args.store, mesh="world",
                                spots=[MeshCounter, MeshRoom], **options) as node:
            print(json.dumps({"ready": True, "node_rid": str(node.node_rid), "pid": os.getpid(),
                              "endpoint": node._rt.options.endpoint}), flush=True)
            async with trio.lowlevel.FdStream(os.dup(sys.stdin.fileno())) as stdin:
                async for line in lines(stdin):
                    cmd = json.loads(line)
                    if cmd["op"] == "quit":
                        break
                    print(json.dumps(await handle(node, cmd)), flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--node", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--lease", type=float, default=10.0)
    parser.add_argument("--secret", default="")
    parser.add_argument("--weight", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=120.0)
    return parser.parse_args(argv)


if __name__ == "__main__":
    trio.run(main, parse_args())

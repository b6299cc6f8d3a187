"""A process that opens nodes on fresh stores when told to, for the open-race test.

``python fresh_open_worker.py --node NODE_ID`` prints ``{"loaded": true}`` once its
imports are done, then answers one JSON line per command line:

* ``{"op": "open", "store": URL}`` -- open node ``NODE_ID`` on ``URL`` (Mesh ``world``,
  no Spot types) and close it again: ``{"ok": true}``, or ``{"ok": false, "error":
  class name, "message": ...}`` when the open (or close) failed;
* ``{"op": "quit"}`` (or end of stdin) -- exit 0.

The test sends ``open`` to every process at once, so each round is several nodes'
first opens of one fresh store. ``--timeout`` bounds the whole process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import trio

import zlink_trio as zl


async def open_once(node_id: str, url: str) -> dict[str, Any]:
    try:
        with trio.fail_after(20):
            async with zl.open_node(node_id, store=url, mesh="world", spots=[]):
                pass
    except zl.ZLinkError as error:
        return {"ok": False, "error": type(error).__name__, "message": error.message}
    except Exception as exc:  # a runtime bug (or a timeout): report it instead of dying
        return {"ok": False, "error": type(exc).__name__, "message": repr(exc)}
    return {"ok": True}


async def main(args: argparse.Namespace) -> None:
    with trio.fail_after(args.timeout):
        print(json.dumps({"loaded": True, "pid": os.getpid()}), flush=True)
        async with trio.lowlevel.FdStream(os.dup(sys.stdin.fileno())) as stdin:
            buffer = b""
            while True:
                while b"\n" not in buffer:
                    chunk = await stdin.receive_some(65536)
                    if not chunk:
                        return
                    buffer += chunk
                line, _, buffer = buffer.partition(b"\n")
                cmd = json.loads(line)
                if cmd["op"] == "quit":
                    return
                if cmd["op"] != "open":
                    raise SystemExit(f"fresh_open_worker: unknown op {cmd['op']!r}; "
                                     "expected open or quit")
                print(json.dumps(await open_once(args.node, cmd["store"])), flush=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--node", required=True)
    parser.add_argument("--timeout", type=float, default=120.0)
    return parser.parse_args()


if __name__ == "__main__":
    trio.run(main, parse_args())

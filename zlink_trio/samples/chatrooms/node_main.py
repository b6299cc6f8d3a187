"""One chat node as its own process: ``python -m zlink_trio.samples.chatrooms node NAME``.

Options: ``--store URL`` (shared by every node; SQLite or Redis), ``--secret-file F``
(the cluster's secret, 32+ bytes, the same file for every node). The node serves its
HTTP edge (``edge``) on a free loopback port and prints one line,
``chatrooms-node NAME ready <edge URL>``, once it does. SIGTERM or SIGINT stop it
gracefully: its Actors and rooms move to the other nodes first (a stop is a drain).
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

import trio

import zlink_trio as zl
from zlink_trio.samples.chatrooms.chat import ChatHall, ChatRoom, ChatUser
from zlink_trio.samples.chatrooms.edge import serve_edge

__all__ = ("main", "run_node")


async def run_node(name: str, store: str, secret: bytes) -> None:
    """Run node ``name`` with its edge until a stop signal."""
    async with zl.open_node(name, store=store, spots=[ChatUser, ChatRoom, ChatHall], secret=secret,
                            stop_on=(signal.SIGTERM, signal.SIGINT)) as node, \
            trio.open_nursery() as nursery:
        url = await nursery.start(serve_edge, node)
        print(f"chatrooms-node {name} ready {url}", flush=True)
        await trio.sleep_forever()


def main(argv: list[str]) -> None:
    """Parse ``argv`` (after ``node``) and run the node."""
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.samples.chatrooms node")
    parser.add_argument("name")
    parser.add_argument("--store", required=True)
    parser.add_argument("--secret-file", required=True, type=Path)
    args = parser.parse_args(argv)
    trio.run(run_node, args.name, args.store, args.secret_file.read_bytes())

"""The evidence lines an API node prints, verbatim, and where they go.

The smoke runner matches these strings in each process's log, character for
character; they are part of the sample's contract, the same in every language
(``docs/shoppingmall.md``, "Evidence rows"), so they are built here and nowhere
else:

- ``shoppingmall-ready kind=http node=<NodeId>`` -- once, when the HTTP edge listens
- ``shoppingmall-ready kind=object-route node=<NodeId> target=<WorkflowNodeId>`` -- once per
  Workflow node the API node sees serving the order workflow in the Mesh
- ``shoppingmall-evidence order=<OrderId> events=<N>`` -- a lookup returned a terminal state
  folded from N events

A line goes to a :data:`LogLine` callable; :func:`print_line`, the default,
writes it to standard output and flushes, so a runner that tails the process
log sees it at once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = ("LogLine", "evidence_line", "http_ready_line", "object_route_ready_line",
           "print_line")

#: Where an API node writes its evidence lines.
LogLine = Callable[[str], None]


def print_line(line: str) -> None:
    """Write ``line`` to standard output and flush it."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def http_ready_line(node_id: str) -> str:
    """The evidence line: the HTTP edge of API node ``node_id`` is open."""
    return f"shoppingmall-ready kind=http node={node_id}"


def object_route_ready_line(node_id: str, target: str) -> str:
    """The evidence line: API node ``node_id`` sees Workflow node ``target`` serve orders."""
    return f"shoppingmall-ready kind=object-route node={node_id} target={target}"


def evidence_line(order_id: str, events: int) -> str:
    """CommerceApi's evidence that it looked up order ``order_id`` at ``events`` events."""
    return f"shoppingmall-evidence order={order_id} events={events}"

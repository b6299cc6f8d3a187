"""The logger hierarchy: one logger per concern under the package logger ``zlink_trio``.

Configure the whole runtime through ``logging.getLogger("zlink_trio")``, or one
concern through its child.  Nothing here adds a handler: with no logging configured,
Python's last-resort handler prints WARNING and above to stderr and nothing else, which
is the intended default (a lost lease or a failed cleanup must be seen; INFO/DEBUG
records are not formatted at all).  ``docs/observability.md`` lists what each logger
writes.
"""

from __future__ import annotations

import logging
from typing import Final

__all__ = (
    "ACTIVATION",
    "CALLS",
    "CLOSE",
    "COLLECTOR",
    "CREATE",
    "FOLLOW",
    "LEASE",
    "MESH",
    "NODE",
    "PACKAGE",
    "RECOVERY",
    "RELOCATION",
    "SPOTS",
    "STORE",
    "TRANSPORT",
)

#: The package logger: every record of the runtime propagates to it.
PACKAGE: Final = logging.getLogger("zlink_trio")
#: Node lifecycle: startup, drain, descriptor removal, placement closing.
NODE: Final = logging.getLogger("zlink_trio.runtime.node")
#: Direct calls: resolve results, stale classification, request outcomes.
CALLS: Final = logging.getLogger("zlink_trio.runtime.calls")
#: Cold activation (target side) and its first-record cleanup.
ACTIVATION: Final = logging.getLogger("zlink_trio.runtime.activation")
#: User Spot create / get_or_create, local and remote (command 47).
CREATE: Final = logging.getLogger("zlink_trio.runtime.create")
#: ``spots.close``, local and remote (command 48).
CLOSE: Final = logging.getLogger("zlink_trio.runtime.close")
#: Planned relocation and drain, both sides.
RELOCATION: Final = logging.getLogger("zlink_trio.runtime.relocation")
#: Message Follow: hops and drops.
FOLLOW: Final = logging.getLogger("zlink_trio.runtime.follow")
#: This node's side of the links: peer admission, inbound frames, replies.
MESH: Final = logging.getLogger("zlink_trio.runtime.mesh")
#: The garbage collector's frozen generation (``runtime/collector.py``): freezes, and the
#: full collections outlived Spot instances call for.
COLLECTOR: Final = logging.getLogger("zlink_trio.runtime.collector")
#: Lease renewal and loss, NodeId claims.
LEASE: Final = logging.getLogger("zlink_trio.runtime.lease")
#: Startup recovery of what a dead lifecycle left.
RECOVERY: Final = logging.getLogger("zlink_trio.runtime.recovery")
#: Spot hosts: handlers, timers, on_close, idle eviction, shutdown.
SPOTS: Final = logging.getLogger("zlink_trio.runtime.spots")
#: The mesh transport (links, handshakes, refusals) -- ``zlink_trio.transport``'s own.
TRANSPORT: Final = logging.getLogger("zlink_trio.transport")
#: Store backends (SQLite checkpoints, ...) -- ``zlink_trio.store``'s own.
STORE: Final = logging.getLogger("zlink_trio.store")

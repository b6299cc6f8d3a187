"""A loopback TCP relay that can cut, delay or black-hole the link it carries.

The chaos harness puts one :class:`Relay` in front of every server node (the node
publishes the relay's port as its ``endpoint=``, so every link a peer dials to it runs
through the relay) and, for the store rows, one in front of Redis. The relay is a
plain byte pump between an accepted connection and a fresh connection to its
``upstream`` port, in both directions; it never looks at the bytes. Its modes:

* **pass** -- bytes flow (after :meth:`Relay.delay` seconds each way, order kept);
* **cut** (:meth:`Relay.cut`) -- every open connection is closed at once and new ones
  are closed as soon as they are accepted: the peers see a broken link / refused dial;
* **black-hole** (:meth:`Relay.blackhole`) -- connections stay open and new ones are
  accepted, but no byte moves in either direction: the relay stops reading, so the
  kernel buffers fill and the senders stall, as when packets are dropped and TCP
  retransmits. :meth:`Relay.heal` lets the stalled bytes through, like a network that
  came back before TCP gave up.

:meth:`Relay.heal` returns to pass with no delay. ``upstream`` may change at any time
(a restarted node binds a new port); connections already open keep theirs.
"""

from __future__ import annotations

import math
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs
import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ("Relay", "open_relay")

#: Bound on connecting to the upstream port.
CONNECT_TIMEOUT = 5.0
CHUNK = 65536


@attrs.define(eq=False)
class Relay:
    """One listening port relaying to ``upstream`` on 127.0.0.1; see the module doc."""

    upstream: int
    port: int = 0
    mode: str = "pass"
    delay_seconds: float = 0.0
    #: Set while bytes may move (not black-holed).
    flowing: trio.Event = attrs.Factory(trio.Event)
    connections: set[trio.CancelScope] = attrs.Factory(set)
    accepted: int = 0

    def __attrs_post_init__(self) -> None:
        self.flowing.set()

    def cut(self) -> None:
        """Close every open connection now and every new one when it is accepted."""
        self.mode = "cut"
        for scope in list(self.connections):
            scope.cancel()

    def blackhole(self) -> None:
        """Stop moving bytes; connections stay open and new ones are accepted."""
        self.mode = "blackhole"
        if self.flowing.is_set():
            self.flowing = trio.Event()

    def delay(self, seconds: float) -> None:
        """Deliver every later chunk ``seconds`` after it was read (both directions)."""
        assert math.isfinite(seconds), seconds
        assert seconds >= 0, seconds
        self.mode, self.delay_seconds = "delay", seconds

    def heal(self) -> None:
        """Back to pass: no delay, stalled bytes move again, new connections relayed."""
        self.mode, self.delay_seconds = "pass", 0.0
        self.flowing.set()

    async def _pump(self, source: trio.SocketStream, sink: trio.SocketStream) -> None:
        due: trio.MemorySendChannel[tuple[float, bytes]]
        due, pending = trio.open_memory_channel[tuple[float, bytes]](math.inf)

        async def writer() -> None:
            async for at, data in pending:
                await trio.sleep_until(at)
                await self.flowing.wait()
                await sink.send_all(data)
            await sink.send_eof()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer)
            async with due:
                while True:
                    await self.flowing.wait()
                    data = await source.receive_some(CHUNK)
                    if not data:
                        break
                    await due.send((trio.current_time() + self.delay_seconds, data))

    async def _relay(self, client: trio.SocketStream) -> None:
        scope = trio.CancelScope()
        self.connections.add(scope)
        try:
            with scope:
                if self.mode == "cut":
                    return
                with trio.fail_after(CONNECT_TIMEOUT):
                    server = await trio.open_tcp_stream("127.0.0.1", self.upstream)
                async with server:
                    try:
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(self._pump, client, server)
                            nursery.start_soon(self._pump, server, client)
                    except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        pass  # one side went away: the relay closes both
        except (OSError, trio.TooSlowError):
            pass  # upstream refused or silent: the peer sees its dial fail
        finally:
            self.connections.discard(scope)
            await client.aclose()

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        async with listeners[0], trio.open_nursery() as nursery:
            task_status.started()
            while True:
                client = await listeners[0].accept()
                self.accepted += 1
                nursery.start_soon(self._relay, client)


@asynccontextmanager
async def open_relay(upstream: int) -> AsyncIterator[Relay]:
    """A :class:`Relay` to ``upstream`` listening on a free loopback port (``.port``)."""
    relay = Relay(upstream)
    async with trio.open_nursery() as nursery:
        await nursery.start(relay.serve)
        try:
            yield relay
        finally:
            nursery.cancel_scope.cancel()

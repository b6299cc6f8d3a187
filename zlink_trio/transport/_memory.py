"""An in-process network for tests: links over memory streams instead of loopback TCP.

Theory of operation
-------------------
:data:`NETWORK` is a context variable, unset in production.  When a transport opens
(:func:`~zlink_trio.transport.open_transport`) in a context where it holds a
:class:`MemoryNetwork` -- ``zlink_trio.testing``'s clusters set it for the task of each
node they start -- the transport listens on that network instead of a socket and
publishes ``ws://zl-memory:<port>``; every dial of that transport (whatever task asks
for it) connects through the same network, over a ``trio.testing.memory_stream_pair``.
Everything above the stream is unchanged: the websocket upgrade, the handshake, the
peer check, keepalives.  Nothing waits on a socket, so a cluster of linked nodes runs on
``trio.testing.MockClock(autojump_threshold=0)``: mock time jumps only when every task
is blocked on something time will end.
"""

from __future__ import annotations

import contextvars
import errno
import itertools
import math
from typing import Final

import trio
import trio.testing

__all__ = ("HOST", "NETWORK", "MemoryListener", "MemoryNetwork")

#: The host name of every endpoint of a memory network.
HOST: Final = "zl-memory"


class MemoryListener(trio.abc.Listener[trio.abc.Stream]):
    """One transport's listening "port" on a :class:`MemoryNetwork`."""

    def __init__(self, network: MemoryNetwork, port: int) -> None:
        self.network: Final = network
        self.port: Final = port
        self._send, self._receive = trio.open_memory_channel[trio.abc.Stream](math.inf)

    @property
    def endpoint(self) -> str:
        return f"ws://{HOST}:{self.port}"

    async def accept(self) -> trio.abc.Stream:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise trio.ClosedResourceError("this memory listener is closed") from None

    async def aclose(self) -> None:
        self.network._listeners.pop(self.port, None)
        self._send.close()
        self._receive.close()
        await trio.lowlevel.checkpoint()

    def _deliver(self, stream: trio.abc.Stream) -> None:
        self._send.send_nowait(stream)


class MemoryNetwork:
    """Listeners by port; :meth:`connect` hands the server side of a fresh memory stream
    pair to the listener and returns the client side."""

    def __init__(self) -> None:
        self._listeners: dict[int, MemoryListener] = {}
        self._ports = itertools.count(1)

    def listen(self) -> MemoryListener:
        listener = MemoryListener(self, next(self._ports))
        self._listeners[listener.port] = listener
        return listener

    def owns(self, host: str) -> bool:
        return host == HOST

    async def connect(self, port: int) -> trio.abc.Stream:
        """A stream to the listener on ``port``; ``OSError(ECONNREFUSED)`` if none is."""
        await trio.lowlevel.checkpoint()
        listener = self._listeners.get(port)
        if listener is None:
            raise OSError(errno.ECONNREFUSED, f"nothing listens on {HOST}:{port}")
        client, server = trio.testing.memory_stream_pair()
        listener._deliver(server)
        return client


#: The memory network a transport opened in this context uses; unset in production.
NETWORK: Final = contextvars.ContextVar[MemoryNetwork | None]("zlink_trio_memory_network",
                                                              default=None)

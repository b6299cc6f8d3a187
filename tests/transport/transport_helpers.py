"""Shared pieces of the transport tests: identities, a recording handler, raw clients."""

from __future__ import annotations

import os
from contextlib import asynccontextmanager

import trio
from trio_websocket import ConnectionClosed, wrap_client_stream

from zlink_trio.core.identity import NodeRid
from zlink_trio.core.records import OwnerFence
from zlink_trio.transport import TransportConfig
from zlink_trio.wire.codec import EncodedMessage
from zlink_trio.wire.frames import (
    DEFAULT_MAX_FRAME_BYTES,
    Command,
    MessageOutcome,
    ReadyRoute,
    Reply,
    SpotMessage,
)
from zlink_trio.wire.handshake import ClientHandshake, LocalIdentity

SECRET = b"s" * 32
OTHER_SECRET = b"o" * 32
DEADLINE_MS = 1_900_000_000_000


def identity(name: str, *, mesh: str = "world", generation: int = 1,
             max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> LocalIdentity:
    return LocalIdentity(
        node_id=name,
        node_rid=NodeRid.generate(),
        lifecycle_generation=generation,
        mesh=mesh,
        max_frame_bytes=max_frame_bytes,
    )


def config(name: str = "a", *, secret: bytes = SECRET, ident: LocalIdentity | None = None,
           **kw) -> TransportConfig:
    return TransportConfig(identity=ident or identity(name), secret=secret, **kw)


def spot_message(n: int = 1, *, body: bytes = b'{"n":1}', correlation: int | None = None
                 ) -> SpotMessage:
    rid = NodeRid(b"\x07" * 16)
    return SpotMessage(
        route=ReadyRoute(
            spot_id=f"spot-{n}", object_generation=1, owner_generation=1,
            target=OwnerFence(rid, 1),
        ),
        operation_id=n,
        reply_correlation=n if correlation is None else correlation,
        deadline_ms=DEADLINE_MS,
        source=OwnerFence(NodeRid(b"\x08" * 16), 1),
        source_spot_id=None,
        metadata=None,
        payload=EncodedMessage("test:Add", body),
    )


def reply(correlation: int) -> Reply:
    return Reply(
        correlation=correlation,
        answers=Command.SPOT_MESSAGE,
        outcome=MessageOutcome(reply=EncodedMessage("test:Total", b'{"value":1}')),
    )


class Recorder:
    """A LinkHandler that records everything and admits peers while ``admit`` is true."""

    def __init__(self, *, admit: bool = True, echo: bool = False) -> None:
        self.admit = admit
        self.echo = echo
        self.checked = []
        self.frames = []
        self.closed = []
        self.fail_on = None
        self._frame_tx, self.frame_rx = trio.open_memory_channel(1000)
        self._closed_tx, self.closed_rx = trio.open_memory_channel(1000)

    async def check_peer(self, peer) -> bool:
        self.checked.append(peer)
        return self.admit

    def frame_received(self, link, frame) -> None:
        if self.fail_on is not None and frame == self.fail_on:
            raise RuntimeError("handler bug")
        if self.echo and isinstance(frame, SpotMessage):
            link.send_nowait(reply(frame.reply_correlation))
            return
        self.frames.append((link, frame))
        self._frame_tx.send_nowait((link, frame))

    def link_closed(self, link) -> None:
        self.closed.append(link)
        self._closed_tx.send_nowait(link)


def port_of(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


@asynccontextmanager
async def raw_websocket(url: str):
    """A plain trio-websocket client (no handshake) that always closes its socket.

    (``open_websocket_url`` leaves the client's TCP socket open when the server
    closed first, which ``filterwarnings = error`` turns into a failure.)
    """
    port = port_of(url)
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    try:
        async with trio.open_nursery() as nursery:
            ws = await wrap_client_stream(
                nursery, stream, f"127.0.0.1:{port}", "/", max_message_size=4 * 1024 * 1024
            )
            try:
                yield ws
            finally:
                with trio.move_on_after(1):
                    await ws.aclose()
                nursery.cancel_scope.cancel()
    finally:
        await trio.aclose_forcefully(stream)


@asynccontextmanager
async def authenticated_raw(url: str, *, secret: bytes = SECRET, ident: LocalIdentity | None = None,
                            expected_node_id: str | None = None):
    """A raw websocket that authenticated itself with ClientHandshake; yields (ws, peer)."""
    async with raw_websocket(url) as ws:
        machine = ClientHandshake(
            secret=secret, identity=ident or identity("raw"), random_bytes=os.urandom,
            expected_node_id=expected_node_id,
        )
        machine.start()
        for data in machine.receive(await ws.get_message()):
            await ws.send_message(data)
        machine.receive(await ws.get_message())
        yield ws, machine.result


async def read_until_closed(ws) -> list:
    """Read ``ws`` until the peer closes it; returns what arrived before (caller bounds time)."""
    seen = []
    try:
        while True:
            seen.append(await ws.get_message())
    except ConnectionClosed:
        return seen

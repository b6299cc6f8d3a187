"""The link's websocket frames (zlink_trio.transport._ws) against wsproto, byte for byte.

What a peer observes: frames this side builds are what wsproto (the reference the
other side may run) parses into the same messages, and frames wsproto builds --
fragmented, interleaved with Pings, split anywhere by TCP -- come out of
``WebSocket.receive`` as the same messages, with a Pong queued for each Ping.
Anything RFC 6455 forbids, or a message above the limit, is a RemoteProtocolError
(the link closes), never another exception and never a large buffer.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from wsproto.connection import Connection, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Message, Ping, Pong

from zlink_trio.core.errors import RemoteProtocolError
from zlink_trio.transport._ws import WebSocket, WebSocketClosed
from zlink_trio.transport._ws_upgrade import server_upgrade

LIMIT = 5
MAX = 1 << 20


def _ours(*, client: bool, max_message: int = MAX) -> WebSocket:
    return WebSocket(None, client=client, max_message=max_message)  # sans-IO use only


def _reference(*, client: bool) -> Connection:
    return Connection(ConnectionType.CLIENT if client else ConnectionType.SERVER)


def _parse_all(ws: WebSocket, chunks: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for chunk in chunks:
        out.extend(ws.receive(chunk))
    return out


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in [*points, len(data)]:
        pieces.append(data[last:p])
        last = p
    return [p for p in pieces if p]


SIZES = st.one_of(st.integers(0, 300), st.sampled_from([125, 126, 127, 65535, 65536, 70000]))
MESSAGES = st.lists(st.tuples(SIZES, st.integers(1, 3), st.booleans()), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(messages=MESSAGES, cuts=st.lists(st.integers(0, 1 << 20), max_size=8),
       from_client=st.booleans())
def test_frames_from_wsproto_arrive_as_the_same_messages(messages, cuts, from_client):
    sender = _reference(client=from_client)
    wire = b""
    expected, pings = [], 0
    for n, (size, fragments, ping) in enumerate(messages):
        body = bytes([n % 251]) * size
        step = max(1, size // fragments)
        parts = [body[i:i + step] for i in range(0, size, step)] or [b""]
        for i, part in enumerate(parts):
            wire += sender.send(Message(data=part, message_finished=i == len(parts) - 1))
            if ping and i == 0:  # a control frame between the fragments of a message
                wire += sender.send(Ping(payload=b"p%d" % n))
                pings += 1
        expected.append(body)
    receiver = _ours(client=not from_client)
    assert _parse_all(receiver, _split(wire, cuts)) == expected
    # Each Ping was answered with a Pong carrying its payload, as the sender sees it.
    sender.receive_data(b"".join(receiver.control))
    pongs = [e for e in sender.events() if isinstance(e, Pong)]
    assert len(pongs) == pings


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(SIZES, min_size=1, max_size=5), from_client=st.booleans())
def test_frames_we_build_are_what_wsproto_parses(sizes, from_client):
    ours = _ours(client=from_client)
    bodies = [bytes([n % 251]) * size for n, size in enumerate(sizes)]
    receiver = _reference(client=not from_client)
    receiver.receive_data(b"".join(ours.frame(body) for body in bodies))
    got, current = [], b""
    for event in receiver.events():
        assert isinstance(event, BytesMessage)
        current += event.data
        if event.message_finished:
            got.append(current)
            current = b""
    assert got == bodies


def test_a_close_from_the_peer_ends_the_websocket():
    peer = _reference(client=True)
    ours = _ours(client=False)
    wire = peer.send(Message(data=b"last")) + peer.send(CloseConnection(code=1001, reason="bye"))
    seen = []
    with pytest.raises(WebSocketClosed, match="code 1001, bye"):
        seen.extend(ours.receive(wire))
    assert seen == [b"last"]


def _raw_frame(b0: int, payload: bytes, *, mask: bool, length: bytes | None = None) -> bytes:
    key = b"\x01\x02\x03\x04"
    n = len(payload)
    if length is None:
        length = bytes([n]) if n < 126 else bytes([126]) + n.to_bytes(2, "big")
    head = bytes([b0, (0x80 if mask else 0) | length[0]]) + length[1:]
    if not mask:
        return head + payload
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


@pytest.mark.parametrize(("wire", "client", "match"), [
    (_raw_frame(0x82, b"x", mask=False), False, "unmasked"),
    (_raw_frame(0x82, b"x", mask=True), True, "masked websocket frame from the server"),
    (_raw_frame(0xC2, b"x", mask=True), False, "reserved bits"),
    (_raw_frame(0x83, b"x", mask=True), False, "reserved opcode"),
    (_raw_frame(0x81, b"x", mask=True), False, "text"),
    (_raw_frame(0x80, b"x", mask=True), False, "continuation"),
    (_raw_frame(0x02, b"x", mask=True) + _raw_frame(0x82, b"y", mask=True), False,
     "continuation frame out of place"),
    (_raw_frame(0x89, b"x" * 126, mask=True), False, "control frame"),
    (_raw_frame(0x09, b"x", mask=True), False, "control frame"),
    (_raw_frame(0x82, b"x" * 5, mask=True, length=bytes([126, 0, 5])), False, "shortest"),
    (_raw_frame(0x88, b"\x03", mask=True), False, "1-byte"),
    (_raw_frame(0x88, (999).to_bytes(2, "big"), mask=True), False, "invalid code"),
])
def test_what_rfc_6455_forbids_is_a_protocol_error(wire, client, match):
    ours = _ours(client=client)
    with pytest.raises(RemoteProtocolError, match=match):
        list(ours.receive(wire))


def test_a_message_above_the_limit_is_refused_from_its_header():
    ours = _ours(client=False, max_message=1000)
    # Only the 4-byte header of a 60 000-byte frame: refused before any payload arrives.
    header = bytes([0x82, 0x80 | 126]) + (60_000).to_bytes(2, "big")
    with pytest.raises(RemoteProtocolError, match="above the limit of 1000 bytes"):
        list(ours.receive(header))
    # A fragmented message is counted across its frames.
    peer = _reference(client=True)
    wire = peer.send(Message(data=b"a" * 600, message_finished=False))
    wire += peer.send(Message(data=b"b" * 600, message_finished=True))
    with pytest.raises(RemoteProtocolError, match="above the limit"):
        list(_ours(client=False, max_message=1000).receive(wire))


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200), from_client=st.booleans())
def test_hostile_bytes_are_messages_or_a_protocol_error(data, from_client):
    ours = _ours(client=not from_client, max_message=100)
    try:
        for message in ours.receive(data):
            assert len(message) <= 100
    except (RemoteProtocolError, WebSocketClosed):
        pass


async def test_close_handshake_over_a_stream_pair():
    left, right = trio.testing.memory_stream_pair()
    a = WebSocket(left, client=True, max_message=MAX)
    b = WebSocket(right, client=False, max_message=MAX)
    with trio.fail_after(LIMIT):
        await a.send_message(b"hello")
        assert await b.get_message() == b"hello"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.aclose)
            with pytest.raises(WebSocketClosed, match="code 1000"):
                await b.get_message()
            await b.aclose()  # answers the Close; a's wait ends
        with pytest.raises(WebSocketClosed):
            a.frame(b"late")


def _upgrade(key: bytes | None) -> bytes:
    line = b"" if key is None else b"Sec-WebSocket-Key: " + key + b"\r\n"
    return (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\n" + line + b"Sec-WebSocket-Version: 13\r\n\r\n")


async def _answer(request: bytes) -> tuple[bytes, BaseException | None]:
    client, server = trio.testing.memory_stream_pair()
    outcome: list[BaseException | None] = []

    async def serve() -> None:
        try:
            await server_upgrade(server, MAX)
            outcome.append(None)
        except (RemoteProtocolError, WebSocketClosed) as exc:
            outcome.append(exc)

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            await client.send_all(request)
            answer = await client.receive_some(4096)
    return answer, outcome[0]


@pytest.mark.parametrize("key", [b"notakey!", b"c2hvcnQ=", b"dGhlIHNhbXBsZSBub25jZQ==x"])
async def test_an_upgrade_with_an_invalid_key_is_answered_400(key: bytes):
    answer, error = await _answer(_upgrade(key))
    assert answer.startswith(b"HTTP/1.1 400")
    assert isinstance(error, RemoteProtocolError)
    assert "Sec-WebSocket-Key" in error.message


async def test_an_upgrade_with_a_valid_key_is_answered_101():
    answer, error = await _answer(_upgrade(b"dGhlIHNhbXBsZSBub25jZQ=="))
    assert answer.startswith(b"HTTP/1.1 101")
    assert error is None


@pytest.mark.parametrize("data", [b"SSH-2.0-OpenSSH_9.6\r\n", b"hello", b"\x16\x03\x01\x02\x00",
                                  b"POST / HTTP/1.1\r\n"])
async def test_bytes_that_are_not_an_http_get_are_refused_at_once(data: bytes):
    client, server = trio.testing.memory_stream_pair()
    await client.send_all(data)
    with trio.fail_after(LIMIT), pytest.raises(RemoteProtocolError):
        await server_upgrade(server, MAX)  # no wait for more bytes or a timeout


async def test_a_request_arriving_byte_by_byte_is_still_read():
    client, server = trio.testing.memory_stream_pair()

    async def trickle() -> None:
        for byte in _upgrade(b"dGhlIHNhbXBsZSBub25jZQ=="):
            await client.send_all(bytes([byte]))

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trickle)
            await server_upgrade(server, MAX)


def test_before_authentication_one_message_is_parsed_and_the_rest_waits():
    peer = _reference(client=True)
    ours = WebSocket(None, client=False, max_message=10, pre_auth=True)
    wire = peer.send(Message(data=b"hello")) + peer.send(Message(data=b"x" * 5000))
    assert list(ours.receive(wire)) == [b"hello"]  # the 5000-byte frame is not looked at
    assert ours.pending()
    ours.authenticated(MAX)  # the handshake decided: what waited is parsed under MAX
    assert list(ours.inbox) == [b"x" * 5000]


@pytest.mark.parametrize(("wire", "match", "pongs"), [
    (_raw_frame(0x02, b"he", mask=True) + _raw_frame(0x80, b"llo", mask=True), "fragmented", 0),
    (_raw_frame(0x89, b"", mask=True) * 2 + _raw_frame(0x8A, b"", mask=True), "Ping/Pong", 2),
    (_raw_frame(0x89, b"", mask=True) * 100, "Ping/Pong", 2),
])
def test_before_authentication_fragments_and_ping_floods_are_refused(wire, match, pongs):
    ours = WebSocket(None, client=False, max_message=MAX, pre_auth=True)
    with pytest.raises(RemoteProtocolError, match=match):
        list(ours.receive(wire))
    assert len(ours.control) == pongs  # Pings within the budget are answered, no more


def _receive_outcome(ws: WebSocket, data: bytes) -> object:
    try:
        return list(ws.receive(data))
    except (RemoteProtocolError, WebSocketClosed) as exc:
        return type(exc)


@settings(max_examples=300, deadline=None)
@given(payload=st.binary(max_size=300) | st.sampled_from([b"x" * 125, b"y" * 126, b"z" * 70000]),
       from_client=st.booleans(), mutate=st.integers(0, 2**16), cut=st.integers(-3, 3),
       limit=st.sampled_from([100, MAX]))
def test_the_single_frame_read_is_what_the_parser_gives(payload, from_client, mutate, cut,
                                                        limit):
    # A frame as the peer's side builds it, possibly cut, extended or with a byte changed:
    # single() gives the parser's one message, or None (the parser decides, nothing consumed).
    wire = bytearray(_reference(client=from_client).send(BytesMessage(data=payload)))
    if mutate % 3 == 0 and wire:
        wire[mutate % len(wire)] ^= 1 + mutate % 255
    wire = wire[:len(wire) + cut] if cut < 0 else wire + bytes(cut)
    data = bytes(wire)
    ours = _ours(client=not from_client, max_message=limit)
    one = ours.single(data)
    expected = _receive_outcome(_ours(client=not from_client, max_message=limit), data)
    if one is not None:
        assert expected == [one]
    assert _receive_outcome(ours, data) == expected  # single() consumed nothing


def test_the_single_frame_read_leaves_held_bytes_and_handshakes_to_the_parser():
    frame = _reference(client=True).send(BytesMessage(data=b"hello"))
    ours = _ours(client=False)
    assert ours.single(frame) == b"hello"
    assert list(ours.receive(frame[:3])) == []
    assert ours.single(frame) is None  # the start of a frame is held
    pre = WebSocket(None, client=False, max_message=MAX, pre_auth=True)
    assert pre.single(frame) is None

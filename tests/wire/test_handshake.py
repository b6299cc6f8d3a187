"""The peer-authentication handshake: both sides wired together by passing bytes.

Pure tests, no event loop: the handshake machines are sans-IO. Randomness is
a seeded counter so every nonce is known and distinct.
"""

from __future__ import annotations

import contextlib
import hmac
from hashlib import sha256

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zlink_trio.core.errors import (
    InvalidConfiguration,
    LocalProtocolError,
    RemoteProtocolError,
)
from zlink_trio.core.identity import NodeRid
from zlink_trio.wire.frames import Challenge, Hello, Ping, Welcome, decode, encode
from zlink_trio.wire.handshake import (
    HELLO_LABEL,
    ClientHandshake,
    HandshakeState,
    LocalIdentity,
    PeerIdentity,
    ServerHandshake,
    hello_mac,
)

SECRET = b"k" * 32
OTHER_SECRET = b"x" * 32

SERVER_ID = LocalIdentity(
    node_id="server-a",
    node_rid=NodeRid(b"\x01" * 16),
    lifecycle_generation=7,
    mesh="prod",
    max_frame_bytes=2_000_000,
)
CLIENT_ID = LocalIdentity(
    node_id="client-b",
    node_rid=NodeRid(b"\x02" * 16),
    lifecycle_generation=3,
    mesh="prod",
    max_frame_bytes=1_081_344,
)


def counter_random(seed: int):
    state = [seed]

    def random_bytes(n: int) -> bytes:
        state[0] += 1
        return state[0].to_bytes(8, "big") * (n // 8)

    return random_bytes


def make_server(secret=SECRET, identity=SERVER_ID, seed=1000, **kw):
    return ServerHandshake(
        secret=secret, identity=identity, random_bytes=counter_random(seed), **kw
    )


def make_client(secret=SECRET, identity=CLIENT_ID, seed=2000, **kw):
    return ClientHandshake(
        secret=secret, identity=identity, random_bytes=counter_random(seed), **kw
    )


def run(server: ServerHandshake, client: ClientHandshake) -> tuple[bytes, bytes, bytes]:
    """Drive both sides to completion; returns the three frames that crossed."""
    assert client.start() is None
    challenge = server.start()
    (hello,) = client.receive(challenge)
    (welcome,) = server.receive(hello)
    assert client.receive(welcome) == []
    return challenge, hello, welcome


# --------------------------------------------------------------------------- happy path


def test_both_sides_authenticate_each_other_and_negotiate_the_frame_limit():
    server, client = make_server(), make_client()
    challenge, hello, welcome = run(server, client)
    assert server.state is client.state is HandshakeState.DONE
    assert server.result == PeerIdentity(
        node_id="client-b",
        node_rid=CLIENT_ID.node_rid,
        lifecycle_generation=3,
        mesh="prod",
        max_frame_bytes=1_081_344,
    )
    assert client.result == PeerIdentity(
        node_id="server-a",
        node_rid=SERVER_ID.node_rid,
        lifecycle_generation=7,
        mesh="prod",
        max_frame_bytes=1_081_344,
    )
    assert isinstance(decode(challenge), Challenge)
    assert isinstance(decode(hello), Hello)
    assert isinstance(decode(welcome), Welcome)


def test_roles_swap_the_smaller_limit_still_wins():
    server = make_server(identity=CLIENT_ID)
    client = make_client(identity=SERVER_ID)
    run(server, client)
    assert server.result.node_id == "server-a"
    assert client.result.node_id == "client-b"
    assert server.result.max_frame_bytes == client.result.max_frame_bytes == 1_081_344


def test_hello_mac_is_the_documented_hmac():
    server, client = make_server(), make_client()
    client.start()
    challenge = server.start()
    (raw,) = client.receive(challenge)
    hello = decode(raw)
    assert isinstance(hello, Hello)
    # fields(HELLO): the frame bytes from offset 4 up to the MAC.
    fields = raw[4:-32]
    nonce_s = decode(challenge).nonce  # type: ignore[union-attr]
    expected = hmac.digest(SECRET, HELLO_LABEL + fields + nonce_s, sha256)
    assert hello.mac == expected == hello_mac(SECRET, hello, nonce_s)


def test_nonces_are_fresh_per_link():
    first, second = make_server(seed=1), make_server(seed=50)
    assert first.start() != second.start()


# --------------------------------------------------------------------------- refusals


def test_client_with_the_wrong_secret_is_refused_by_the_server():
    server, client = make_server(), make_client(secret=OTHER_SECRET)
    client.start()
    (hello,) = client.receive(server.start())
    with pytest.raises(RemoteProtocolError, match="failed authentication"):
        server.receive(hello)
    assert server.state is HandshakeState.FAILED


def test_server_with_the_wrong_secret_is_refused_by_the_client():
    # Mutual: a server that does not hold the key cannot fake a WELCOME, even if
    # it waves the HELLO through.
    real = make_server()
    impostor = make_server(secret=OTHER_SECRET)
    client = make_client()
    client.start()
    challenge = impostor.start()
    (hello,) = client.receive(challenge)
    # The impostor cannot verify the HELLO; it forges a WELCOME with its own key.
    with pytest.raises(RemoteProtocolError):
        impostor.receive(hello)
    forged = Welcome(
        node_id="server-a",
        node_rid=SERVER_ID.node_rid,
        lifecycle_generation=7,
        mesh="prod",
        max_frame_bytes=2_000_000,
        nonce=decode(challenge).nonce,  # type: ignore[union-attr]
        mac=bytes(32),
    )
    with pytest.raises(RemoteProtocolError, match="failed authentication"):
        client.receive(encode(forged))
    assert client.state is HandshakeState.FAILED
    assert real.state is HandshakeState.IDLE


def test_welcome_from_another_link_is_refused():
    server1, client1 = make_server(seed=10), make_client(seed=20)
    _, _, welcome1 = run(server1, client1)
    server2, client2 = make_server(seed=30), make_client(seed=40)
    client2.start()
    client2.receive(server2.start())
    with pytest.raises(RemoteProtocolError):
        client2.receive(welcome1)


def _flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


def test_every_tampered_byte_of_hello_is_refused():
    server, client = make_server(), make_client()
    client.start()
    challenge = server.start()
    (hello,) = client.receive(challenge)
    for index in range(len(hello)):
        fresh = make_server()
        assert fresh.start() == challenge  # same seed: same challenge
        with pytest.raises(RemoteProtocolError):
            fresh.receive(_flip(hello, index))


def test_every_tampered_byte_of_welcome_and_challenge_is_refused():
    _, _, welcome = run(make_server(), make_client())
    for index in range(len(welcome)):
        client = make_client()
        client.start()
        client.receive(make_server().start())
        with pytest.raises(RemoteProtocolError):
            client.receive(_flip(welcome, index))
    challenge = make_server().start()
    for index in range(len(challenge)):
        client = make_client()
        client.start()
        try:
            (hello,) = client.receive(_flip(challenge, index))
        except RemoteProtocolError:
            continue  # header byte: does not even decode
        # A nonce byte flipped: the server no longer accepts the HELLO.
        server = make_server()
        server.start()
        with pytest.raises(RemoteProtocolError):
            server.receive(hello)


def test_replayed_hello_against_a_new_challenge_is_refused():
    server1, client1 = make_server(seed=1), make_client()
    _, hello, _ = run(server1, client1)
    server2 = make_server(seed=99)
    server2.start()
    with pytest.raises(RemoteProtocolError, match="failed authentication"):
        server2.receive(hello)


def test_wrong_mesh_is_refused_on_both_sides():
    other = LocalIdentity(
        node_id="client-b",
        node_rid=CLIENT_ID.node_rid,
        lifecycle_generation=3,
        mesh="staging",
        max_frame_bytes=4096,
    )
    server, client = make_server(), make_client(identity=other)
    client.start()
    (hello,) = client.receive(server.start())
    with pytest.raises(RemoteProtocolError, match="mesh 'staging'"):
        server.receive(hello)
    # The other way round: a server in another mesh is refused by the client.
    server = make_server(identity=other)
    client = make_client(identity=SERVER_ID)
    client.start()
    (hello,) = client.receive(server.start())
    with pytest.raises(RemoteProtocolError):
        server.receive(hello)


def test_stale_lifecycle_is_refused_and_the_hook_sees_the_claim():
    seen: list[tuple[str, int]] = []

    def is_current(node_id: str, generation: int) -> bool:
        seen.append((node_id, generation))
        return False

    server, client = make_server(is_current=is_current), make_client()
    client.start()
    (hello,) = client.receive(server.start())
    with pytest.raises(RemoteProtocolError, match=r"lifecycle generation 3.*not its current"):
        server.receive(hello)
    assert seen == [("client-b", 3)]


def test_hook_is_not_asked_before_the_mac_checks_out():
    seen: list[object] = []
    server = make_server(is_current=lambda n, g: seen.append(n) or True)
    client = make_client(secret=OTHER_SECRET)
    client.start()
    (hello,) = client.receive(server.start())
    with pytest.raises(RemoteProtocolError):
        server.receive(hello)
    assert seen == []


def test_client_checks_the_server_lifecycle_and_expected_node():
    client = make_client(is_current=lambda n, g: g != 7)
    with pytest.raises(RemoteProtocolError, match="not its current"):
        run(make_server(), client)
    client = make_client(expected_node_id="server-z")
    with pytest.raises(RemoteProtocolError, match="dialled node 'server-z'"):
        run(make_server(), client)


def test_a_node_talking_to_itself_is_refused():
    with pytest.raises(RemoteProtocolError, match="own rid"):
        run(make_server(), make_client(identity=SERVER_ID))


# --------------------------------------------------------------------------- order and misuse


def _a_hello() -> bytes:
    client = make_client()
    client.start()
    (hello,) = client.receive(make_server().start())
    return hello


def test_unexpected_frames_are_remote_errors():
    ping = encode(Ping(token=1))
    server = make_server()
    challenge = server.start()
    with pytest.raises(RemoteProtocolError, match="expected HELLO"):
        server.receive(challenge)
    server = make_server()
    server.start()
    with pytest.raises(RemoteProtocolError, match="Ping"):
        server.receive(ping)
    client = make_client()
    client.start()
    with pytest.raises(RemoteProtocolError, match="Ping"):
        client.receive(ping)
    client = make_client()
    client.start()
    with pytest.raises(RemoteProtocolError, match="expected CHALLENGE"):
        client.receive(_a_hello())
    client = make_client()
    client.start()
    client.receive(make_server().start())
    with pytest.raises(RemoteProtocolError, match="expected WELCOME"):
        client.receive(challenge)


def test_any_frame_after_completion_is_a_remote_error():
    server, client = make_server(), make_client()
    _, hello, welcome = run(server, client)
    with pytest.raises(RemoteProtocolError, match="completed"):
        server.receive(hello)
    with pytest.raises(RemoteProtocolError, match="completed"):
        client.receive(welcome)
    assert server.state is client.state is HandshakeState.FAILED


def test_api_misuse_is_a_local_error():
    server, client = make_server(), make_client()
    with pytest.raises(LocalProtocolError, match="before start"):
        server.receive(b"")
    with pytest.raises(LocalProtocolError, match="before start"):
        client.receive(b"")
    with pytest.raises(LocalProtocolError, match="not done"):
        _ = server.result
    server.start()
    with pytest.raises(LocalProtocolError, match="once"):
        server.start()
    with pytest.raises(RemoteProtocolError):
        server.receive(b"garbage")
    with pytest.raises(LocalProtocolError, match="failed"):
        server.receive(b"garbage")
    with pytest.raises(LocalProtocolError, match="failed"):
        _ = server.result


def test_bad_configuration_is_refused_up_front_without_echoing_the_secret():
    with pytest.raises(InvalidConfiguration) as info:
        make_server(secret=b"short-secret")
    assert "short-secret" not in str(info.value)
    with pytest.raises(InvalidConfiguration):
        make_server(secret="k" * 32)
    bad = LocalIdentity(
        node_id="", node_rid=SERVER_ID.node_rid, lifecycle_generation=1, mesh="m",
        max_frame_bytes=4096,
    )
    with pytest.raises(InvalidConfiguration, match="node_id"):
        make_server(identity=bad)
    with pytest.raises(InvalidConfiguration):
        make_client(expected_node_id=5)


def test_a_broken_random_source_is_a_local_error():
    server = ServerHandshake(secret=SECRET, identity=SERVER_ID, random_bytes=lambda n: b"x")
    with pytest.raises(LocalProtocolError, match="random_bytes"):
        server.start()
    assert server.state is HandshakeState.FAILED


def test_secrets_stay_out_of_reprs_and_errors():
    secret = b"S3CR3T-" * 5
    server = make_server(secret=secret)
    client = make_client(secret=SECRET)
    client.start()
    (hello,) = client.receive(server.start())
    with pytest.raises(RemoteProtocolError) as info:
        server.receive(hello)
    for text in (repr(server), repr(client), str(info.value), repr(info.value)):
        assert "S3CR3T" not in text
        assert secret.hex() not in text


# --------------------------------------------------------------------------- fuzzing

_ERRORS = (RemoteProtocolError, LocalProtocolError)  # both ProtocolError


@settings(max_examples=300, deadline=None)
@given(step=st.integers(0, 3), junk=st.lists(st.binary(max_size=200), min_size=1, max_size=3))
def test_random_bytes_at_any_step_only_raise_protocol_errors(step, junk):
    server, client = make_server(), make_client()
    client.start()
    frames = [server.start()]
    # Advance the honest exchange ``step`` frames, then feed junk to both sides.
    for _ in range(step):
        receiver = client if len(frames) % 2 == 1 else server
        if receiver.state is HandshakeState.DONE:
            break
        frames.extend(receiver.receive(frames[-1]))
    for data in junk:
        for side in (server, client):
            # Anything but a protocol error escapes and fails the test.
            with contextlib.suppress(*_ERRORS):
                side.receive(data)


@settings(max_examples=200, deadline=None)
@given(index=st.integers(0, 200), value=st.integers(0, 255))
def test_any_single_byte_change_of_hello_never_authenticates(index, value):
    server, client = make_server(), make_client()
    client.start()
    (hello,) = client.receive(server.start())
    index %= len(hello)
    mutated = hello[:index] + bytes([value]) + hello[index + 1 :]
    if mutated == hello:
        return
    with pytest.raises(RemoteProtocolError):
        server.receive(mutated)

"""The peer-authentication handshake: a sans-IO state machine for each side of a link.

Theory of operation
-------------------
Every node shares one secret key ``K`` with the rest of its cluster. When a
link opens, the two ends prove to each other that they hold ``K`` and say who
they are (docs/wire.md has the frames byte by byte)::

    server                                       client
      CHALLENGE(nonce_s)                 ->
                                         <-      HELLO(identity_c, nonce_c, mac_c)
      verify mac_c, mesh, lifecycle
      WELCOME(identity_s, nonce_s, mac_s) ->
                                                 verify mac_s, nonce_s, mesh, lifecycle

Both nonces are 32 fresh bytes from the injected ``random_bytes``, so a
recorded HELLO or WELCOME is useless on any other link: its MAC covers a
nonce the other side has never sent before.

MACs. Each side signs its own introduction and the other side's nonce
under a label of its own, so the server's MAC covers the whole transcript and
neither can be reflected; :mod:`zlink_trio.wire._handshake_macs` has the exact
input. MACs are compared with :func:`hmac.compare_digest`.

Who is at fault. Anything the peer sends that is not the next expected frame,
does not decode, fails its MAC, names another mesh, reuses the other side's
nonce, claims this node's own rid, or announces a lifecycle generation the
``is_current`` hook refuses raises :class:`RemoteProtocolError`: the caller
closes that one link (no frame says why), never the node. Calling the API in
the wrong order (``receive`` before ``start``, anything after a failure,
``result`` before completion) raises :class:`LocalProtocolError`. Bad
constructor arguments raise :class:`InvalidConfiguration`. Once a machine has
raised from ``receive`` it is failed for good. A frame received after the
handshake completed is refused too: after completion the link's frames belong
to the runtime, not to this object.

The secret never appears in an error message or a ``repr``. Before
authentication, frames are decoded with a :data:`MIN_FRAME_BYTES` (1 KiB)
limit; every handshake frame fits in it. These checks, the identities and the
states are shared by both machines (:mod:`zlink_trio.wire._handshake_side`);
this module holds the two machines and re-exports the rest of the API.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

import hmac
from typing import Final

import attrs

from zlink_trio.core.errors import InvalidConfiguration, RemoteProtocolError
from zlink_trio.wire._frame_types import MIN_FRAME_BYTES, Challenge, Hello, Welcome
from zlink_trio.wire._handshake_macs import HELLO_LABEL, WELCOME_LABEL, hello_mac, welcome_mac
from zlink_trio.wire._handshake_side import (
    MIN_SECRET_BYTES,
    HandshakeSide,
    HandshakeState,
    LifecycleCheck,
    LocalIdentity,
    PeerIdentity,
    RandomBytes,
    introduction,
)
from zlink_trio.wire.frames import encode

__all__ = (
    "HELLO_LABEL",
    "MIN_SECRET_BYTES",
    "WELCOME_LABEL",
    "ClientHandshake",
    "HandshakeState",
    "LifecycleCheck",
    "LocalIdentity",
    "PeerIdentity",
    "RandomBytes",
    "ServerHandshake",
    "hello_mac",
    "welcome_mac",
)


# --------------------------------------------------------------------------- server


class ServerHandshake(HandshakeSide):
    """The accepting side: sends CHALLENGE, verifies HELLO, answers WELCOME.

    ``start()`` returns the CHALLENGE frame to send. ``receive(hello)`` returns
    ``[welcome]`` and sets :attr:`result`, or raises (see the module docstring).
    ``is_current``, if given, is asked only after the HELLO's MAC checked out.
    """

    __slots__ = ("_challenge",)

    _role = "server"

    def __init__(
        self,
        *,
        secret: bytes,
        identity: LocalIdentity,
        random_bytes: RandomBytes,
        is_current: LifecycleCheck | None = None,
    ) -> None:
        super().__init__(
            secret=secret, identity=identity, random_bytes=random_bytes, is_current=is_current
        )
        self._challenge = b""

    def start(self) -> bytes:
        """The CHALLENGE to send first; :class:`LocalProtocolError` if called twice."""
        self._begin(HandshakeState.AWAIT_HELLO)
        try:
            self._challenge = self._nonce()
        except BaseException:
            self._fail()
            raise
        return encode(Challenge(nonce=self._challenge))

    def receive(self, data: bytes) -> list[bytes]:
        """Feed one websocket message from the client; returns the frames to send."""
        self._check_receivable()
        try:
            frame = self._decode(data)
            if not isinstance(frame, Hello):
                raise RemoteProtocolError(
                    f"the server expected HELLO, the client sent {type(frame).__name__}"
                )
            if frame.nonce == self._challenge:
                raise RemoteProtocolError("HELLO echoes the server's nonce; refused")
            expected = hello_mac(self._secret, frame, self._challenge)
            if not hmac.compare_digest(expected, frame.mac):
                raise RemoteProtocolError(
                    f"HELLO claiming node {frame.node_id!r} failed authentication: wrong "
                    "cluster secret, a tampered frame or a replay"
                )
            peer = self._check_peer(frame, "HELLO")
            unsigned = introduction(Welcome, self._identity, self._challenge)
            welcome = attrs.evolve(unsigned, mac=welcome_mac(self._secret, unsigned, frame))
            out = [encode(welcome, max_frame_bytes=MIN_FRAME_BYTES)]
        except BaseException:
            self._fail()
            raise
        self._result = peer
        self._state = HandshakeState.DONE
        return out


# --------------------------------------------------------------------------- client


class ClientHandshake(HandshakeSide):
    """The dialling side: answers CHALLENGE with HELLO, verifies WELCOME.

    ``start()`` returns ``None`` (the server speaks first). ``receive(challenge)``
    returns ``[hello]``; ``receive(welcome)`` returns ``[]`` and sets
    :attr:`result`. ``expected_node_id``, if given, is the node the client
    meant to dial: a WELCOME from any other node is refused.
    """

    __slots__ = ("_challenge", "_expected_node_id", "_hello")

    _role = "client"

    def __init__(
        self,
        *,
        secret: bytes,
        identity: LocalIdentity,
        random_bytes: RandomBytes,
        is_current: LifecycleCheck | None = None,
        expected_node_id: str | None = None,
    ) -> None:
        super().__init__(
            secret=secret, identity=identity, random_bytes=random_bytes, is_current=is_current
        )
        if expected_node_id is not None and not isinstance(expected_node_id, str):
            raise InvalidConfiguration(
                f"expected_node_id must be None or a str, got {expected_node_id!r}"
            )
        self._expected_node_id: Final = expected_node_id
        self._challenge = b""
        self._hello: Hello | None = None

    def start(self) -> None:
        """Begin waiting for the CHALLENGE; nothing to send. Call once."""
        self._begin(HandshakeState.AWAIT_CHALLENGE)

    def receive(self, data: bytes) -> list[bytes]:
        """Feed one websocket message from the server; returns the frames to send."""
        self._check_receivable()
        try:
            frame = self._decode(data)
            if self._state is HandshakeState.AWAIT_CHALLENGE:
                out = [self._answer(frame)]
                self._state = HandshakeState.AWAIT_WELCOME
                return out
            self._result = self._verify(frame)
        except BaseException:
            self._fail()
            raise
        self._state = HandshakeState.DONE
        return []

    def _answer(self, frame: Hello | Welcome | Challenge) -> bytes:
        if not isinstance(frame, Challenge):
            raise RemoteProtocolError(
                f"the client expected CHALLENGE, the server sent {type(frame).__name__}"
            )
        self._challenge = frame.nonce
        nonce = self._nonce()
        if nonce == self._challenge:
            raise RemoteProtocolError("CHALLENGE repeats this client's fresh nonce; refused")
        unsigned = introduction(Hello, self._identity, nonce)
        self._hello = attrs.evolve(unsigned, mac=hello_mac(self._secret, unsigned, frame.nonce))
        return encode(self._hello, max_frame_bytes=MIN_FRAME_BYTES)

    def _verify(self, frame: Hello | Welcome | Challenge) -> PeerIdentity:
        if not isinstance(frame, Welcome):
            raise RemoteProtocolError(
                f"the client expected WELCOME, the server sent {type(frame).__name__}"
            )
        assert self._hello is not None
        if frame.nonce != self._challenge:
            raise RemoteProtocolError("WELCOME carries another nonce than the CHALLENGE did")
        expected = welcome_mac(self._secret, frame, self._hello)
        if not hmac.compare_digest(expected, frame.mac):
            raise RemoteProtocolError(
                f"WELCOME claiming node {frame.node_id!r} failed authentication: wrong "
                "cluster secret, a tampered frame or a replay"
            )
        if self._expected_node_id is not None and frame.node_id != self._expected_node_id:
            raise RemoteProtocolError(
                f"dialled node {self._expected_node_id!r} but node {frame.node_id!r} answered"
            )
        return self._check_peer(frame, "WELCOME")

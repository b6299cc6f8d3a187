"""The peer-authentication handshake: a sans-IO state machine for each side of a link.

Theory of operation
-------------------
Every node shares one secret key ``K`` with the rest of its cluster. When a
link opens, the two ends prove to each other that they hold ``K`` and say who
they are (``NOTES-stores-security.md`` §C.2)::

    server                                       client
      CHALLENGE(nonce_s)                 ->
                                         <-      HELLO(identity_c, nonce_c, mac_c)
      verify mac_c, mesh, lifecycle
      WELCOME(identity_s, nonce_s, mac_s) ->
                                                 verify mac_s, nonce_s, mesh, lifecycle

Both nonces are 32 fresh bytes from the injected ``random_bytes``, so a
recorded HELLO or WELCOME is useless on any other link: its MAC covers a
nonce the other side has never sent before.

MACs. Let ``fields(F)`` be the wire bytes of a HELLO or WELCOME frame ``F``
from offset 4 up to (not including) its MAC -- that is ``text8`` node id,
``rid`` node rid, ``u64`` lifecycle generation, ``text8`` mesh, ``u32`` max
frame bytes and the 32-byte nonce, exactly as ``docs/wire.md`` lays them out.
Every variable-length field is length-prefixed and every other field has a
fixed width, so the concatenation is unambiguous. Then::

    mac_c = HMAC-SHA256(K, b"zlink-hello-v1"   || fields(HELLO)   || nonce_s)
    mac_s = HMAC-SHA256(K, b"zlink-welcome-v1" || fields(WELCOME) || fields(HELLO))

``fields(HELLO)`` contains ``nonce_c`` and ``fields(WELCOME)`` contains the
server's nonce, which must equal the challenge's ``nonce_s``; so ``mac_s``
covers the whole transcript. The two labels differ, so a HELLO's MAC can never
pass as a WELCOME's (no reflection). MACs are compared with
:func:`hmac.compare_digest`.

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
limit; every handshake frame fits in it.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from enum import Enum
from hashlib import sha256
from typing import TYPE_CHECKING, Final

import attrs

from zlink_trio.core.errors import (
    InvalidConfiguration,
    LocalProtocolError,
    RemoteProtocolError,
)
from zlink_trio.wire._frame_fields import NONCE_BYTES, Writer
from zlink_trio.wire._frame_types import MIN_FRAME_BYTES, Challenge, Hello, Welcome
from zlink_trio.wire.frames import decode as _decode
from zlink_trio.wire.frames import encode

if TYPE_CHECKING:
    from zlink_trio.core.identity import NodeRid

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

#: Domain-separation label of the client's MAC.
HELLO_LABEL: Final = b"zlink-hello-v1"
#: Domain-separation label of the server's MAC.
WELCOME_LABEL: Final = b"zlink-welcome-v1"
#: Shortest accepted cluster secret (256 bits).
MIN_SECRET_BYTES: Final = 32

#: ``random_bytes(n)`` returns ``n`` unpredictable bytes (``os.urandom`` in production).
RandomBytes = Callable[[int], bytes]
#: ``is_current(node_id, lifecycle_generation)``: is that the node's current lifecycle?
LifecycleCheck = Callable[[str, int], bool]


@attrs.frozen(kw_only=True)
class LocalIdentity:
    """Who this node is on a link; ``max_frame_bytes`` is the largest frame it accepts."""

    node_id: str
    node_rid: NodeRid
    lifecycle_generation: int
    mesh: str
    max_frame_bytes: int


@attrs.frozen(kw_only=True)
class PeerIdentity:
    """The authenticated peer: the handshake's result.

    ``max_frame_bytes`` is the negotiated limit, the smaller of the two
    announced values: neither side sends, nor accepts, a larger frame.
    """

    node_id: str
    node_rid: NodeRid
    lifecycle_generation: int
    mesh: str
    max_frame_bytes: int


class HandshakeState(Enum):
    """Where a handshake machine is."""

    #: Built; ``start()`` not called yet.
    IDLE = "idle"
    #: Server: CHALLENGE sent, waiting for HELLO.
    AWAIT_HELLO = "await-hello"
    #: Client: waiting for CHALLENGE.
    AWAIT_CHALLENGE = "await-challenge"
    #: Client: HELLO sent, waiting for WELCOME.
    AWAIT_WELCOME = "await-welcome"
    #: Both sides authenticated; ``result`` is available.
    DONE = "done"
    #: ``receive`` raised; the link must be closed.
    FAILED = "failed"


# --------------------------------------------------------------------------- MACs


def _fields(frame: Hello | Welcome) -> bytes:
    w = Writer()
    w.text8(frame.node_id)
    w.rid(frame.node_rid)
    w.u64(frame.lifecycle_generation)
    w.text8(frame.mesh)
    w.u32(frame.max_frame_bytes)
    w.raw(frame.nonce)
    return bytes(w)


def hello_mac(secret: bytes, hello: Hello, server_nonce: bytes) -> bytes:
    """``HMAC-SHA256(secret, HELLO_LABEL || fields(hello) || server_nonce)``.

    ``hello.mac`` is not part of the input; see the module docstring for ``fields``.
    """
    return hmac.digest(secret, HELLO_LABEL + _fields(hello) + server_nonce, sha256)


def welcome_mac(secret: bytes, welcome: Welcome, hello: Hello) -> bytes:
    """``HMAC-SHA256(secret, WELCOME_LABEL || fields(welcome) || fields(hello))``.

    Neither frame's ``mac`` is part of the input.
    """
    return hmac.digest(secret, WELCOME_LABEL + _fields(welcome) + _fields(hello), sha256)


# --------------------------------------------------------------------------- shared machinery


class _Side:
    """What both sides share: configuration checks, state bookkeeping, peer checks."""

    __slots__ = ("_identity", "_is_current", "_random_bytes", "_result", "_secret", "_state")

    _role: str = "handshake"

    def __init__(
        self,
        *,
        secret: bytes,
        identity: LocalIdentity,
        random_bytes: RandomBytes,
        is_current: LifecycleCheck | None,
    ) -> None:
        if type(secret) is not bytes or len(secret) < MIN_SECRET_BYTES:
            # Never echo the value: it may be (part of) the real key.
            raise InvalidConfiguration(
                f"the cluster secret must be bytes of at least {MIN_SECRET_BYTES} bytes"
            )
        if not isinstance(identity, LocalIdentity):
            raise InvalidConfiguration(f"identity must be a LocalIdentity, got {identity!r}")
        if not callable(random_bytes):
            raise InvalidConfiguration("random_bytes must be a callable returning n bytes")
        if is_current is not None and not callable(is_current):
            raise InvalidConfiguration("is_current must be None or a callable")
        try:  # Validate every identity field now, with the frame's own validators.
            Hello(
                node_id=identity.node_id,
                node_rid=identity.node_rid,
                lifecycle_generation=identity.lifecycle_generation,
                mesh=identity.mesh,
                max_frame_bytes=identity.max_frame_bytes,
                nonce=bytes(NONCE_BYTES),
                mac=bytes(NONCE_BYTES),
            )
        except LocalProtocolError as exc:
            raise InvalidConfiguration(f"invalid local identity: {exc.message}") from None
        self._secret: Final = secret
        self._identity: Final = identity
        self._random_bytes: Final = random_bytes
        self._is_current: Final = is_current
        self._state = HandshakeState.IDLE
        self._result: PeerIdentity | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._identity.node_id!r} {self._state.value}>"

    @property
    def state(self) -> HandshakeState:
        """The current state."""
        return self._state

    @property
    def result(self) -> PeerIdentity:
        """The authenticated peer; :class:`LocalProtocolError` unless the state is DONE."""
        if self._result is None:
            raise LocalProtocolError(
                f"the {self._role} handshake is {self._state.value}, not done: there is no "
                "authenticated peer yet (a failed handshake raised from receive)"
            )
        return self._result

    def _nonce(self) -> bytes:
        nonce = self._random_bytes(NONCE_BYTES)
        if type(nonce) is not bytes or len(nonce) != NONCE_BYTES:
            raise LocalProtocolError(
                f"random_bytes({NONCE_BYTES}) must return exactly {NONCE_BYTES} bytes"
            )
        return nonce

    def _begin(self, next_state: HandshakeState) -> None:
        if self._state is not HandshakeState.IDLE:
            raise LocalProtocolError(
                f"start() called on a {self._state.value} {self._role} handshake; call it once"
            )
        self._state = next_state

    def _check_receivable(self) -> None:
        """API misuse checks, before any byte is looked at."""
        if self._state is HandshakeState.IDLE:
            raise LocalProtocolError(f"receive() before start() on a {self._role} handshake")
        if self._state is HandshakeState.FAILED:
            raise LocalProtocolError(
                f"receive() on a failed {self._role} handshake; close the link"
            )

    def _decode(self, data: bytes) -> Hello | Welcome | Challenge:
        if self._state is HandshakeState.DONE:
            raise RemoteProtocolError(
                f"the peer sent a frame to a completed {self._role} handshake"
            )
        frame = _decode(data, max_frame_bytes=MIN_FRAME_BYTES)
        if not isinstance(frame, Hello | Welcome | Challenge):
            raise RemoteProtocolError(
                f"the peer sent a {type(frame).__name__} frame during the handshake"
            )
        return frame

    def _check_peer(self, peer: Hello | Welcome, what: str) -> PeerIdentity:
        """Checks that follow a good MAC; returns the peer's identity."""
        me = self._identity
        if peer.mesh != me.mesh:
            raise RemoteProtocolError(
                f"{what} from node {peer.node_id!r} is for mesh {peer.mesh!r}, "
                f"this node serves mesh {me.mesh!r}"
            )
        if peer.node_rid == me.node_rid:
            raise RemoteProtocolError(
                f"{what} carries this node's own rid {me.node_rid}: a reflected or looped link"
            )
        if self._is_current is not None and not self._is_current(
            peer.node_id, peer.lifecycle_generation
        ):
            raise RemoteProtocolError(
                f"{what} from node {peer.node_id!r} announces lifecycle generation "
                f"{peer.lifecycle_generation}, which is not its current one (a restarted "
                "or zombie process); refused"
            )
        return PeerIdentity(
            node_id=peer.node_id,
            node_rid=peer.node_rid,
            lifecycle_generation=peer.lifecycle_generation,
            mesh=peer.mesh,
            max_frame_bytes=min(me.max_frame_bytes, peer.max_frame_bytes),
        )

    def _fail(self) -> None:
        self._state = HandshakeState.FAILED
        self._result = None


# --------------------------------------------------------------------------- server


class ServerHandshake(_Side):
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
            me = self._identity
            unsigned = Welcome(
                node_id=me.node_id,
                node_rid=me.node_rid,
                lifecycle_generation=me.lifecycle_generation,
                mesh=me.mesh,
                max_frame_bytes=me.max_frame_bytes,
                nonce=self._challenge,
                mac=bytes(NONCE_BYTES),
            )
            welcome = attrs.evolve(unsigned, mac=welcome_mac(self._secret, unsigned, frame))
            out = [encode(welcome, max_frame_bytes=MIN_FRAME_BYTES)]
        except BaseException:
            self._fail()
            raise
        self._result = peer
        self._state = HandshakeState.DONE
        return out


# --------------------------------------------------------------------------- client


class ClientHandshake(_Side):
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
        me = self._identity
        self._challenge = frame.nonce
        nonce = self._nonce()
        if nonce == self._challenge:
            raise RemoteProtocolError("CHALLENGE repeats this client's fresh nonce; refused")
        unsigned = Hello(
            node_id=me.node_id,
            node_rid=me.node_rid,
            lifecycle_generation=me.lifecycle_generation,
            mesh=me.mesh,
            max_frame_bytes=me.max_frame_bytes,
            nonce=nonce,
            mac=bytes(NONCE_BYTES),
        )
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

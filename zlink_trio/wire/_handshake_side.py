"""What both handshake machines share: the identities, the states and the checks.

Theory of operation
-------------------
A side is built from the cluster secret, its :class:`LocalIdentity`, an
injected ``random_bytes`` and an optional ``is_current`` lifecycle hook.
:class:`HandshakeSide` checks all of them at construction -- every identity field
with the HELLO frame's own validators -- and raises
:class:`InvalidConfiguration` for a bad one; the secret is never echoed, in
an error message or a ``repr``.

It then keeps the state (:class:`HandshakeState`) and refuses API misuse with
:class:`LocalProtocolError`: ``start`` twice, ``receive`` before ``start``
or after a failure, ``result`` before DONE. Whatever the peer sends is
decoded with the :data:`MIN_FRAME_BYTES` (1 KiB) limit, every handshake
frame fitting in it, and must be a handshake frame sent before completion.
Once its MAC checked out, the peer must name this node's mesh, must not
claim this node's own rid, and must announce a lifecycle generation that
``is_current`` accepts; any of these failing is a
:class:`RemoteProtocolError`, and ``_fail`` marks the machine failed for
good. The result, :class:`PeerIdentity`, carries the negotiated
``max_frame_bytes``: the smaller of the two announced limits.

The message exchange itself -- who sends what when, and the MACs -- is in
:mod:`zlink_trio.wire.handshake` and :mod:`zlink_trio.wire._handshake_macs`.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Final, TypeVar

import attrs

from zlink_trio.core.errors import (
    InvalidConfiguration,
    LocalProtocolError,
    RemoteProtocolError,
)
from zlink_trio.wire._frame_layouts import NONCE_BYTES
from zlink_trio.wire._frame_types import MIN_FRAME_BYTES, Challenge, Hello, Welcome
from zlink_trio.wire.frames import decode as _decode

if TYPE_CHECKING:
    from zlink_trio.core.identity import NodeRid

__all__ = (
    "MIN_SECRET_BYTES",
    "HandshakeSide",
    "HandshakeState",
    "LifecycleCheck",
    "LocalIdentity",
    "PeerIdentity",
    "RandomBytes",
    "introduction",
)

#: Shortest accepted cluster secret (256 bits).
MIN_SECRET_BYTES: Final = 32

#: ``random_bytes(n)`` returns ``n`` unpredictable bytes (``os.urandom`` in production).
RandomBytes = Callable[[int], bytes]
#: ``is_current(node_id, lifecycle_generation)``: is that the node's current lifecycle?
LifecycleCheck = Callable[[str, int], bool]
#: HELLO or WELCOME: the two frames that introduce their sender.
Intro = TypeVar("Intro", Hello, Welcome)


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


def introduction(cls: type[Intro], identity: LocalIdentity, nonce: bytes) -> Intro:
    """The HELLO or WELCOME introducing ``identity`` with ``nonce``; its MAC is all zeros.

    Raises :class:`LocalProtocolError` if a field cannot be sent. The caller signs the
    frame (``attrs.evolve(frame, mac=...)``) before it sends it.
    """
    return cls(
        node_id=identity.node_id,
        node_rid=identity.node_rid,
        lifecycle_generation=identity.lifecycle_generation,
        mesh=identity.mesh,
        max_frame_bytes=identity.max_frame_bytes,
        nonce=nonce,
        mac=bytes(NONCE_BYTES),
    )


class HandshakeSide:
    """What both sides share: configuration checks, state bookkeeping, peer checks.

    :class:`~zlink_trio.wire.handshake.ServerHandshake` and
    :class:`~zlink_trio.wire.handshake.ClientHandshake` subclass it, name their
    ``_role`` (for error messages) and add ``start`` and ``receive``.
    """

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
            introduction(Hello, identity, bytes(NONCE_BYTES))
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

"""The handshake's MACs: what each side signs, and the labels that keep them apart.

Theory of operation
-------------------
Let ``fields(F)`` be the wire bytes of a HELLO or WELCOME frame ``F``
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
pass as a WELCOME's (no reflection). The machines of
:mod:`zlink_trio.wire.handshake` compare MACs with :func:`hmac.compare_digest`.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

import hmac
from hashlib import sha256
from typing import TYPE_CHECKING, Final

from zlink_trio.wire._frame_layouts import NONCE_BYTES
from zlink_trio.wire.frames import HEADER_BYTES, encode

if TYPE_CHECKING:
    from zlink_trio.wire._frame_types import Hello, Welcome

__all__ = ("HELLO_LABEL", "WELCOME_LABEL", "hello_mac", "welcome_mac")

#: Domain-separation label of the client's MAC.
HELLO_LABEL: Final = b"zlink-hello-v1"
#: Domain-separation label of the server's MAC.
WELCOME_LABEL: Final = b"zlink-welcome-v1"


def _fields(frame: Hello | Welcome) -> bytes:
    """``fields(frame)``: its wire bytes from offset 4 up to (not including) its MAC.

    Cut from the frame's own encoding, so the MAC input and the wire cannot drift apart.
    """
    return encode(frame)[HEADER_BYTES:-NONCE_BYTES]


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

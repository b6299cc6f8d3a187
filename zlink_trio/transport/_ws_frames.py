"""RFC 6455 frame primitives of a link's websocket: opcodes, close codes, masking, one frame.

Theory of operation
-------------------
The pieces of the websocket layer that hold no state of a connection, for
:mod:`._ws` (whose :class:`~._ws.WebSocket` parses and builds a link's frames
with them) and :mod:`._ws_upgrade`:

* :func:`_frame` builds one final frame, masked with a fresh key on the
  client side (RFC 6455 5.3); :func:`_masked` masks or unmasks a payload.
  Masking keys come from ``lowlevel.pooled_random`` (many per ``os.urandom`` read).
* :func:`_close_payload` checks a received Close's payload (code and UTF-8
  reason) and raises :class:`~zlink_trio.core.errors.RemoteProtocolError` for
  a malformed one.
* :class:`WebSocketClosed` is how the websocket layer says the websocket
  ended (re-exported by :mod:`._ws`); :func:`_broken` makes the one for a
  stream that broke under a read or write.

The underscored names are private to the websocket modules (``_ws*``), which
import them by name: the parser's hot loop reads them as its own module's
globals. Nothing here does I/O or imports trio.
"""

from __future__ import annotations

from typing import Final

from zlink_trio.core.errors import RemoteProtocolError
from zlink_trio.lowlevel.pooled_random import SYSTEM

__all__ = (
    "CLOSE_NORMAL",
    "CLOSE_PROTOCOL_ERROR",
    "CLOSE_TOO_BIG",
    "WebSocketClosed",
)

#: Opcodes (RFC 6455 5.2).
_CONTINUATION: Final = 0x0
_TEXT: Final = 0x1
_BINARY: Final = 0x2
_CLOSE: Final = 0x8
_PING: Final = 0x9
_PONG: Final = 0xA
#: Close codes (RFC 6455 7.4.1).
CLOSE_NORMAL: Final = 1000
CLOSE_PROTOCOL_ERROR: Final = 1002
CLOSE_TOO_BIG: Final = 1009
_NO_STATUS: Final = 1005


class WebSocketClosed(Exception):
    """The websocket ended: the peer closed it, or the stream broke or reached its end.

    ``reason`` says which, for logs.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _broken(exc: BaseException) -> WebSocketClosed:
    """The WebSocketClosed for a stream that broke under a read or write (also the upgrade's)."""
    cause = exc.__cause__ or exc
    return WebSocketClosed(f"the connection broke: {str(cause) or type(cause).__name__}")


def _masked(key: bytes, data: bytes) -> bytes:
    """``data`` XOR the 4-byte ``key`` repeated (masking and unmasking are the same)."""
    n = len(data)
    if not n:
        return b""
    stream = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(stream, "little")).to_bytes(
        n, "little")




def _frame(opcode: int, payload: bytes, mask: bool) -> bytes:
    """One final frame with ``payload`` (masked with a random key if ``mask``)."""
    n = len(payload)
    bit = 0x80 if mask else 0
    if n < 126:
        head = bytes((0x80 | opcode, bit | n))
    elif n < 0x10000:
        head = bytes((0x80 | opcode, bit | 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((0x80 | opcode, bit | 127)) + n.to_bytes(8, "big")
    if not mask:
        return head + payload
    key = SYSTEM.take(4)
    return head + key + _masked(key, payload)


def _close_payload(payload: bytes) -> tuple[int, str]:
    """The code and reason of a received Close; RemoteProtocolError if malformed."""
    if not payload:
        return _NO_STATUS, ""
    if len(payload) == 1:
        raise RemoteProtocolError("a websocket Close with a 1-byte payload")
    code = int.from_bytes(payload[:2], "big")
    if not (1000 <= code <= 4999) or code in (1004, 1005, 1006, 1015) or (
            1016 <= code <= 2999):
        raise RemoteProtocolError(f"a websocket Close with the invalid code {code}")
    try:
        reason = payload[2:].decode()
    except UnicodeDecodeError:
        raise RemoteProtocolError("a websocket Close whose reason is not UTF-8") from None
    return code, reason

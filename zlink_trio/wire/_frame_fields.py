"""Field encodings of the binary frame codec: bounds, a reader and a writer.

Theory of operation
-------------------
Every frame field uses one of a handful of encodings (``docs/wire.md``):

========================  =====================================================
``u8``/``u16``/``u32``    unsigned, fixed width, big-endian
``u64``                   unsigned 64-bit, big-endian
``gen``                   ``u64`` holding 1..2**63-1 (generations, versions)
``rid``                   16 raw bytes, never all-zero (a :class:`NodeRid`)
``text8``                 ``u8`` length 1..255 + UTF-8 bytes
``optional-text8``        ``text8`` where length 0 means absent
``text16``                ``u16`` length 0..65535 + UTF-8 bytes
``flag``                  ``u8`` that is exactly 0 or 1
``blob32``                ``u32`` length + raw bytes, bounded by a cap
``root``                  ``text8`` ref + 32-byte SHA-256 + ``u64`` size (a
                          :class:`RootReceipt`, size at most 64 MiB)
========================  =====================================================

:class:`Reader` turns a peer's bytes into values and is total: every
problem -- too few bytes, a length past the end or past a cap, invalid UTF-8
(which includes encoded lone surrogates and overlong forms), a zero-length
required text, an all-zero rid, a generation of 0 or >= 2**63, a flag that is
not 0/1, a root above 64 MiB -- raises :class:`RemoteProtocolError`, never
``IndexError``, ``struct.error`` or ``UnicodeDecodeError``.

:class:`Writer` assumes values were validated by the frame classes'
constructors (which raise :class:`LocalProtocolError`); it only appends.

The attrs validators that the frame classes share, and that raise that
:class:`LocalProtocolError`, are in :mod:`zlink_trio.wire._frame_checks`.
This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

import struct
from typing import Final

from zlink_trio.core.errors import RemoteProtocolError
from zlink_trio.core.identity import MAX_ID_BYTES, MAX_OBJECT_GENERATION, NodeRid
from zlink_trio.core.records import MAX_ROOT_BYTES, OwnerFence, RootReceipt, SpotRef
from zlink_trio.wire.codec import EncodedMessage

__all__ = (
    "MAX_GEN",
    "MAX_METADATA_BYTES",
    "MAX_TEXT16_BYTES",
    "MAX_U8",
    "MAX_U16",
    "MAX_U32",
    "MAX_U64",
    "NONCE_BYTES",
    "SHA256_BYTES",
    "Reader",
    "Writer",
)

MAX_U8: Final = 0xFF
MAX_U16: Final = 0xFFFF
MAX_U32: Final = 0xFFFF_FFFF
MAX_U64: Final = 0xFFFF_FFFF_FFFF_FFFF
#: Largest generation, StoreVersion, lifecycle generation, deadline or lease (2**63 - 1).
MAX_GEN: Final = MAX_OBJECT_GENERATION
#: Largest ``text16`` (failure messages), in UTF-8 bytes.
MAX_TEXT16_BYTES: Final = MAX_U16
#: Largest command 39 metadata, in bytes (16 KiB).
MAX_METADATA_BYTES: Final = 16 * 1024
#: Size of a handshake nonce and of a handshake MAC (HMAC-SHA256), in bytes.
NONCE_BYTES: Final = 32
#: Size of a SHA-256 digest on the wire (a root's ``sha256``: raw, not hex), in bytes.
SHA256_BYTES: Final = 32

_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_U64: Final = struct.Struct(">Q")
_ZERO_RID: Final = bytes(16)


# --------------------------------------------------------------------------- writer


class Writer:
    """Appends encoded fields; ``bytes(writer)`` is the frame so far."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def __bytes__(self) -> bytes:
        return b"".join(self._parts)

    def raw(self, value: bytes) -> None:
        """Fixed-size raw bytes (magic, nonce, MAC)."""
        self._parts.append(value)

    def u8(self, value: int) -> None:
        """One unsigned byte."""
        self._parts.append(bytes((value,)))

    def u16(self, value: int) -> None:
        """Unsigned 16-bit big-endian."""
        self._parts.append(_U16.pack(value))

    def u32(self, value: int) -> None:
        """Unsigned 32-bit big-endian."""
        self._parts.append(_U32.pack(value))

    def u64(self, value: int) -> None:
        """Unsigned 64-bit big-endian."""
        self._parts.append(_U64.pack(value))

    def flag(self, value: bool) -> None:
        """0 or 1."""
        self._parts.append(b"\x01" if value else b"\x00")

    def rid(self, value: NodeRid) -> None:
        """16 raw bytes."""
        self._parts.append(value.value)

    def owner(self, value: OwnerFence) -> None:
        """``rid`` + ``gen``: a node lifecycle."""
        self.rid(value.node_rid)
        self.u64(value.lifecycle_generation)

    def text8(self, value: str) -> None:
        """``u8`` length + UTF-8 (the caller checked 1..255 bytes)."""
        raw = value.encode("utf-8")
        self.u8(len(raw))
        self._parts.append(raw)

    def optional_text8(self, value: str | None) -> None:
        """``text8``, or a single zero byte for ``None``."""
        if value is None:
            self.u8(0)
        else:
            self.text8(value)

    def text16(self, value: str) -> None:
        """``u16`` length + UTF-8 (the caller checked 0..65535 bytes)."""
        raw = value.encode("utf-8")
        self.u16(len(raw))
        self._parts.append(raw)

    def blob32(self, value: bytes) -> None:
        """``u32`` length + raw bytes."""
        self.u32(len(value))
        self._parts.append(value)

    def spot_ref(self, value: SpotRef) -> None:
        """``text8`` Spot ID, ``gen`` generation, ``text8`` mesh, ``rid`` node."""
        self.text8(value.spot_id)
        self.u64(value.generation)
        self.text8(value.mesh)
        self.rid(value.node_rid)

    def root_receipt(self, value: RootReceipt) -> None:
        """``text8`` ref, the SHA-256 as 32 raw bytes, ``u64`` size."""
        self.text8(value.ref)
        self._parts.append(bytes.fromhex(value.sha256))
        self.u64(value.size)

    def payload(self, value: EncodedMessage) -> None:
        """``text8`` type name + ``blob32`` JSON body."""
        self.text8(value.type_name)
        self.blob32(value.body)

    def optional_payload(self, value: EncodedMessage | None) -> None:
        """``flag`` + (payload if the flag is 1)."""
        self.flag(value is not None)
        if value is not None:
            self.payload(value)


# --------------------------------------------------------------------------- reader


class Reader:
    """Reads fields from a peer's frame; every refusal is :class:`RemoteProtocolError`."""

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def _take(self, size: int, what: str) -> bytes:
        end = self._pos + size
        if end > len(self._data):
            raise RemoteProtocolError(
                f"truncated frame: {what} needs {size} bytes at offset {self._pos}, "
                f"only {len(self._data) - self._pos} remain"
            )
        chunk = self._data[self._pos : end]
        self._pos = end
        return chunk

    def end(self) -> None:
        """Refuse trailing bytes after the last field."""
        extra = len(self._data) - self._pos
        if extra:
            raise RemoteProtocolError(
                f"{extra} trailing bytes after the frame's last field at offset {self._pos}"
            )

    def raw(self, size: int, what: str) -> bytes:
        """Exactly ``size`` raw bytes."""
        return self._take(size, what)

    def u8(self, what: str) -> int:
        """One unsigned byte."""
        return self._take(1, what)[0]

    def u16(self, what: str) -> int:
        """Unsigned 16-bit big-endian."""
        value: int = _U16.unpack(self._take(2, what))[0]
        return value

    def u32(self, what: str) -> int:
        """Unsigned 32-bit big-endian."""
        value: int = _U32.unpack(self._take(4, what))[0]
        return value

    def u64(self, what: str) -> int:
        """Unsigned 64-bit big-endian, any value."""
        value: int = _U64.unpack(self._take(8, what))[0]
        return value

    def u64_nonzero(self, what: str) -> int:
        """``u64`` in 1..2**64-1."""
        value = self.u64(what)
        if value == 0:
            raise RemoteProtocolError(f"{what} is 0, which is reserved; it must be non-zero")
        return value

    def gen(self, what: str) -> int:
        """``u64`` in 1..2**63-1."""
        value = self.u64(what)
        if not 1 <= value <= MAX_GEN:
            raise RemoteProtocolError(f"{what} must be in 1..{MAX_GEN}, got {value}")
        return value

    def bounded_u64(self, what: str) -> int:
        """``u64`` in 0..2**63-1 (times that may be 0)."""
        value = self.u64(what)
        if value > MAX_GEN:
            raise RemoteProtocolError(f"{what} must be in 0..{MAX_GEN}, got {value}")
        return value

    def flag(self, what: str) -> bool:
        """A byte that is exactly 0 or 1."""
        value = self.u8(what)
        if value > 1:
            raise RemoteProtocolError(f"{what} must be 0 or 1, got {value}")
        return value == 1

    def rid(self, what: str) -> NodeRid:
        """16 bytes, not all zero."""
        raw = self._take(16, what)
        if raw == _ZERO_RID:
            raise RemoteProtocolError(f"{what} is the all-zero rid, which means absent")
        return NodeRid(raw)

    def owner(self, what: str) -> OwnerFence:
        """``rid`` + ``gen``."""
        rid = self.rid(f"{what} node rid")
        return OwnerFence(rid, self.gen(f"{what} lifecycle generation"))

    def _utf8(self, size: int, what: str) -> str:
        raw = self._take(size, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError(f"{what} is not valid UTF-8 ({exc.reason})") from None

    def text8(self, what: str) -> str:
        """``u8`` length 1..255 + UTF-8."""
        size = self.u8(f"{what} length")
        if size == 0:
            raise RemoteProtocolError(f"{what} is empty; it must be 1..{MAX_ID_BYTES} bytes")
        return self._utf8(size, what)

    def optional_text8(self, what: str) -> str | None:
        """``text8``; length 0 means absent (``None``)."""
        size = self.u8(f"{what} length")
        return None if size == 0 else self._utf8(size, what)

    def text16(self, what: str) -> str:
        """``u16`` length 0..65535 + UTF-8."""
        return self._utf8(self.u16(f"{what} length"), what)

    def blob32(self, what: str, cap: int) -> bytes:
        """``u32`` length (at most ``cap``) + raw bytes."""
        size = self.u32(f"{what} length")
        if size > cap:
            raise RemoteProtocolError(f"{what} is {size} bytes, above the {cap}-byte limit")
        return self._take(size, what)

    def spot_ref(self, what: str) -> SpotRef:
        """``text8`` Spot ID, ``gen`` generation, ``text8`` mesh, ``rid`` node."""
        spot_id = self.text8(f"{what} Spot ID")
        generation = self.gen(f"{what} generation")
        mesh = self.text8(f"{what} mesh")
        return SpotRef(
            spot_id=spot_id, generation=generation, mesh=mesh, node_rid=self.rid(f"{what} node rid")
        )

    def root_receipt(self, what: str) -> RootReceipt:
        """``text8`` ref, 32 raw bytes of SHA-256, ``u64`` size of at most 64 MiB."""
        ref = self.text8(f"{what} ref")
        sha256 = self._take(SHA256_BYTES, f"{what} SHA-256").hex()
        size = self.u64(f"{what} size")
        if size > MAX_ROOT_BYTES:
            raise RemoteProtocolError(
                f"{what} size is {size} bytes, above the {MAX_ROOT_BYTES}-byte root limit"
            )
        return RootReceipt(ref=ref, sha256=sha256, size=size)

    def payload(self, what: str, cap: int) -> EncodedMessage:
        """``text8`` type name + ``blob32`` body of at most ``cap`` bytes."""
        type_name = self.text8(f"{what} type name")
        return EncodedMessage(type_name, self.blob32(f"{what} body", cap))

    def optional_payload(self, what: str, cap: int) -> EncodedMessage | None:
        """``flag`` + (payload if the flag is 1)."""
        return self.payload(what, cap) if self.flag(f"{what} flag") else None

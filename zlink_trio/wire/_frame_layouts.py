"""Frame layouts as data, and the compiler that makes one writer and one reader of each.

Theory of operation
-------------------
A frame's fields follow its 4-byte header in a fixed order (``docs/wire.md`` has the
byte tables). That order and the encoding of every field are declared once, on the
frame class itself: each attrs field carries ``metadata=wire(encoding, label)``, which
names its :class:`Encoding` (``text8``, ``gen``, an owner fence, the union of routes,
...), the label its errors use and whether a caller may hand its bytes in already
encoded (a *slot*). The attrs field order is the wire order: the class is the layout.

:func:`compile_frames` turns a table of frame classes into

* one **writer** per command: a function of the frame's fields, in attrs order, plus
  ``mb`` (``max_body_bytes``), that checks every value it is given and raises
  :class:`LocalProtocolError` for one this side may not send (the caller's bug), and
  returns the whole frame, header included. A slot's value may instead be the ``bytes``
  its pre-encoder made (:attr:`CompiledFrames.slots`), written as they are. The writer
  is both the general path (``frames.encode`` hands it a frame's fields) and the hot
  one (a Ready call hands it its cached route's bytes; a success reply its outcome's).
  A nested value (a route, an outcome) is written by its own layout's writer, the same
  way;
* one **reader** per command, made per link (:class:`Readers`): a function of a frame's
  bytes (header already checked) and the body bound, returning the frame or raising
  :class:`RemoteProtocolError` that names the field and what is wrong -- never
  ``IndexError``, ``struct.error`` or ``UnicodeDecodeError``. It reads each run of
  fixed-width fields with one :mod:`struct` call after one length check, builds the
  frame without re-running validators on values it has just checked, and keeps the
  immutable values a link carries again and again (owner fences, Ready routes, message
  type names) in caches owned by that link's readers, bounded and cleared when full.

The compiler generates the Python source of these functions once per process, as attrs
and cattrs do for their classes; the same declaration makes both directions, so they
cannot drift apart, and the encoding stays canonical: whatever a reader accepts, the
writer of its frame writes back byte for byte.

Encodings also give the frame classes their attrs validators
(:meth:`Encoding.validator`): a constructor and a writer apply the same rule. An
outgoing ``text8`` is checked by one rule, ``_emit_text8`` (inlined by the writers,
and compiled into :data:`text8_bytes` for the validators); an incoming one by
:class:`Text`'s reader.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

import linecache
import struct
from contextlib import contextmanager
from typing import TYPE_CHECKING, ClassVar, Final, Protocol, TypeAlias, TypeVar, cast

import attrs

from zlink_trio.core.errors import InvalidOperation, LocalProtocolError, RemoteProtocolError
from zlink_trio.core.identity import MAX_ID_BYTES, MAX_OBJECT_GENERATION, NodeRid
from zlink_trio.core.records import MAX_ROOT_BYTES, OwnerFence, RootReceipt, SpotRef
from zlink_trio.wire.codec import MAX_BODY_BYTES, EncodedMessage

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from enum import IntEnum

__all__ = (
    "BLOB32",
    "FLAG",
    "GEN",
    "ID",
    "MAX_GEN",
    "MAX_METADATA_BYTES",
    "MAX_TEXT16_BYTES",
    "MAX_U8",
    "MAX_U16",
    "MAX_U32",
    "MAX_U64",
    "MS",
    "NONCE_BYTES",
    "OPTIONAL_PAYLOAD",
    "OPTIONAL_TEXT8",
    "OWNER",
    "PAYLOAD",
    "RID",
    "ROOT",
    "SPOT_REF",
    "TEXT8",
    "TEXT16",
    "U8",
    "U64",
    "Blob32",
    "Check",
    "Code",
    "CompiledFrames",
    "Composite",
    "Encoding",
    "Enum8",
    "Int",
    "Layout",
    "Optional",
    "Raw",
    "Readers",
    "Union",
    "WireField",
    "cannot_encode",
    "compile_frames",
    "instance_writer",
    "layout_of",
    "text8_bytes",
    "wire",
)

T = TypeVar("T")

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

_ZERO_RID: Final = bytes(16)
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_WIDEST: Final = {"B": MAX_U8, "H": MAX_U16, "I": MAX_U32, "Q": MAX_U64}
_PAYLOAD_EXPECTED: Final = "an EncodedMessage(type_name: 1..255 UTF-8 bytes, body: bytes)"

# --------------------------------------------------------------------------- the checks


def cannot_encode(name: str, value: object, expected: str) -> LocalProtocolError:
    """The error of a value this side may not send (a bug of the caller)."""
    return LocalProtocolError(
        f"cannot encode {name}={value!r}: it must be {expected}; "
        "build the frame from validated values"
    )


def _emit_text8(code: Code, value: str, target: str) -> None:
    """Emit ``target = value as text8 (u8 length + UTF-8)``, or ``None`` if it cannot be one.

    The one rule of an outgoing ``text8``: a ``str`` whose UTF-8 form (so no lone
    surrogate) is 1..255 bytes. Writers inline it; :func:`text8_bytes` is made of it.
    """
    raw = code.var("raw")
    with code.block(f"if isinstance({value}, str)"):
        with code.block("try"):
            code.emit(f"{raw} = {value}.encode()")
        with code.block("except UnicodeEncodeError"):
            code.emit(f"{raw} = b''")
        code.emit(f"{target} = _U8_BYTES[len({raw})] + {raw} "
                  f"if 0 < len({raw}) <= {MAX_ID_BYTES} else None")
    with code.block("else"):
        code.emit(f"{target} = None")


#: ``bytes((n,))`` for every ``u8`` (indexing beats building one).
_U8_BYTES: Final = tuple(bytes((n,)) for n in range(MAX_U8 + 1))


def _text16_bytes(value: object) -> bytes | None:
    """``value`` as ``text16`` (``u16`` length + UTF-8), or ``None`` if it cannot be one."""
    if not isinstance(value, str):
        return None
    try:
        raw = value.encode()
    except UnicodeEncodeError:
        return None
    return _U16.pack(len(raw)) + raw if len(raw) <= MAX_TEXT16_BYTES else None


def _body_above(value: EncodedMessage, max_body_bytes: int) -> LocalProtocolError:
    return LocalProtocolError(
        f"message body of {value.type_name!r} is {len(value.body)} bytes, above the "
        f"{max_body_bytes}-byte limit; send a smaller message or raise the limit"
    )


def _truncated(data: bytes, pos: int, parts: Sequence[tuple[str, int]]) -> RemoteProtocolError:
    """The error naming the first of ``parts`` (label, size) from ``pos`` that does not fit."""
    for what, size in parts:
        if pos + size > len(data):
            return RemoteProtocolError(
                f"truncated frame: {what} needs {size} bytes at offset {pos}, "
                f"only {len(data) - pos} remain"
            )
        pos += size
    raise AssertionError("the parts fit")  # pragma: no cover


def _not_utf8(what: str, exc: UnicodeDecodeError) -> RemoteProtocolError:
    return RemoteProtocolError(f"{what} is not valid UTF-8 ({exc.reason})")


def _range_refusal(lo: int, hi: int) -> Callable[[str, int], str]:
    def refusal(what: str, value: int) -> str:
        if lo == 1 and hi == MAX_U64:
            return f"{what} is 0, which is reserved; it must be non-zero"
        return f"{what} must be in {lo}..{hi}, got {value}"

    return refusal


# --------------------------------------------------------------------------- the code builder


@attrs.define
class _Run:
    """A fixed-width read queued by :meth:`Code.fixed`."""

    fmt: str
    parts: tuple[tuple[str, int], ...]
    target: str
    finish: Callable[[Code, list[str], int], str]


class Writer(Protocol):
    """A generated writer: its layout's fields (attrs order), then ``mb``; the bytes."""

    def __call__(self, *fields: object) -> bytes:
        """Check the fields and return their bytes (see :func:`compile_frames`)."""


#: ``write(instance, mb)``: the writer of a whole value (its fields from the instance).
InstanceWriter: TypeAlias = "Callable[[object, int], bytes]"
#: ``read(data, mb)``: a command's reader (see :class:`Readers`).
Reader: TypeAlias = "Callable[[bytes, int], object]"
#: ``make_readers(caches)``: a link's readers of every command, keeping ``caches``.
ReaderFactory: TypeAlias = "Callable[[dict[str, dict[bytes, object]]], dict[int, Reader]]"


class Code:
    """The source of one generated function, and the objects it names.

    Encodings emit lines through it. Reading, fixed-width fields are queued with
    :meth:`fixed` and read together by :meth:`flush` (one length check, one
    ``unpack_from``); code that needs their values calls :meth:`flush` first. Reading
    code sees ``data`` (the frame), ``n`` (its length), ``pos`` (the offset) and ``mb``
    (the body bound); writing code sees the writer's arguments and ``mb``.
    """

    def __init__(self, names: dict[str, object], caches: dict[str, int]) -> None:
        self.lines: list[str] = []
        self.names = names
        self.caches = caches
        self.depth = 1
        self._count = 0
        self._run: list[_Run] = []

    def const(self, value: object, hint: str = "k") -> str:
        """A name of the generated module that holds ``value``."""
        for name, held in self.names.items():
            if held is value:
                return name
        name = f"_{hint}{len(self.names)}"
        self.names[name] = value
        return name

    def var(self, hint: str = "v") -> str:
        """A fresh local variable."""
        self._count += 1
        return f"{hint}{self._count}"

    def cache(self, name: str, kept: int) -> str:
        """The local name of the link cache ``name``, bounded to ``kept`` entries."""
        self.caches.setdefault(name, kept)
        return f"cache_{name}"

    def emit(self, line: str) -> None:
        """Append one line at the current depth."""
        self.lines.append("    " * self.depth + line)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        """``header:`` and an indented body."""
        self.emit(header + ":")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def raise_if(self, test: str, error: str) -> None:
        """``if test: raise error``."""
        self.emit(f"if {test}:")
        self.emit(f"    raise {error}")

    def fixed(self, fmt: str, parts: tuple[tuple[str, int], ...],
              finish: Callable[[Code, list[str], int], str]) -> str:
        """Queue a fixed-width read; returns the variable that will hold its value.

        ``fmt`` is its :mod:`struct` format (no byte order), ``parts`` its (label,
        size) pieces for truncation errors, and ``finish(code, raws, offset)`` emits its
        checks and returns its value from the unpacked ``raws`` (``offset``: where it
        starts after ``pos``, for a cache key).
        """
        target = self.var("r")  # also the first unpacked value's variable
        self._run.append(_Run(fmt, parts, target, finish))
        return target

    def flush(self) -> None:
        """Read the queued fixed-width fields: one length check, one ``unpack_from``."""
        run, self._run = self._run, []
        if not run:
            return
        layout = struct.Struct(">" + "".join(item.fmt for item in run))
        parts = tuple(part for item in run for part in item.parts)
        self.raise_if(f"pos + {layout.size} > n",
                      f"_truncated(data, pos, {self.const(parts, 'parts')})")
        raws = [[item.target] + [self.var("r") for _ in range(_count(item.fmt) - 1)]
                for item in run]
        flat = [raw for item_raws in raws for raw in item_raws]
        if layout.format == ">B":
            self.emit(f"{flat[0]} = data[pos]")
        else:
            self.emit(f"{', '.join(flat)}, = {self.const(layout, 'S')}.unpack_from(data, pos)")
        offset = 0
        for item, item_raws in zip(run, raws, strict=True):
            value = item.finish(self, item_raws, offset)
            if value != item.target:
                self.emit(f"{item.target} = {value}")
            offset += struct.calcsize(">" + item.fmt)
        self.emit(f"pos += {layout.size}")


def _count(fmt: str) -> int:
    """How many values a :mod:`struct` format unpacks to."""
    return len(struct.unpack(">" + fmt, bytes(struct.calcsize(">" + fmt))))


def _build(code: Code, cls: type, values: Mapping[str, str], *, trusted: bool) -> str:
    """Emit the building of a ``cls`` from ``values`` (attribute -> expression).

    ``trusted``: without its validators (the reader checked every value), through each
    slot's own setter; else through its constructor.
    """
    target = code.var("o")
    if not trusted:  # its validators may refuse what the reader let through: the peer's fault
        args = ", ".join(f"{name}={value}" for name, value in values.items())
        with code.block("try"):
            code.emit(f"{target} = {code.const(cls, 'C')}({args})")
        with code.block("except (_InvalidOperation, _LocalProtocolError) as exc"):
            code.emit(f"raise _remote(f'invalid {cls.__name__}: {{exc}}') from exc")
        return target
    code.emit(f"{target} = _new({code.const(cls, 'C')})")
    if any(_CACHED_HASH in c.__dict__ for c in cls.__mro__):  # attrs(cache_hash=True)
        values = {**values, _CACHED_HASH: "None"}
    for name, value in values.items():
        slot = next(c.__dict__[name] for c in cls.__mro__ if name in c.__dict__)
        code.emit(f"{code.const(slot.__set__, 'set')}({target}, {value})")
    return target


#: The slot in which an ``attrs.frozen(cache_hash=True)`` instance keeps its hash.
_CACHED_HASH: Final = "_attrs_cached_hash"


def _packed(code: Code, piece: str) -> str:
    """A piece as one bytes expression (see :func:`_join`)."""
    return _join(code, [piece])


def _join(code: Code, pieces: Sequence[str]) -> str:
    """One bytes expression of ``pieces``.

    A piece is an expression of bytes, or ``@fmt:expr`` for a value still to be packed
    with :mod:`struct` format ``fmt``, or several of those on lines of their own.
    Adjacent values to pack share one ``pack``.
    """
    merged: list[str] = []
    fmt, args = "", []
    for piece in (*"\n".join(pieces).split("\n"), ""):
        if piece.startswith("@"):
            piece_fmt, _, value = piece[1:].partition(":")
            fmt += piece_fmt
            args.append(value)
            continue
        if fmt:
            merged.append(f"{code.const(struct.Struct('>' + fmt), 'S')}.pack({', '.join(args)})")
            fmt, args = "", []
        if piece:
            merged.append(piece)
    if len(merged) <= 3:  # for a few, + beats building a tuple to join
        return " + ".join(merged)
    return f"b''.join(({', '.join(merged)}))"


# --------------------------------------------------------------------------- encodings


class Encoding:
    """How one field's value becomes bytes and back.

    A subclass emits the writing and the reading code (:meth:`write`, :meth:`read`)
    and says what a value must be (:meth:`accepts`, :attr:`expected`) for the attrs
    validator of such a field (:meth:`validator`).
    """

    @property
    def size(self) -> int | None:
        """The fixed size in bytes, or ``None`` for a variable one."""
        return None

    @property
    def fmt(self) -> str | None:
        """The :mod:`struct` format of a fixed-width field (``None``: not one)."""
        return None

    @property
    def expected(self) -> str:
        """What a value must be, for :class:`LocalProtocolError` messages."""
        raise NotImplementedError

    def accepts(self, value: object) -> bool:
        """Whether this side may send ``value`` in such a field."""
        raise NotImplementedError

    def validator(self, instance: object, attribute: attrs.Attribute[T], value: T) -> None:
        """The attrs validator of a field with this encoding."""
        if not self.accepts(value):
            raise cannot_encode(attribute.name, value, self.expected)

    def write(self, code: Code, value: str, name: str) -> str:
        """Emit the checks of ``value``; return its bytes (or ``@fmt:expr`` to pack)."""
        raise NotImplementedError

    def finish(self, code: Code, raws: list[str], what: str) -> str:
        """A fixed-width field: emit the checks of its unpacked ``raws``; return its value."""
        return raws[0]

    def read(self, code: Code, what: str) -> str:
        """Emit the reading at ``pos`` (advancing it); return the value's expression.

        A fixed-width field is queued (:meth:`Code.fixed`) and finished by :meth:`finish`.
        """
        fmt, size = self.fmt, self.size
        assert fmt is not None
        assert size is not None
        return code.fixed(fmt, ((what, size),), lambda c, raws, offset: self.finish(c, raws, what))

    def span(self, code: Code, end: str) -> bool:
        """Emit code moving ``end`` past this field unread; ``False`` if it cannot.

        Finds the bytes of a cached value before it is read; ``end`` may pass ``n``.
        """
        if self.size is None:
            return False
        code.emit(f"{end} += {self.size}")
        return True


@attrs.frozen
class Int(Encoding):
    """An unsigned big-endian integer in ``lo..hi`` (on both sides)."""

    int_fmt: str
    lo: int
    hi: int
    what_it_is: str = ""
    #: The message of a peer's value out of range: ``refusal(label, value)``.
    refusal: Callable[[str, int], str] | None = None

    @property
    def fmt(self) -> str:
        return self.int_fmt

    @property
    def size(self) -> int:
        return struct.calcsize(">" + self.int_fmt)

    @property
    def expected(self) -> str:
        return self.what_it_is or f"an int in {self.lo}..{self.hi}"

    def accepts(self, value: object) -> bool:
        return type(value) is int and self.lo <= value <= self.hi

    def write(self, code: Code, value: str, name: str) -> str:
        code.raise_if(f"type({value}) is not int or not {self.lo} <= {value} <= {self.hi}",
                      f"_cannot({name!r}, {value}, {self.expected!r})")
        return f"@{self.int_fmt}:{value}"

    def finish(self, code: Code, raws: list[str], what: str) -> str:
        low, high = self.lo > 0, self.hi < _WIDEST[self.int_fmt]
        if low or high:
            test = (f"not {self.lo} <= {raws[0]} <= {self.hi}" if low and high
                    else f"{raws[0]} < {self.lo}" if low else f"{raws[0]} > {self.hi}")
            refusal = code.const(self.refusal or _range_refusal(self.lo, self.hi), "why")
            code.raise_if(test, f"_remote({refusal}({what!r}, {raws[0]}))")
        return raws[0]


#: ``u8``, ``u16``, ``u32``, ``u64``: any value of the width.
U8: Final = Int("B", 0, MAX_U8)
U16: Final = Int("H", 0, MAX_U16)
U32: Final = Int("I", 0, MAX_U32)
U64: Final = Int("Q", 0, MAX_U64)
#: ``gen``: 1..2**63-1 (generations, StoreVersions, descriptor versions).
GEN: Final = Int("Q", 1, MAX_GEN)
#: ``id``: 1..2**64-1 (operation IDs, request correlations; 0 is reserved).
ID: Final = Int("Q", 1, MAX_U64, f"an int in 1..{MAX_U64} (0 is reserved)")
#: ``ms``: milliseconds since the Unix epoch, 0..2**63-1 (a deadline is a ``gen``).
MS: Final = Int("Q", 0, MAX_GEN, f"milliseconds since the Unix epoch in 0..{MAX_GEN}")
#: ``gen`` holding a deadline: milliseconds since the Unix epoch, 1..2**63-1.
DEADLINE: Final = Int("Q", 1, MAX_GEN, f"milliseconds since the Unix epoch in 1..{MAX_GEN}")


class Fixed(Encoding):
    """A fixed-width field: its :mod:`struct` format (``FORMAT``) and what it holds."""

    FORMAT: ClassVar[str] = ""
    EXPECTED: ClassVar[str] = ""

    @property
    def fmt(self) -> str:
        return self.FORMAT

    @property
    def size(self) -> int:
        return struct.calcsize(">" + self.fmt)

    @property
    def expected(self) -> str:
        return self.EXPECTED


@attrs.frozen
class Flag(Fixed):
    """``flag``: a ``bool`` as a ``u8`` that is exactly 0 or 1."""

    FORMAT: ClassVar[str] = "B"
    EXPECTED: ClassVar[str] = "a bool"

    def accepts(self, value: object) -> bool:
        return type(value) is bool

    def write(self, code: Code, value: str, name: str) -> str:
        code.raise_if(f"type({value}) is not bool", f"_cannot({name!r}, {value}, 'a bool')")
        return f"@B:{value}"

    def finish(self, code: Code, raws: list[str], what: str) -> str:
        code.raise_if(f"{raws[0]} > 1", f"_remote(f'{what} must be 0 or 1, got {{{raws[0]}}}')")
        return f"{raws[0]} == 1"


FLAG: Final = Flag()


@attrs.frozen
class Enum8(Fixed):
    """An :class:`~enum.IntEnum` member as a ``u8``; a number that is no member is refused."""

    cls: type[IntEnum]

    FORMAT: ClassVar[str] = "B"

    @property
    def expected(self) -> str:
        return f"a {self.cls.__name__}"

    def accepts(self, value: object) -> bool:
        return isinstance(value, self.cls)

    def write(self, code: Code, value: str, name: str) -> str:
        code.raise_if(f"not isinstance({value}, {code.const(self.cls, 'C')})",
                      f"_cannot({name!r}, {value}, {self.expected!r})")
        return f"@B:{value}"

    def finish(self, code: Code, raws: list[str], what: str) -> str:
        members = {int(member): member for member in self.cls}
        known = ", ".join(f"{number} ({member.name.lower()})" for number, member in members.items())
        target = code.var("e")
        code.emit(f"{target} = {code.const(members, 'members')}.get({raws[0]})")
        code.raise_if(f"{target} is None",
                      f"_remote(f'unknown {what} {{{raws[0]}}}; known: {known}')")
        return target


@attrs.frozen
class Raw(Fixed):
    """Exactly ``length`` raw bytes (a nonce, a MAC)."""

    length: int

    @property
    def fmt(self) -> str:
        return f"{self.length}s"

    @property
    def expected(self) -> str:
        return f"exactly {self.length} bytes"

    def accepts(self, value: object) -> bool:
        return type(value) is bytes and len(value) == self.length

    def write(self, code: Code, value: str, name: str) -> str:
        code.raise_if(f"type({value}) is not bytes or len({value}) != {self.length}",
                      f"_cannot({name!r}, {value}, {self.expected!r})")
        return f"@{self.length}s:{value}"


@attrs.frozen
class Rid(Fixed):
    """``rid``: a :class:`NodeRid`, 16 raw bytes that are never all zero."""

    FORMAT: ClassVar[str] = "16s"
    EXPECTED: ClassVar[str] = "a NodeRid"

    def accepts(self, value: object) -> bool:
        return isinstance(value, NodeRid)

    def write(self, code: Code, value: str, name: str) -> str:
        code.raise_if(f"not isinstance({value}, {code.const(NodeRid, 'C')})",
                      f"_cannot({name!r}, {value}, 'a NodeRid')")
        return f"@16s:{value}.value"

    def finish(self, code: Code, raws: list[str], what: str) -> str:
        code.raise_if(f"{raws[0]} == _ZERO_RID",
                      f"_remote({what + ' is the all-zero rid, which means absent'!r})")
        return _build(code, NodeRid, {"value": raws[0]}, trusted=True)


RID: Final = Rid()


@attrs.frozen
class Sha256(Fixed):
    """A SHA-256 digest: 64 lowercase hex digits in Python, 32 raw bytes on the wire."""

    FORMAT: ClassVar[str] = f"{SHA256_BYTES}s"
    EXPECTED: ClassVar[str] = "64 hex digits"

    def accepts(self, value: object) -> bool:
        try:
            return isinstance(value, str) and len(bytes.fromhex(value)) == SHA256_BYTES
        except ValueError:
            return False

    def write(self, code: Code, value: str, name: str) -> str:
        code.raise_if(f"not {code.const(self.accepts, 'ok')}({value})",
                      f"_cannot({name!r}, {value}, {self.expected!r})")
        return f"@{SHA256_BYTES}s:bytes.fromhex({value})"

    def finish(self, code: Code, raws: list[str], what: str) -> str:
        return f"{raws[0]}.hex()"


@attrs.frozen
class Text(Encoding):
    """``text8`` (1..255 bytes), ``optional-text8`` (length 0: ``None``) or ``text16``.

    ``cached``: a link keeps that many decoded values by their UTF-8 bytes (0: none).
    """

    wide: bool = False
    optional: bool = False
    cached: int = 0

    @property
    def expected(self) -> str:
        if self.wide:
            return f"a str of at most {MAX_TEXT16_BYTES} UTF-8 bytes"
        return f"a str of 1..{MAX_ID_BYTES} UTF-8 bytes" + (" or None" if self.optional else "")

    def accepts(self, value: object) -> bool:
        if self.optional and value is None:
            return True
        return (_text16_bytes if self.wide else text8_bytes)(value) is not None

    def write(self, code: Code, value: str, name: str) -> str:
        target = code.var("t")
        if self.wide:
            code.emit(f"{target} = _text16({value})")
        elif self.optional:
            with code.block(f"if {value} is None"):
                code.emit(f"{target} = b'\\x00'")
            with code.block("else"):
                _emit_text8(code, value, target)
        else:
            _emit_text8(code, value, target)
        code.raise_if(f"{target} is None", f"_cannot({name!r}, {value}, {self.expected!r})")
        return target

    def span(self, code: Code, end: str) -> bool:
        if self.wide:
            return False
        code.emit(f"{end} = {end} + 1 + data[{end}] if {end} < n else n + 1")
        return True

    def read(self, code: Code, what: str) -> str:
        code.flush()
        head = 2 if self.wide else 1
        size, end, value = code.var("size"), code.var("end"), code.var("t")
        code.raise_if(f"pos + {head} > n",
                      f"_truncated(data, pos, {((what + ' length', head),)!r})")
        code.emit(f"{size} = " + ("_U16.unpack_from(data, pos)[0]" if self.wide else "data[pos]"))
        if not (self.wide or self.optional):
            code.raise_if(f"{size} == 0", f"_remote({_empty_text(what)!r})")
        code.emit(f"{end} = pos + {head} + {size}")
        code.raise_if(f"{end} > n", f"_truncated(data, pos + {head}, (({what!r}, {size}),))")
        raw = f"data[pos + {head}:{end}]"
        if self.optional:
            code.emit(f"{value} = None")
            with code.block(f"if {size}"):
                self._decode(code, value, raw, what)
        else:
            self._decode(code, value, raw, what)
        code.emit(f"pos = {end}")
        return value

    def _decode(self, code: Code, value: str, raw: str, what: str) -> None:
        if not self.cached:
            self._utf8(code, value, raw, what)
            return
        cache, key = code.cache("texts", self.cached), code.var("key")
        code.emit(f"{key} = {raw}")
        code.emit(f"{value} = {cache}.get({key})")
        with code.block(f"if {value} is None"):
            self._utf8(code, value, key, what)
            _remember(code, cache, self.cached, key, value)

    def _utf8(self, code: Code, value: str, raw: str, what: str) -> None:
        with code.block("try"):
            code.emit(f"{value} = {raw}.decode('utf-8')")
        with code.block("except UnicodeDecodeError as exc"):
            code.emit(f"raise _not_utf8({what!r}, exc) from None")


def _empty_text(what: str) -> str:
    return f"{what} is empty; it must be 1..{MAX_ID_BYTES} bytes"


def _remember(code: Code, cache: str, kept: int, key: str, value: str) -> None:
    """Emit: keep ``value`` by ``key`` in ``cache``, emptied first when it holds ``kept``."""
    code.emit(f"if len({cache}) >= {kept}:")
    code.emit(f"    {cache}.clear()")
    code.emit(f"{cache}[{key}] = {value}")


#: ``text8``: ``u8`` length 1..255 + UTF-8.
TEXT8: Final = Text()
#: ``optional-text8``: ``text8`` where length 0 means ``None``.
OPTIONAL_TEXT8: Final = Text(optional=True)
#: ``text16``: ``u16`` length 0..65535 + UTF-8.
TEXT16: Final = Text(wide=True)


@attrs.frozen
class Blob32(Encoding):
    """``blob32``: ``u32`` length + raw bytes, at most ``cap`` (``None``: the body bound)."""

    cap: int | None = None

    @property
    def expected(self) -> str:
        return "bytes" if self.cap is None else f"bytes of at most {self.cap} bytes"

    def accepts(self, value: object) -> bool:
        return type(value) is bytes and len(value) <= (self.cap or MAX_U32)

    def write(self, code: Code, value: str, name: str) -> str:
        code.raise_if(f"type({value}) is not bytes or len({value}) > {self.cap or MAX_U32}",
                      f"_cannot({name!r}, {value}, {self.expected!r})")
        return f"@I:len({value})\n{value}"

    def read(self, code: Code, what: str) -> str:
        code.flush()
        size, end, value = code.var("size"), code.var("end"), code.var("b")
        cap = "mb" if self.cap is None else str(self.cap)
        code.raise_if("pos + 4 > n", f"_truncated(data, pos, {((what + ' length', 4),)!r})")
        code.emit(f"{size} = _U32.unpack_from(data, pos)[0]")
        code.raise_if(f"{size} > {cap}",
                      f"_remote(f'{what} is {{{size}}} bytes, above the {{{cap}}}-byte limit')")
        code.emit(f"{end} = pos + 4 + {size}")
        code.raise_if(f"{end} > n", f"_truncated(data, pos + 4, (({what!r}, {size}),))")
        code.emit(f"{value} = data[pos + 4:{end}]")
        code.emit(f"pos = {end}")
        return value


BLOB32: Final = Blob32()


@attrs.frozen
class Payload(Encoding):
    """``payload``: an :class:`EncodedMessage`, ``text8`` type name + ``blob32`` body.

    The body is bounded by the body bound both ways; a link keeps the type names.
    """

    @property
    def expected(self) -> str:
        return _PAYLOAD_EXPECTED

    def accepts(self, value: object) -> bool:
        return (isinstance(value, EncodedMessage) and text8_bytes(value.type_name) is not None
                and type(value.body) is bytes and len(value.body) <= MAX_U32)

    def write(self, code: Code, value: str, name: str) -> str:
        head, body = code.var("t"), code.var("b")
        code.raise_if(f"not isinstance({value}, {code.const(EncodedMessage, 'C')})",
                      f"_cannot({name!r}, {value}, {self.expected!r})")
        _emit_text8(code, f"{value}.type_name", head)
        code.emit(f"{body} = {value}.body")
        code.raise_if(f"{head} is None or type({body}) is not bytes or len({body}) > {MAX_U32}",
                      f"_cannot({name!r}, {value}, {self.expected!r})")
        code.raise_if(f"len({body}) > mb", f"_body_above({value}, mb)")
        return f"{head}\n@I:len({body})\n{body}"

    def read(self, code: Code, what: str) -> str:
        type_name = Text(cached=1024).read(code, f"{what} type name")
        body = BLOB32.read(code, f"{what} body")
        return _build(code, EncodedMessage, {"type_name": type_name, "body": body}, trusted=True)


PAYLOAD: Final = Payload()


@attrs.frozen
class Optional(Encoding):
    """A ``flag``, then the ``inner`` encoding if it is 1; ``None`` if it is 0."""

    inner: Encoding

    @property
    def expected(self) -> str:
        return f"None or {self.inner.expected}"

    def accepts(self, value: object) -> bool:
        return value is None or self.inner.accepts(value)

    def write(self, code: Code, value: str, name: str) -> str:
        target = code.var("p")
        with code.block(f"if {value} is None"):
            code.emit(f"{target} = b'\\x00'")
        with code.block("else"):
            code.emit(f"{target} = b'\\x01' + {_packed(code, self.inner.write(code, value, name))}")
        return target

    def read(self, code: Code, what: str) -> str:
        flag = FLAG.read(code, f"{what} flag")
        code.flush()
        target = code.var("p")
        code.emit(f"{target} = None")
        with code.block(f"if {flag}"):
            inner = self.inner.read(code, what)
            code.flush()
            code.emit(f"{target} = {inner}")
        return target


#: ``optional-payload``.
OPTIONAL_PAYLOAD: Final = Optional(PAYLOAD)


# --------------------------------------------------------------------------- layouts


@attrs.frozen
class Check:
    """A rule between fields, run as soon as the field that carries it is read.

    ``refusal(*values of names)`` returns ``None``, or what is wrong (the message of
    a :class:`RemoteProtocolError`). The constructor states the same rule for this side.
    """

    names: tuple[str, ...]
    #: ``refusal(*values) -> str | None``, called with the values of ``names``.
    refusal: object = attrs.field(validator=attrs.validators.is_callable())


@attrs.frozen
class WireField:
    """How one attribute travels: its encoding, error label, slot and rule."""

    encoding: Encoding
    label: str
    #: The writer takes this field's bytes pre-encoded too (:attr:`CompiledFrames.slots`).
    slot: bool = False
    check: Check | None = None


_WIRE: Final = "zlink_trio.wire"


def wire(encoding: Encoding, label: str, *, slot: bool = False,
         check: Check | None = None) -> dict[str, object]:
    """The attrs ``metadata`` of a field that travels with ``encoding``, labelled ``label``."""
    return {_WIRE: WireField(encoding, label, slot, check)}


@attrs.frozen
class Layout:
    """A class's fields in wire order, and how a reader builds one."""

    cls: type
    fields: tuple[tuple[str, WireField], ...]
    #: Build without validators (the reader checked every value the validators check).
    trusted: bool = True
    #: A link keeps this many decoded values by their bytes (0: none).
    cached: int = 0

    @property
    def size(self) -> int | None:
        """The fixed size of the layout, or ``None``."""
        sizes = [field.encoding.size for _, field in self.fields]
        return None if None in sizes else sum(s for s in sizes if s is not None)


def layout_of(cls: type, *, cached: int = 0) -> Layout:
    """The layout ``cls`` declares with :func:`wire` metadata, in attrs field order.

    A field without it must be carried by another's encoding (:class:`Carrier`).
    """
    fields = [(a.name, a.metadata[_WIRE]) for a in attrs.fields(cls) if _WIRE in a.metadata]
    carried = {name for _, field in fields if isinstance(field.encoding, Carrier)
               for name in field.encoding.carries}
    loose = {a.name for a in attrs.fields(cls)} - carried - {name for name, _ in fields}
    assert not loose, f"{cls.__name__} fields {sorted(loose)} are not on the wire"
    return Layout(cls, tuple(fields), cached=cached)


class Carrier(Encoding):
    """An encoding that also carries other attributes (``carries``, before its own).

    Its :meth:`write_all` gets all their values, its :meth:`read_all` returns them all.
    """

    carries: tuple[str, ...] = ()

    def write_all(self, code: Code, values: Sequence[str], name: str) -> str:
        """Emit the checks of ``values`` (``carries`` then this field); return the bytes."""
        raise NotImplementedError

    def read_all(self, code: Code, what: str) -> tuple[str, ...]:
        """Emit the reading; return the values of ``carries`` then this field."""
        raise NotImplementedError


@attrs.frozen
class Composite(Encoding):
    """A value whose class is itself a :class:`Layout` (an owner fence, a SpotRef, ...).

    Written field by field by its layout's writer; read and built, and kept per link
    by its bytes when the layout is ``cached``.
    """

    layout: Layout

    @property
    def size(self) -> int | None:
        return self.layout.size

    @property
    def expected(self) -> str:
        return _an(self.layout.cls.__name__)

    def accepts(self, value: object) -> bool:
        return isinstance(value, self.layout.cls)

    def write(self, code: Code, value: str, name: str) -> str:
        code.raise_if(f"not isinstance({value}, {code.const(self.layout.cls, 'C')})",
                      f"_cannot({name!r}, {value}, {self.expected!r})")
        writer = code.const(_writer(code.names, self.layout, b""), "write")
        args = ", ".join(f"{value}.{a.name}" for a in attrs.fields(self.layout.cls))
        return f"{writer}({args}, mb)"

    def read(self, code: Code, what: str) -> str:
        layout = self.layout
        if not layout.cached:
            return _read_fields(code, layout, what)
        if layout.size is None:
            return self._read_variable_cached(code, what)
        fmt = "".join(field.encoding.fmt or "" for _, field in layout.fields)
        parts = tuple((_label(what, field.label), field.encoding.size or 0)
                      for _, field in layout.fields)
        return code.fixed(fmt, parts,
                          lambda c, raws, offset: self._finish_cached(c, raws, offset, what))

    def _finish_cached(self, code: Code, raws: list[str], offset: int, what: str) -> str:
        layout = self.layout
        cache = code.cache(layout.cls.__name__, layout.cached)
        key, value = code.var("key"), code.var("c")
        code.emit(f"{key} = data[pos + {offset}:pos + {offset + (layout.size or 0)}]")
        code.emit(f"{value} = {cache}.get({key})")
        with code.block(f"if {value} is None"):
            values, used = {}, 0
            for name, field in layout.fields:
                count = _count(field.encoding.fmt or "")
                values[name] = field.encoding.finish(code, raws[used:used + count],
                                                     _label(what, field.label))
                used += count
            built = _build(code, layout.cls, values, trusted=layout.trusted)
            _remember(code, cache, layout.cached, key, built)
            code.emit(f"{value} = {built}")
        return value

    def _read_variable_cached(self, code: Code, what: str) -> str:
        layout = self.layout
        code.flush()
        cache = code.cache(layout.cls.__name__, layout.cached)
        end, key, value = code.var("end"), code.var("key"), code.var("c")
        code.emit(f"{end} = pos")
        for _, field in layout.fields:
            assert field.encoding.span(code, end), f"{layout.cls.__name__} cannot be cached"
        code.emit(f"{key} = data[pos:{end}] if {end} <= n else None")
        code.emit(f"{value} = {cache}.get({key})")
        with code.block(f"if {value} is None"):
            built = _read_fields(code, layout, what)
            code.emit(f"{value} = {built}")
            with code.block(f"if {key} is not None"):
                _remember(code, cache, layout.cached, key, value)
        with code.block("else"):
            code.emit(f"pos = {end}")
        return value


def _an(name: str) -> str:
    return ("an " if name[0] in "AEIOU" else "a ") + name


def _label(what: str, label: str) -> str:
    return f"{what} {label}" if what else label


@attrs.frozen
class Union(Encoding):
    """A ``u8`` tag (an :class:`~enum.IntEnum`), then the layout of the variant it names."""

    tag_label: str
    #: Tag -> the layout of its variant.
    variants: Mapping[IntEnum, Layout]

    @property
    def expected(self) -> str:
        names = [_an(layout.cls.__name__) for layout in self.variants.values()]
        return ", ".join(names[:-1]) + " or " + names[-1]

    def accepts(self, value: object) -> bool:
        return isinstance(value, tuple(layout.cls for layout in self.variants.values()))

    def write(self, code: Code, value: str, name: str) -> str:
        writers = {layout.cls: instance_writer(code.names, bytes((tag,)), layout)
                   for tag, layout in self.variants.items()}
        target = code.var("u")
        code.emit(f"{target} = {code.const(writers, 'variants')}.get(type({value}))")
        code.raise_if(f"{target} is None", f"_cannot({name!r}, {value}, {self.expected!r})")
        return f"{target}({value}, mb)"

    def read(self, code: Code, what: str) -> str:
        tag = U8.read(code, self.tag_label)
        code.flush()
        target = code.var("u")
        keyword = "if"
        for number, layout in self.variants.items():
            with code.block(f"{keyword} {tag} == {int(number)}"):
                code.emit(f"{target} = {Composite(layout).read(code, '')}")
                code.flush()
            keyword = "elif"
        known = ", ".join(f"{int(tag)} ({tag.name.lower()})" for tag in self.variants)
        with code.block("else"):
            code.emit(f"raise _remote(f'unknown {self.tag_label} {{{tag}}}; known: {known}')")
        return target


def instance_writer(names: dict[str, object], prefix: bytes, layout: Layout
                    ) -> InstanceWriter:
    """``write(instance, mb)``: ``prefix`` (its tag), then its layout's writer of its fields.

    Compiled once per generated module ``names``.
    """
    made = names.setdefault(_INSTANCE_WRITERS, {})
    assert isinstance(made, dict)
    if layout.cls not in made:
        fields = Code(names, {}).const(_writer(names, layout, prefix), "write")
        args = ", ".join(f"value.{a.name}" for a in attrs.fields(layout.cls))
        made[layout.cls] = _function(names, f"write_{layout.cls.__name__}_instance",
                                     "value, mb", [f"    return {fields}({args}, mb)"])
    return cast("InstanceWriter", made[layout.cls])


#: The key of a generated module's instance writers: class -> writer.
_INSTANCE_WRITERS: Final = "__instance_writers__"


# --------------------------------------------------------------------------- compiling


_PRELUDE: Final[dict[str, object]] = {
    "_new": object.__new__,
    "_InvalidOperation": InvalidOperation,
    "_LocalProtocolError": LocalProtocolError,
    "_cannot": cannot_encode,
    "_remote": RemoteProtocolError,
    "_truncated": _truncated,
    "_not_utf8": _not_utf8,
    "_U8_BYTES": _U8_BYTES,
    "_text16": _text16_bytes,
    "_body_above": _body_above,
    "_ZERO_RID": _ZERO_RID,
    "_U16": _U16,
    "_U32": _U32,
    "MAX_BODY_BYTES": MAX_BODY_BYTES,
}


def _function(names: dict[str, object], name: str, signature: str,
              body: Sequence[str]) -> object:
    """Compile ``def name(signature): body`` in the generated module ``names``."""
    source = f"def {name}({signature}):\n" + "\n".join(body) + "\n"
    filename = f"<zlink_trio.wire generated {name} {len(linecache.cache)}>"
    # As attrs does: tracebacks through generated code show its lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope: dict[str, object] = {}
    exec(compile(source, filename, "exec"), names, scope)
    return scope[name]


def _writer(names: dict[str, object], layout: Layout, prefix: bytes) -> Writer:
    """The one writer of ``layout``'s class: ``prefix``, then its fields, each checked.

    Compiled once per generated module ``names``, which keeps it in :data:`_WRITERS`.
    """
    writers = names.setdefault(_WRITERS, {})
    assert isinstance(writers, dict)
    known = writers.get(layout.cls)
    if known is not None:
        assert known[0] == prefix, f"{layout.cls.__name__} has one prefix"
        return cast("Writer", known[1])
    code = Code(names, {})
    pieces: list[str] = [code.const(prefix, "head")] if prefix else []
    for name, field in layout.fields:
        if field.slot:  # pre-encoded bytes are written as they are
            target = code.var("s")
            with code.block(f"if type({name}) is bytes"):
                code.emit(f"{target} = {name}")
            with code.block("else"):
                code.emit(f"{target} = {_packed(code, _write_field(code, field, name))}")
            pieces.append(target)
        else:
            pieces.append(_write_field(code, field, name))
    code.emit(f"return {_join(code, pieces)}")
    params = [a.name for a in attrs.fields(layout.cls)]
    writer = cast("Writer", _function(names, f"write_{layout.cls.__name__}",
                                      ", ".join(params) + ", mb=MAX_BODY_BYTES", code.lines))
    writers[layout.cls] = (prefix, writer)
    return writer


#: The key of a generated module's writers: class -> (prefix, writer).
_WRITERS: Final = "__writers__"


def _write_field(code: Code, field: WireField, name: str) -> str:
    """Emit the checks of argument ``name`` (and those it carries); return its piece."""
    encoding = field.encoding
    if isinstance(encoding, Carrier):
        return encoding.write_all(code, (*encoding.carries, name), name)
    return encoding.write(code, name, name)


def _read_fields(code: Code, layout: Layout, what: str) -> str:
    """Emit the reading of ``layout``'s fields from ``pos``; return the built value."""
    values: dict[str, str] = {}
    for name, field in layout.fields:
        label = _label(what, field.label)
        encoding = field.encoding
        if isinstance(encoding, Carrier):
            values.update(zip((*encoding.carries, name), encoding.read_all(code, label),
                              strict=True))
        else:
            values[name] = encoding.read(code, label)
        if field.check is not None:
            code.flush()
            why = code.var("why")
            args = ", ".join(values[n] for n in field.check.names)
            code.emit(f"{why} = {code.const(field.check.refusal, 'rule')}({args})")
            code.raise_if(f"{why} is not None", f"_remote({why})")
    code.flush()
    ordered = {a.name: values[a.name] for a in attrs.fields(layout.cls)}
    return _build(code, layout.cls, ordered, trusted=layout.trusted)


@attrs.frozen
class CompiledFrames:
    """What :func:`compile_frames` makes of a table of frame classes."""

    #: Command -> its writer: the class's fields (attrs order), then ``mb``.
    writers: Mapping[int, Writer]
    #: Class of a frame, route or outcome -> its writer (a route's and a success
    #: outcome's start with their tag: the bytes their frame's writer takes pre-encoded).
    writers_by_class: Mapping[type, Writer]
    #: Frame class -> ``write(frame, mb)``: its command's writer of the frame's fields.
    frame_writers: Mapping[type, InstanceWriter]
    #: (command, field) of every slot -> ``pre_encode(value, mb)``, the bytes its writer
    #: takes for that field as they are.
    slots: Mapping[tuple[int, str], Writer]
    #: ``make_readers(caches)`` -> command -> reader (see :class:`Readers`).
    make_readers: ReaderFactory
    #: Link cache name -> its bound.
    caches: Mapping[str, int]


def compile_frames(header: bytes, table: Mapping[int, type]) -> CompiledFrames:
    """Compile the frame classes of ``table`` (command -> class); frames start ``header``."""
    names = dict(_PRELUDE)
    layouts = {command: layout_of(cls) for command, cls in table.items()}
    writers = {command: _writer(names, layout, header + bytes((command,)))
               for command, layout in layouts.items()}
    frame_writers = {layout.cls: instance_writer(names, header + bytes((command,)), layout)
                     for command, layout in layouts.items()}
    slots = {(command, name): _slot_writer(names, field, name)
             for command, layout in layouts.items()
             for name, field in layout.fields if field.slot}
    caches: dict[str, int] = {}
    functions: list[str] = []
    for command, layout in layouts.items():
        code = Code(names, caches)
        code.depth = 2
        code.emit("n = len(data)")
        code.emit("pos = 4")
        value = _read_fields(code, layout, "")
        code.raise_if("pos != n", "_remote(f\"{n - pos} trailing bytes after the frame's last "
                                  "field at offset {pos}\")")
        code.emit(f"return {value}")
        functions.append(f"    def read_{command}(data, mb):\n" + "\n".join(code.lines))
    body = [f"    cache_{name} = caches[{name!r}]" for name in caches]
    body.extend(functions)
    body.append("    return {" + ", ".join(f"{c}: read_{c}" for c in layouts) + "}")
    make_readers = cast("ReaderFactory", _function(names, "make_readers", "caches", body))
    by_class = names[_WRITERS]
    assert isinstance(by_class, dict)
    return CompiledFrames(writers, {cls: writer for cls, (_, writer) in by_class.items()},
                          frame_writers, slots, make_readers,
                          dict(caches))


def _slot_writer(names: dict[str, object], field: WireField, name: str) -> Writer:
    """``pre_encode(value, mb)`` (or, for a :class:`Carrier`, its carried values first)."""
    code = Code(names, {})
    encoding = field.encoding
    if isinstance(encoding, Carrier):
        params = [*encoding.carries, name]
        piece = encoding.write_all(code, params, name)
    else:
        params = [name]
        piece = encoding.write(code, name, name)
    code.emit(f"return {_packed(code, piece)}")
    return cast("Writer", _function(names, f"pre_encode_{name}",
                                    ", ".join(params) + ", mb=MAX_BODY_BYTES", code.lines))


def _compile_text8_bytes() -> Callable[[object], bytes | None]:
    code = Code(dict(_PRELUDE), {})
    _emit_text8(code, "value", "text")
    code.emit("return text")
    return cast("Callable[[object], bytes | None]",
                _function(code.names, "text8_bytes", "value", code.lines))


#: ``text8_bytes(value)``: ``value`` as ``text8`` (``u8`` length + UTF-8), or ``None``
#: if it cannot be one -- the rule of :func:`_emit_text8`, which the writers inline.
text8_bytes: Final = _compile_text8_bytes()


class Readers:
    """One link's reader of every command, and the caches they keep (module docstring)."""

    __slots__ = ("by_command", "caches")

    def __init__(self, compiled: CompiledFrames) -> None:
        #: Cache name -> its entries (bounded: emptied when full).
        self.caches: dict[str, dict[bytes, object]] = {name: {} for name in compiled.caches}
        #: Command -> ``read(data, max_body_bytes)``.
        self.by_command = compiled.make_readers(self.caches)


# --------------------------------------------------------------------------- core values


#: ``owner``: ``rid`` + ``gen``, an :class:`OwnerFence` (a link keeps the ones it sees).
OWNER: Final = Composite(Layout(OwnerFence, (
    ("node_rid", WireField(RID, "node rid")),
    ("lifecycle_generation", WireField(GEN, "lifecycle generation")),
), cached=256))
#: ``spotref``: ``text8`` Spot ID, ``gen`` generation, ``text8`` mesh, ``rid`` node.
SPOT_REF: Final = Composite(Layout(SpotRef, (
    ("spot_id", WireField(TEXT8, "Spot ID")),
    ("generation", WireField(GEN, "generation")),
    ("mesh", WireField(TEXT8, "mesh")),
    ("node_rid", WireField(RID, "node rid")),
), trusted=False))


def _root_too_big(what: str, size: int) -> str:
    return f"{what} is {size} bytes, above the {MAX_ROOT_BYTES}-byte root limit"


#: ``root``: ``text8`` ref, 32 raw bytes of SHA-256, ``u64`` size of at most 64 MiB.
ROOT: Final = Composite(Layout(RootReceipt, (
    ("ref", WireField(TEXT8, "ref")),
    ("sha256", WireField(Sha256(), "SHA-256")),
    ("size", WireField(Int("Q", 0, MAX_ROOT_BYTES, refusal=_root_too_big), "size")),
), trusted=False))

"""RESP2 framing for the store's own connections: commands out, replies in.

Theory of operation
-------------------
:func:`encode_command` writes one command as a RESP array of bulk strings (with
hiredis's C packer where it is installed, see below; :func:`python_encode_command` is
the rule); :func:`encode_args` writes only the bulk strings. :class:`Reader`
parses replies incrementally from one connection's byte stream: :meth:`Reader.reply`
returns the next whole reply or raises :class:`NeedMore` with the position unchanged;
an error reply is *returned* as a :class:`ReplyError` (:class:`NoScriptError` for
``NOSCRIPT``: the class of a ``ReplyError`` is chosen by its text as it is made) for the
caller to raise; a reply this parser cannot read is :class:`StoreUnavailable` (the
connection is out of step: reconnect). Arrays of bulk strings, the common reply (a
hash's fields and values), are parsed inline.

**hiredis.** When the C parser of the hiredis package is installed (the ``redis``
extra; ``.[test]`` too), :func:`new_reader` gives a :class:`HiredisReader` -- the same
interface and the same replies as :class:`Reader`, about ten times faster (a Redis
Cluster activation spent a sixth of its CPU parsing replies; docs/performance.md) --
and :class:`Reader` otherwise, so nothing else changes without it. Likewise
:func:`encode_command` packs with ``hiredis.pack_command`` (a script's call of 20
arguments: 3.4 → 1.2 µs). ``tests/store/test_redis_pipeline.py`` feeds both parsers
the same generated replies, cut anywhere, and compares what they return, and both
encoders the same generated commands.

:class:`ReplyError` and :class:`NoScriptError` never leave the store: the runners
(``client.ScriptRunner``, ``redis_cluster.runner.ClusterRunner``) answer ``NOSCRIPT`` by
loading the script, the cluster's router follows ``MOVED`` / ``ASK`` / ``TRYAGAIN``, and
every other error reply becomes :class:`StoreUnavailable` chained with ``from``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from zlink_trio.core.errors import StoreUnavailable

try:
    import hiredis
except ImportError:  # the pure-Python Reader parses alone (module docstring)
    hiredis = None  # type: ignore[assignment]

#: hiredis's command packer (``None`` without hiredis): see :func:`encode_command`.
_pack: Callable[[tuple[str | int | bytes, ...]], bytes] | None = (
    None if hiredis is None else cast("Callable[[tuple[str | int | bytes, ...]], bytes]",
                                      hiredis.pack_command))

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ("HiredisReader", "NeedMore", "NoScriptError", "Reader", "ReplyError",
           "ReplyReader", "encode_args", "encode_command", "new_reader",
           "python_encode_command")

_BULK: Final = ord("$")
_ARRAY: Final = ord("*")
_INT: Final = ord(":")
_STATUS: Final = ord("+")
_ERROR: Final = ord("-")


def encode_command(args: Sequence[str | int | bytes]) -> bytes:
    """One command as a RESP array of bulk strings (hiredis's packer where it is
    installed: the same bytes for what the stores pass -- ``str``, ``bytes``, ``int`` --
    in a third of the time; :func:`python_encode_command` is the rule, and the one used
    for an argument hiredis does not take, such as an ``IntEnum`` or a ``bool``)."""
    if _pack is not None:
        try:
            return _pack(args if type(args) is tuple else tuple(args))
        except TypeError:  # a type only the rule encodes (exact str, bytes, int for C)
            pass
    return python_encode_command(args)


def python_encode_command(args: Sequence[str | int | bytes]) -> bytes:
    """:func:`encode_command` in pure Python: the encoding's rule (``str`` as UTF-8,
    ``bytes`` as they are, anything else as its ``str`` in ASCII)."""
    return b"*%d\r\n%b" % (len(args), encode_args(args))


def encode_args(args: Sequence[str | int | bytes]) -> bytes:
    """The bulk strings of ``args``, without the array header (a frame's tail or body)."""
    parts: list[bytes] = []
    append = parts.append
    for arg in args:
        kind = type(arg)  # exact types first: a cheaper test than isinstance, per item
        if kind is str:
            raw = arg.encode()  # type: ignore[union-attr]
        elif kind is bytes:
            raw = arg
        else:
            raw = (arg.encode() if isinstance(arg, str) else arg if isinstance(arg, bytes)
                   else str(arg).encode("ascii"))
        append(b"$%d\r\n%b\r\n" % (len(raw), raw))
    return b"".join(parts)


class NeedMore(Exception):
    """Internal: the buffer ends inside a reply."""


class ReplyError(Exception):
    """Redis answered a command with an error reply (``-ERR ...``, ``-MOVED ...``).

    Its message is the reply's text without the leading ``-``, so its first word is the
    error's kind (``MOVED``, ``ASK``, ``TRYAGAIN``, ``BUSY``, ...). Internal to the Redis
    backends (see the module docstring): it never reaches a store's caller.
    ``ReplyError(text)`` of a ``NOSCRIPT`` text is a :class:`NoScriptError` (both parsers
    make their error replies this way).
    """

    def __new__(cls, *args: object) -> ReplyError:
        if cls is ReplyError and args and str(args[0]).startswith("NOSCRIPT"):
            cls = NoScriptError
        return super().__new__(cls, *args)


class NoScriptError(ReplyError):
    """``NOSCRIPT``: the server does not hold the script an ``EVALSHA`` named (restarted,
    ``SCRIPT FLUSH``, a fresh replica); the command did nothing, so loading the script
    and sending it again is safe."""


class Reader:
    """Incremental RESP2 reply parser over one connection's byte stream."""

    def __init__(self) -> None:
        self.buf = b""
        self.pos = 0

    def feed(self, data: bytes) -> None:
        self.buf = self.buf[self.pos:] + data
        self.pos = 0

    def reply(self) -> Any:
        """The next whole reply (errors are returned as exceptions); :class:`NeedMore`."""
        start = self.pos
        try:
            return self._parse()
        except NeedMore:
            self.pos = start
            raise

    def _parse(self) -> Any:
        buf = self.buf
        pos = self.pos
        end = buf.find(b"\r\n", pos)
        if end < 0:
            raise NeedMore
        kind = buf[pos]
        if kind == _BULK:
            size = int(buf[pos + 1:end])
            if size < 0:
                self.pos = end + 2
                return None
            start = end + 2
            stop = start + size
            if len(buf) < stop + 2:
                raise NeedMore
            self.pos = stop + 2
            return buf[start:stop]
        if kind == _ARRAY:
            count = int(buf[pos + 1:end])
            self.pos = end + 2
            if count < 0:
                return None
            out: list[Any] = []
            append = out.append
            find = buf.find
            size_of = len(buf)
            for _ in range(count):
                # Inline the common element, a bulk string (a hash's fields and values).
                pos = self.pos
                if pos < size_of and buf[pos] == _BULK:
                    end = find(b"\r\n", pos)
                    if end < 0:
                        raise NeedMore
                    size = int(buf[pos + 1:end])
                    if size < 0:
                        self.pos = end + 2
                        append(None)
                        continue
                    start = end + 2
                    stop = start + size
                    if size_of < stop + 2:
                        raise NeedMore
                    self.pos = stop + 2
                    append(buf[start:stop])
                else:
                    append(self._parse())
            return out
        rest = buf[pos + 1:end]
        self.pos = end + 2
        if kind == _INT:
            return int(rest)
        if kind == _STATUS:
            return rest
        if kind == _ERROR:
            return ReplyError(rest.decode("utf-8", "replace"))
        raise StoreUnavailable(f"Redis sent an unknown reply type {bytes([kind])!r}; "
                               "reconnecting")


class ReplyReader(Protocol):
    """What :func:`new_reader` gives: :class:`Reader`'s interface."""

    def feed(self, data: bytes) -> None: ...

    def reply(self) -> Any: ...


class HiredisReader:
    """:class:`Reader`'s interface and replies, parsed by hiredis's C reader."""

    __slots__ = ("_reader",)

    def __init__(self) -> None:
        assert hiredis is not None
        self._reader = hiredis.Reader(replyError=ReplyError, notEnoughData=NeedMore)

    def feed(self, data: bytes) -> None:
        self._reader.feed(data)

    def reply(self) -> Any:
        """The next whole reply (errors are returned as exceptions); :class:`NeedMore`."""
        try:
            value = self._reader.gets()
        except hiredis.ProtocolError as error:
            raise StoreUnavailable(f"Redis sent a reply that is not RESP2 ({error}); "
                                   "reconnecting") from None
        if value is NeedMore:
            raise NeedMore
        return value


def new_reader() -> ReplyReader:
    """A reply parser for one connection: hiredis's when it is installed, else
    :class:`Reader` (module docstring)."""
    return Reader() if hiredis is None else HiredisReader()

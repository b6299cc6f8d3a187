"""Rule rows: how one class travels on the wire, as data (h11's "the rules as data").

Theory of operation
-------------------
A :class:`Rule` names a class, the byte that tags it on the wire (a command,
a route kind, the command a reply answers), the writer and reader of its
fields, the application bodies it carries (``encode`` checks them against
``max_body_bytes`` before it writes a byte) and, for a whole frame, optional
fast paths. A table is a dict from class to row; :func:`rule_for` finds the
row of a value (of its class, or of its nearest base class in the table), so
the codec dispatches by looking up, never by an ``isinstance`` ladder.

:func:`rule` builds rows and is where the type checker sees that a row's
writer, reader and bodies all agree with its class; the row then forgets the
writer's exact argument type (the table holds rows of many classes), which
is sound because a row's functions are only ever given instances of its
class. The tables themselves are in :mod:`zlink_trio.wire.frames` (frames)
and :mod:`zlink_trio.wire._frame_layouts` (routes, reply outcomes).

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeAlias, TypeVar, cast

import attrs

from zlink_trio.core.errors import LocalProtocolError

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.wire._frame_fields import Reader, Writer
    from zlink_trio.wire.codec import EncodedMessage

__all__ = ("Bodies", "Rule", "rule", "rule_for")

F = TypeVar("F")
R_co = TypeVar("R_co", covariant=True)

#: The application bodies a value carries (``None`` where an optional one is absent).
Bodies: TypeAlias = "tuple[EncodedMessage | None, ...]"


def _no_bodies(value: object) -> Bodies:
    return ()


@attrs.frozen(kw_only=True)
class Rule(Generic[R_co]):
    """How one class travels: its tag byte, field writer and reader, and bodies.

    Build rows with :func:`rule`, which checks that the writer, reader and
    bodies all agree with the class; the row then forgets the writer's exact
    argument type, and callers only hand it instances of ``cls``.
    ``fast_write``/``fast_read`` are the optional :mod:`._fast_frames` paths
    of a whole frame (``None`` from them means: use the general layout).
    """

    cls: type[R_co]
    tag: int
    write: Callable[[Writer, object], None]
    read: Callable[[Reader, int], R_co]
    bodies: Callable[[object], Bodies] = _no_bodies
    fast_write: Callable[[object], bytes | None] | None = None
    fast_read: Callable[[bytes, int], R_co | None] | None = None


def rule(
    cls: type[F],
    tag: int,
    write: Callable[[Writer, F], None],
    read: Callable[[Reader, int], F],
    bodies: Callable[[F], Bodies] = _no_bodies,
    *,
    fast_write: Callable[[F], bytes | None] | None = None,
    fast_read: Callable[[bytes, int], F | None] | None = None,
) -> Rule[F]:
    """A :class:`Rule` row whose functions are checked against ``cls``."""
    return Rule(cls=cls, tag=tag, write=cast("Callable[[Writer, object], None]", write),
                read=read, bodies=cast("Callable[[object], Bodies]", bodies),
                fast_write=cast("Callable[[object], bytes | None] | None", fast_write),
                fast_read=fast_read)


def rule_for(table: dict[type, Rule[F]], value: object) -> Rule[F]:
    """The row of ``value``'s class (or of its nearest base in ``table``).

    Raises :class:`LocalProtocolError` when no class of ``value`` has a row.
    """
    found = table.get(type(value))
    if found is None:
        found = next((table[c] for c in type(value).__mro__ if c in table), None)
        if found is None:
            raise LocalProtocolError(f"cannot encode {value!r}: it is not a frame")
    return found

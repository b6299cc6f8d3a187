"""Command 39's metadata: named text fields that travel with a call (trace context).

Theory of operation
-------------------
Command 39 carries an optional metadata frame (at most 16 KiB, ``frames``): opaque to
routing, kept unchanged by Message Follow relays and activation envelopes, and handed to
whoever reads it on the node that runs the handler. The runtime fills it with the W3C
trace context of a traced call (``traceparent``, ``tracestate``; see
``docs/observability.md``, "Traces").

The bytes are UTF-8 text, one field per line, ``name=value``: a name is 1-64 characters
of lowercase ASCII letters, digits, ``-`` and ``_``; a value is any text without a line
break (it may contain ``=``: the first one ends the name). Fields are written in the
order given; a name appears at most once. :func:`decode_call_metadata` raises
:class:`ValueError` naming what is wrong for anything else, so a reader may drop
metadata it cannot read without failing the call it came with.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ("decode_call_metadata", "encode_call_metadata")

_NAME: Final = re.compile(r"[a-z0-9_-]{1,64}")


def encode_call_metadata(fields: Mapping[str, str]) -> bytes:
    """The metadata bytes of ``fields``; ValueError for a name or value that cannot go."""
    lines = []
    for name, value in fields.items():
        if _NAME.fullmatch(name) is None:
            raise ValueError(f"metadata field name {name!r} is not 1-64 characters of "
                             "a-z, 0-9, '-' and '_'")
        if "\n" in value or "\r" in value:
            raise ValueError(f"metadata field {name!r} has a line break in its value")
        lines.append(f"{name}={value}")
    return "\n".join(lines).encode("utf-8")


def decode_call_metadata(data: bytes) -> dict[str, str]:
    """The fields of metadata ``data``; ValueError naming the first thing wrong."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"metadata is not UTF-8 ({exc})") from None
    fields: dict[str, str] = {}
    if not text:
        return fields
    for number, line in enumerate(text.split("\n"), 1):
        name, equals, value = line.partition("=")
        if not equals or _NAME.fullmatch(name) is None:
            raise ValueError(f"metadata line {number} is not name=value with a name of "
                             "1-64 characters of a-z, 0-9, '-' and '_'")
        if "\r" in value:
            raise ValueError(f"metadata field {name!r} has a line break in its value")
        if name in fields:
            raise ValueError(f"metadata field {name!r} appears twice")
        fields[name] = value
    return fields

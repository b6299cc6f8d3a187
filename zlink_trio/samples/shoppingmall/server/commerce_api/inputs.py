"""Input checks of the public order API: the bounded body read and the field rules.

Theory of operation
-------------------
CommerceApi refuses bad input before its first store call and before any Spot
request (validating HTTP input is CommerceApi's role), so a refused request
writes nothing and never reaches the OrderWorkflow. Every refusal is one
:class:`ValidationError`; the HTTP layer answers it with 400 and
``{"error": "ValidationError", ...}``.

**The body.** :func:`read_body` reads a request body chunk by chunk and stops
as soon as it passes :data:`MAX_BODY_BYTES` (64 KiB): it never holds more than
the bound plus one chunk, and a ``Content-Length`` above the bound is refused
before the first chunk is read. :func:`decode_body` then decodes the bytes as
the route's contract class through the framework's typed JSON codec
(``zl.MessageCodec.from_json``): malformed JSON, a body that is not an object,
a missing field, a field of the wrong JSON type (``"quantity": "2"``, a
number for a string), a snake_case spelling of a camelCase key are all the
codec's :class:`zlink_trio.RemoteProtocolError`, reported here as a
:class:`ValidationError` with the codec's wording. Unknown keys are ignored,
as the codec ignores them everywhere.

**Identifiers.** Every identifier the client sends -- cartId,
shippingAddressId, paymentMethodId, idempotencyKey, sourceCommandId and the
path's orderId -- is text of 1..:data:`MAX_ID_BYTES` UTF-8 bytes with only
printable characters (:func:`check_id`). The bound leaves room for what the
workflow derives from them inside the framework's 255-byte Spot ID and the
stores' 255-byte keys (``start:<idempotencyKey>``, ``<orderId>:reservation``,
``<orderId>:event:<version>``).
"""

from __future__ import annotations

from contextlib import aclosing
from typing import TYPE_CHECKING, Final, TypeVar

import zlink_trio as zl

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ("MAX_BODY_BYTES", "MAX_ID_BYTES", "ValidationError", "check_id", "decode_body",
           "read_body")

T = TypeVar("T")

#: The largest request body CommerceApi reads, in bytes (64 KiB).
MAX_BODY_BYTES: Final = 64 * 1024

#: The longest identifier a client may send, in UTF-8 bytes.
MAX_ID_BYTES: Final = 128


class ValidationError(Exception):
    """Raised when a request's input is refused: body too large, malformed, a bad field.

    Raised before anything is read from or written to a store and before any
    Spot request; the HTTP answer is 400 ``{"error": "ValidationError"}``.
    ``message`` says what was wrong and how to send it instead.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message: Final = message


async def read_body(request: Request, *, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request's body, read chunk by chunk; :class:`ValidationError` above ``limit``.

    A ``Content-Length`` above ``limit`` (or not a decimal number) is refused
    before the first chunk; a body that grows past ``limit`` is refused at the
    chunk that passes it, and the rest is never read.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ValidationError(f"Content-Length {declared!r} is not a decimal byte count")
        if int(declared) > limit:
            raise ValidationError(_too_large(limit))
    chunks: list[bytes] = []
    size = 0
    async with aclosing(request.stream()) as stream:
        async for chunk in stream:
            size += len(chunk)
            if size > limit:
                raise ValidationError(_too_large(limit))
            chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> str:
    return (f"the request body is larger than {limit} bytes; an order request is a small "
            "JSON object")


def decode_body(codec: zl.MessageCodec, body: bytes, expected: type[T]) -> T:
    """``body`` decoded as ``expected`` by the typed JSON codec; :class:`ValidationError`."""
    if not body.strip():
        raise ValidationError("the request body is empty; send a JSON object")
    try:
        return codec.from_json(body, expected)
    except zl.RemoteProtocolError as exc:
        raise ValidationError(f"the body is not a valid {expected.__name__}: {exc}") from exc


def check_id(field: str, value: object) -> str:
    """``value`` if it is a valid identifier (module docstring); :class:`ValidationError`."""
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string, got {type(value).__name__}")
    if not value:
        raise ValidationError(f"{field} is empty; send a non-empty identifier")
    size = len(value.encode("utf-8", errors="surrogatepass"))
    if size > MAX_ID_BYTES:
        raise ValidationError(f"{field} is {size} UTF-8 bytes long; at most {MAX_ID_BYTES}")
    if not value.isprintable():
        raise ValidationError(f"{field} {value!r} contains a control or unprintable character")
    return value

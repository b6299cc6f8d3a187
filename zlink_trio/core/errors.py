"""The typed error hierarchy of zlink_trio.

Theory of operation
-------------------
Every failure a user can observe is one class under :class:`ZLinkError`, named
after the outcome it reports (docs/errors.md lists them all). Each class has
a stable numeric ``code`` that travels on the wire (command 20's
``failureCode``); the numbers never change meaning once released, so a peer
running another version still maps a code to the same outcome.

Messages say what was wrong *and* what to do about it. Raise sites pass the
full sentence; the class docstring states when the class is raised.

"Closed" outcomes mean *you* closed something; "stale", "unavailable" or
"lost" mean someone else (the peer, the store, another owner) changed under
you — the same split trio makes between ``ClosedResourceError`` and
``BrokenResourceError``.

This module is sans-IO: it imports nothing but the standard library.
"""

from __future__ import annotations

import re
from typing import ClassVar, Final

__all__ = (
    "AlreadyExists",
    "CapacityExceeded",
    "DeadlineExceeded",
    "HandlerError",
    "InvalidConfiguration",
    "InvalidOperation",
    "LocalProtocolError",
    "NodeLost",
    "NotConfigured",
    "NotFound",
    "ProtocolError",
    "RemoteProtocolError",
    "StaleFence",
    "StaleRoute",
    "StoreUnavailable",
    "TypeMismatch",
    "Unavailable",
    "ZLinkError",
    "error_for_code",
    "handler_error_type",
    "single_error",
)


class ZLinkError(Exception):
    """Root of every error zlink_trio raises on purpose.

    Catch this to handle any runtime outcome; catch a subclass to handle one.
    ``code`` is the stable wire code of the class; ``message`` is the
    human-readable sentence (what was wrong, what to do).
    """

    code: ClassVar[int] = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message: Final = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class NotFound(ZLinkError):
    """Raised when the thing addressed does not exist.

    A Spot with no Ready authority addressed without Instance intent, a Mesh
    named by ``in_mesh`` that no node serves, or a stable type no node provides
    (docs/concepts.md, "Intent"; a type that only draining or stopping nodes
    provide is :class:`Unavailable`).
    """

    code = 2


class NotConfigured(ZLinkError):
    """Raised when an operation needs configuration that is absent.

    For example Create or cold activation without ``in_mesh`` when no Mesh has
    the object-client or object-server role.
    """

    code = 3


class InvalidOperation(ZLinkError):
    """Raised when the caller asked for something the rules forbid.

    Invalid Spot IDs or stable types, a reserved Entry ID used for a User or
    Instance Spot, a builder option set twice or awaited twice, an ambiguous
    Mesh or type selection, a SpotRef of another generation passed to close,
    or a lifecycle transition the statecharts do not define.
    """

    code = 4


class InvalidConfiguration(InvalidOperation):
    """Raised at configuration or startup time for options that cannot work.

    For example a route-cache age that is not at least 5 s shorter than the
    Message Follow duration, a stable type registered twice, or a node
    descriptor whose claim conflicts with a live one. Fix the configuration and
    start again.
    """

    code = 5


class CapacityExceeded(ZLinkError):
    """Raised when a bounded resource refused admission.

    ``lane`` names the execution lane whose count or byte bound refused the
    item (``"application"`` or ``"lifecycle"``), or is ``None`` when the
    bound was placement capacity or the active-object ceiling. Retry later or
    raise the bound.
    """

    code = 6

    def __init__(self, message: str, *, lane: str | None = None) -> None:
        super().__init__(message)
        self.lane: Final = lane


class TypeMismatch(ZLinkError):
    """Raised when a Spot ID is already used with another kind or stable type.

    One Spot ID has exactly one kind and stable type while it has authority
    (docs/concepts.md, "Spot kinds"). Use another ID or the type the Spot has.
    """

    code = 7


class AlreadyExists(ZLinkError):
    """Raised when a create-only operation meets an active authority.

    Create's fresh uuid4 collided with an active Spot (no second uuid is
    tried), or a store claim met a live claim of the same key.
    """

    code = 8


class DeadlineExceeded(ZLinkError):
    """Raised when an operation's single end-to-end deadline passed first.

    The operation may or may not have taken effect; the next call re-checks
    the store's current authority. Nothing is retried automatically.
    """

    code = 9


class Unavailable(ZLinkError):
    """Raised when authority exists but cannot be used now.

    The owner's lease expired, the owner fence differs, a Spot is sealed for
    relocation, a Message Follow route is missing or looped, every node serving
    a new Spot's type is draining or stopping, or the store cannot be reached.
    Retry after the condition clears.
    """

    code = 10


class StaleFence(Unavailable):
    """Raised by a store transaction whose fence no longer matches the record.

    The expected StoreVersion, ObjectGeneration, AuthorityOwnerGeneration or
    owner lifecycle differs from the stored one: someone else changed the
    record first. Nothing was written; re-read the record before deciding
    again.
    """

    code = 11


class StoreUnavailable(Unavailable):
    """Raised when the store could not be asked: unreachable, busy, paused or too slow.

    The transaction did not take effect or its outcome is unknown, but the
    store state is whole (each transaction is atomic). Unlike its parent, it
    says nothing about the record or the lease: retrying later may succeed.
    """

    code = 17


class NodeLost(Unavailable):
    """Raised out of ``open_node`` when the node lost its lease and was told not to rejoin.

    With ``LifecycleOptions(on_lease_lost="raise")`` a node whose lease is gone (a store
    outage or pause longer than the lease, a store that lost its data) stops its Spots
    without touching the store and ends its ``async with`` block with this error, so
    the process exits and its supervisor starts it again. Also raised when the node
    tried to rejoin but its NodeId is held by another live process.
    """

    code = 18


class StaleRoute(ZLinkError):
    """Raised when a message reached a node that no longer owns the Spot.

    The owner identity or owner validity did not match: the Spot moved or
    closed, or its owner's lease ended (docs/concepts.md, "Fences"). The message
    was not run and is not retried automatically: send a new call if running it
    again is safe for your application.
    """

    code = 12


class ProtocolError(ZLinkError):
    """Raised when bytes on a link do not follow the wire protocol.

    Abstract: the concrete classes say whose fault it was. A protocol error
    fails only the link it happened on, never the node.
    """

    code = 13

    def __init__(self, message: str) -> None:
        if type(self) is ProtocolError:
            raise TypeError("ProtocolError is abstract: raise LocalProtocolError or "
                            "RemoteProtocolError")
        super().__init__(message)


class LocalProtocolError(ProtocolError):
    """Raised when this side was asked to send something the protocol forbids."""

    code = 14


class RemoteProtocolError(ProtocolError):
    """Raised when the peer sent bytes that do not decode as a valid frame."""

    code = 15


class HandlerError(ZLinkError):
    """Raised to a requester when the Spot's handler raised instead of replying.

    The Spot keeps running (one failed turn does not end an incarnation);
    ``error_type`` names the exception class the handler raised (on another node too:
    it is read back from the message, which says ``raised <Type>:``), and on the same
    node the original exception is chained as ``__cause__``. Fix the
    handler, or catch the condition inside it and reply with a value.
    """

    code = 16

    def __init__(self, message: str, *, error_type: str = "") -> None:
        super().__init__(message)
        self.error_type: Final = error_type


_BY_CODE: Final[dict[int, type[ZLinkError]]] = {}
for _cls in (
    ZLinkError,
    NotFound,
    NotConfigured,
    InvalidOperation,
    InvalidConfiguration,
    CapacityExceeded,
    TypeMismatch,
    AlreadyExists,
    DeadlineExceeded,
    Unavailable,
    StaleFence,
    StaleRoute,
    LocalProtocolError,
    RemoteProtocolError,
    HandlerError,
    StoreUnavailable,
    NodeLost,
):
    # Codes are the wire contract: two classes sharing one would be a bug.
    assert _cls.code not in _BY_CODE, _cls
    _BY_CODE[_cls.code] = _cls
del _cls


def single_error(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one leaf exception of (nested) single-member groups, else ``None``.

    Nurseries and task groups wrap whatever crosses them; a context manager that wants
    the block's own exception to come out as it was raised unwraps it with this.
    """
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        if len(error.exceptions) != 1:
            return None
        error = error.exceptions[0]
    return error


def error_for_code(code: int, message: str) -> ZLinkError:
    """Rebuild the error a peer reported with ``code``.

    An unknown code (a newer peer) becomes a plain :class:`ZLinkError` that
    keeps the message, so nothing is lost. Every protocol-error code maps to
    :class:`RemoteProtocolError`: seen from here, the failure came from the
    other side of the link, whichever side the peer blamed.
    """
    if code in (ProtocolError.code, LocalProtocolError.code, RemoteProtocolError.code):
        return RemoteProtocolError(message)
    if code == HandlerError.code:
        return HandlerError(message, error_type=handler_error_type(message))
    cls = _BY_CODE.get(code, ZLinkError)
    return cls(message)


#: How a HandlerError's message names what the handler raised (``... raised <Type>: ...``);
#: the wire carries the message, so a remote caller reads ``error_type`` back from it.
_RAISED: Final = re.compile(r" raised ([A-Za-z_][\w.]*): ")


def handler_error_type(message: str) -> str:
    """The exception class a HandlerError's ``message`` names ("" when it names none)."""
    found = _RAISED.search(message)
    return "" if found is None else found.group(1)

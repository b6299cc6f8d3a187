"""One direct call on its way to a Spot, and the router the client hands it to.

A ``send`` or ``request`` becomes one :class:`Delivery` when it is awaited: the Spot
ID, the message (and its encoding, reused if the call leaves the node), the Instance
intent, the reply class the caller asked for, the completion its reply arrives in and
the call's one deadline.  The client builds nothing else and decides nothing about
where the Spot lives: it hands the delivery to the node's :class:`Router`
(:class:`~zlink_trio.runtime.coordinators.call_router.CallRouter`), which resolves the
ID, admits the message and waits for the reply.  That protocol is all the calls wing
knows of the coordinators, so ``SpotClient`` -- which every Spot reaches through
``ctx.client`` -- imports nothing that imports a Spot host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

import attrs

from zlink_trio.core.errors import TypeMismatch
from zlink_trio.core.identity import new_uuid4
from zlink_trio.lowlevel.pooled_random import SYSTEM

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.core.deadline import Deadline
    from zlink_trio.runtime.calls.completion import Completion
    from zlink_trio.runtime.declaration.handlers import HandlerInfo
    from zlink_trio.runtime.declaration.spot_types import SpotType
    from zlink_trio.wire.codec import EncodedMessage, MessageCodec

__all__ = ("SEND", "Delivery", "Intent", "Router", "handler_for", "pooled_uuid4")

#: ``reply`` value meaning "a one-way send: do not check the reply type".
SEND: Final = object()


@attrs.frozen
class Intent:
    """Instance intent of a call: the optional stable type and initial Mesh."""

    stable_type: str | None
    mesh: str | None


@attrs.define(eq=False)
class Delivery:
    """One direct call on its way to a Spot queue."""

    spot_id: str
    msg: object
    size: int
    intent: Intent | None
    #: Where the reply goes: ``None`` for a one-way send.
    completion: Completion | None
    #: The reply class the request asked for (``None`` for a handler that replies
    #: nothing), or :data:`SEND` for a one-way send / a relayed call.
    reply: object
    #: The call's one end-to-end deadline (fixed when it was awaited).
    deadline: Deadline
    #: The operation ID: drawn on first use (:meth:`operation_id`), since a call served
    #: on this node by a Ready Spot never needs one.
    op_id: str
    #: The message as the codec encoded it (reused when it goes to another node).
    encoded: EncodedMessage | None = None
    #: Whether ``msg`` is the caller's own object (a call made on this node), not a
    #: copy decoded for this delivery: then a Spot on this node gets its own copy of
    #: it, and the caller its own copy of the reply (:meth:`message_for_local_turn`).
    shared: bool = True
    #: Set once the message was admitted to a Spot on this node: the reply the caller
    #: receives is then the handler's own object, copied for the caller.
    copy_reply: bool = False
    #: A ToActor call (``client.request_actor``): the ID must name an Actor, and a
    #: ToSpot call's must not (TypeMismatch otherwise, before anything runs).
    to_actor: bool = False
    #: The trace context of the call's span (``observe.tracing``; ``None``: untraced):
    #: the parent of its resolve, cold activation and handler turn.
    trace: object | None = None
    #: Command 39's metadata (``wire.call_metadata``) the call travels with: a relayed
    #: or enveloped message's own; a traced call's trace context, written on first use.
    metadata: bytes | None = None

    def message_for_local_turn(self, codec: MessageCodec) -> object:
        """The message a handler on this node receives for this call.

        A local call is isolated like a remote one: the handler gets its own copy of
        a caller's message (``MessageCodec.isolated``: the message itself when its
        class is deeply immutable, else decoded from :attr:`encoded`), and the reply
        is marked to be copied for the caller (:attr:`copy_reply`).
        """
        if not self.shared:
            return self.msg
        self.copy_reply = True
        return codec.isolated(self.msg, self.encoded)

    def operation_id(self, new_id: Callable[[], str]) -> str:
        """The call's operation ID, drawn with ``new_id`` the first time it is needed."""
        if not self.op_id:
            self.op_id = new_id()
        return self.op_id


def pooled_uuid4() -> str:
    """``core.identity.new_uuid4()`` with its bytes from ``lowlevel.pooled_random`` (many IDs
    a time: an operation ID per cold activation, without a system call for each."""
    return new_uuid4(SYSTEM.take)


def handler_for(spot_type: SpotType, call: Delivery) -> HandlerInfo:
    """The handler of ``call``'s message; TypeMismatch unless its reply is what was asked.

    The one reply-type check of every call, local or remote: a one-way send (``SEND``)
    accepts any reply; a request must ask for exactly the declared reply class.
    """
    handlers = spot_type.handlers
    # (``find`` itself only when the table has none: it words the TypeMismatch.)
    info = handlers.by_type.get(type(call.msg)) or handlers.find(type(call.msg))
    if call.reply is not SEND and info.reply_type is not call.reply:
        declared = "None" if info.reply_type is None else info.reply_type.__qualname__
        asked = "None" if call.reply is None else getattr(call.reply, "__qualname__",
                                                          call.reply)
        raise TypeMismatch(
            f"handler {spot_type.cls.__qualname__}.{info.name} of {spot_type.stable_type!r} "
            f"replies {declared}, but the request asked for reply={asked}; pass "
            f"reply={declared}"
        )
    return info


class Router(Protocol):
    """How a client hands its calls to the node (``coordinators.call_router.CallRouter``)."""

    def delivery(self, spot_id: str, msg: object, *, intent: Intent | None, reply: object,
                 request: bool, timeout: float | None, to_actor: bool = False) -> Delivery:
        """The call as one :class:`Delivery` (encoded, with its deadline fixed now).

        Raises Unavailable on a node that lost its lease, InvalidOperation for a
        message the codec cannot encode.
        """
        ...

    async def send(self, call: Delivery) -> None:
        """Resolve the Spot and admit the message; returns at admission.

        Raises what resolving raises (NotFound, TypeMismatch, StaleRoute, Unavailable,
        CapacityExceeded, ...) and DeadlineExceeded when the deadline passes first.
        """
        ...

    async def request(self, call: Delivery) -> object:
        """Admit the message as :meth:`send` does, then return its reply (or raise its
        typed error), all under the call's one deadline."""
        ...

"""SpotClient: direct ``send`` / ``request`` to a Spot, or to an Actor, by its global ID.

Theory of operation
-------------------
``client.request(spot_id, msg, reply=T)`` and ``client.send(spot_id, msg)`` return
builders.  Each option -- ``.instance_spot(type=None)``, ``.in_mesh(mesh)`` (only after
``.instance_spot()``), ``.timeout(seconds)`` -- may be set once, and the builder may be
awaited once; anything else is InvalidOperation.  Input is validated when the option is
set or when the call is awaited, always before any store call.

Awaiting fixes one deadline (``.timeout()`` or the node's ``default_timeout``) that
spans resolve, cold activation, dispatch and the reply.  A send completes at
admission -- into the Spot's queue, or, when it cold-activates, when the activation
envelope is accepted by the target -- and a request completes exactly once with the
reply or a typed error.  Nothing is retried automatically.

``client.request_actor(actor_id, msg, reply=T)`` and ``client.send_actor(actor_id, msg)``
are the ToActor calls (docs/actors.md): the same builders, deadline and typed errors,
with ``.timeout()`` their only option -- a message never creates an Actor. The ID must
name an Actor (and a Spot call's must not): TypeMismatch otherwise.

The client validates its input and hands the call, as one
:class:`~zlink_trio.runtime.calls.delivery.Delivery`, to the node's
:class:`~zlink_trio.runtime.calls.delivery.Router`, which does everything that depends
on where the Spot lives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import validate_mesh_name, validate_spot_id, validate_stable_type
from zlink_trio.core.identity import validate_user_spot_id as _validate_user_id
from zlink_trio.runtime.calls.builders import TimedBuilder, option
from zlink_trio.runtime.calls.delivery import SEND, Intent
from zlink_trio.runtime.calls.refs import TypedRef

if TYPE_CHECKING:
    from collections.abc import Generator
    from typing import Self

    from zlink_trio.runtime.calls.delivery import Delivery, Router

__all__ = ("ActorRequestCall", "ActorSendCall", "RequestCall", "SendCall", "SpotClient")

R = TypeVar("R")
S = TypeVar("S")



class _Call(TimedBuilder):
    """Options shared by request and send builders.

    The options' defaults are class attributes and ``__init__`` sets the rest itself
    (no ``super().__init__`` chain): every call builds one of these.
    """

    _intent = False
    _type: str | None = None
    _mesh: str | None = None

    def __init__(self, router: Router, spot_id: str, msg: object) -> None:
        self._awaited = False  # (OnceBuilder's state)
        self._router = router
        self._spot_id = spot_id
        self._msg = msg

    def _describe(self) -> str:
        return f"the call to Spot {self._spot_id!r}"

    @option
    def instance_spot(self, stable_type: str | None = None) -> Self:
        """Allow cold activation: a Missing Spot is created as Instance type ``stable_type``.

        Omit the type to auto-select the Mesh's only Instance type.
        """
        self._option("instance_spot")
        self._type = None if stable_type is None else validate_stable_type(stable_type)
        self._intent = True
        return self

    @option
    def in_mesh(self, mesh: str) -> Self:
        """The Mesh to place a Missing Spot in; only after :meth:`instance_spot`."""
        if not self._intent:
            raise InvalidOperation(
                ".in_mesh() only chooses where a Missing Instance Spot is first placed, so it "
                "needs .instance_spot() before it"
            )
        self._option("in_mesh")
        self._mesh = validate_mesh_name(mesh)
        return self

    def _start(self, reply: object, *, request: bool) -> Delivery:
        self._submit()
        if self._intent:
            return self._router.delivery(
                _validate_user_id(self._spot_id), self._msg,
                intent=Intent(self._type, self._mesh), reply=reply, request=request,
                timeout=self._timeout)
        return self._router.delivery(validate_spot_id(self._spot_id), self._msg, intent=None,
                                     reply=reply, request=request, timeout=self._timeout)


class SendCall(_Call):
    """A one-way send; ``await`` it to submit. Completes at admission, returns ``None``."""

    def __await__(self) -> Generator[Any, Any, None]:
        # The router's coroutine itself: no coroutine of our own around it.
        return self._router.send(self._start(SEND, request=False)).__await__()


class RequestCall(_Call, Generic[R]):
    """A request; ``await`` it for the reply of type ``R`` (or a typed error)."""

    def __init__(self, router: Router, spot_id: str, msg: object, reply: type[R] | None
                 ) -> None:
        self._awaited = False  # (OnceBuilder's and _Call's state, set here: one call less)
        self._router = router
        self._spot_id = spot_id
        self._msg = msg
        self._reply = reply

    def __await__(self) -> Generator[Any, Any, R]:
        # The router's coroutine itself: no coroutine of our own around it.
        return cast("Generator[Any, Any, R]",
                    self._router.request(self._start(self._reply, request=True)).__await__())


class _ActorCall(TimedBuilder):
    """Options of ToActor request and send builders: only ``.timeout()``."""

    def __init__(self, router: Router, actor_id: str, msg: object) -> None:
        self._awaited = False  # (OnceBuilder's state)
        self._router = router
        self._actor_id = actor_id
        self._msg = msg

    def _describe(self) -> str:
        return f"the call to Actor {self._actor_id!r}"

    def _start(self, reply: object, *, request: bool) -> Delivery:
        self._submit()
        return self._router.delivery(validate_spot_id(self._actor_id), self._msg, intent=None,
                                     reply=reply, request=request, timeout=self._timeout,
                                     to_actor=True)


class ActorSendCall(_ActorCall):
    """A one-way send to an Actor; ``await`` it to submit. Completes at admission."""

    def __await__(self) -> Generator[Any, Any, None]:
        return self._router.send(self._start(SEND, request=False)).__await__()


class ActorRequestCall(_ActorCall, Generic[R]):
    """A request to an Actor; ``await`` it for the reply of type ``R`` (or a typed error)."""

    def __init__(self, router: Router, actor_id: str, msg: object, reply: type[R] | None
                 ) -> None:
        super().__init__(router, actor_id, msg)
        self._reply = reply

    def __await__(self) -> Generator[Any, Any, R]:
        return cast("Generator[Any, Any, R]",
                    self._router.request(self._start(self._reply, request=True)).__await__())


class SpotClient:
    """Direct calls to Spots by global ID: ``node.client`` (and ``ctx.client``)."""

    def __init__(self, router: Router) -> None:
        self._router = router

    @overload
    def request(self, spot_id: str, msg: object, *, reply: type[R]) -> RequestCall[R]: ...

    @overload
    def request(self, spot_id: str, msg: object, *, reply: None = None) -> RequestCall[None]: ...

    def request(self, spot_id: str, msg: object, *, reply: type[R] | None = None
                ) -> RequestCall[R] | RequestCall[None]:
        """Build a request of ``msg`` (an attrs instance) to ``spot_id``; await it for the reply.

        ``reply`` must be the reply class the Spot's handler declares (``None`` for a
        handler declared ``-> None``; then the request waits for it to finish), else
        TypeMismatch. Without ``.instance_spot()`` a Missing Spot is NotFound.
        """
        return RequestCall(self._router, spot_id, msg, reply)

    def ref(self, cls: type[S], spot_id: str) -> TypedRef[S]:
        """A typed reference to the Spot ``spot_id`` of class ``cls`` (a decorated User
        or Instance Spot class): ``await ref.call.add(Add(2))`` is
        ``request(spot_id, Add(2), reply=<add's reply class>)``, typed by ``cls``'s
        handlers (``calls.refs``). Raises :class:`InvalidOperation` for another class."""
        return TypedRef(self, cls, spot_id)

    def send(self, spot_id: str, msg: object) -> SendCall:
        """Build a one-way send of ``msg`` to ``spot_id``; it completes at admission.

        A failure of the handler is logged on the ``zlink_trio`` logger, not reported.
        """
        return SendCall(self._router, spot_id, msg)

    @overload
    def request_actor(self, actor_id: str, msg: object, *, reply: type[R]
                      ) -> ActorRequestCall[R]: ...

    @overload
    def request_actor(self, actor_id: str, msg: object, *, reply: None = None
                      ) -> ActorRequestCall[None]: ...

    def request_actor(self, actor_id: str, msg: object, *, reply: type[R] | None = None
                      ) -> ActorRequestCall[R] | ActorRequestCall[None]:
        """Build a request of ``msg`` to the Actor ``actor_id``; await it for the reply.

        Goes to the Actor wherever it currently is (by ActorId; generations are not
        compared). ``reply`` as for :meth:`request`. A missing Actor is NotFound, an ID
        that names a Spot TypeMismatch.
        """
        return ActorRequestCall(self._router, actor_id, msg, reply)

    def send_actor(self, actor_id: str, msg: object) -> ActorSendCall:
        """Build a one-way send of ``msg`` to the Actor ``actor_id``; completes at admission."""
        return ActorSendCall(self._router, actor_id, msg)

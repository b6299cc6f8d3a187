"""Typed references: calling a Spot through its class (``node.client.ref``).

Theory of operation
-------------------
``ref = node.client.ref(Counter, "c-1")`` is a :class:`TypedRef` of the Spot class
``Counter``; ``await ref.call.add(Add(2))`` calls the handler ``Counter.add`` of the
Spot ``c-1`` and returns its reply. For a type checker ``ref.call`` *is* a ``Counter``,
so the reply's type is the handler's declared return type (``Total``), and a message of
another class than the handler takes is an error before the program runs. At run time
``ref.call`` is a thin face over ``client.request``: the attribute names a handler of the
class's handler table, the message is checked to be of that handler's message class, and
the request goes with the handler's declared reply class -- the same wire, semantics and
errors as ``client.request(spot_id, msg, reply=...)``, which stays the untyped form.

Options are fluent and each returns a new reference (a reference is immutable, so one
may be kept and reused): ``.instance_spot()`` (Instance intent, with the class's stable
type; Instance Spot classes only), ``.in_mesh(mesh)`` (after ``.instance_spot()``),
``.timeout(seconds)``. ``await ref.send(msg)`` is the one-way send with the same options.
A name that is no handler of the class, or a message of the wrong class, raises
:class:`InvalidOperation` before anything is sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import SpotKind, validate_mesh_name, validate_spot_id
from zlink_trio.runtime.declaration.spot_types import spot_type_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.runtime.declaration.handlers import HandlerInfo

__all__ = ("TypedRef",)

S = TypeVar("S")


class _Client(Protocol):
    """What a reference calls of ``SpotClient`` (a Protocol: the client builds refs)."""

    def request(self, spot_id: str, msg: object, *, reply: Any = None) -> Any: ...
    def send(self, spot_id: str, msg: object) -> Any: ...


class TypedRef(Generic[S]):
    """A reference to one Spot through its class ``S``; see the module docstring."""

    __slots__ = ("_client", "_cls", "_intent", "_mesh", "_spot_id", "_timeout", "_type")

    def __init__(self, client: _Client, cls: type[S], spot_id: str, *,
                 intent: bool = False, mesh: str | None = None,
                 timeout: float | None = None) -> None:
        spot_type = spot_type_of(cls)
        if spot_type.kind not in (SpotKind.INSTANCE, SpotKind.USER):
            raise InvalidOperation(
                f"{cls.__qualname__} is an {spot_type.kind.name.title()} type: a typed "
                "reference calls a User or Instance Spot (an Actor: client.request_actor)")
        self._client = client
        self._cls = cls
        self._type = spot_type
        self._spot_id = validate_spot_id(spot_id)
        self._intent = intent
        self._mesh = mesh
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"TypedRef({self._cls.__qualname__}, {self._spot_id!r})"

    @property
    def spot_id(self) -> str:
        """The Spot ID it calls."""
        return self._spot_id

    def _with(self, **changes: Any) -> TypedRef[S]:
        options = {"intent": self._intent, "mesh": self._mesh, "timeout": self._timeout,
                   **changes}
        return TypedRef(self._client, self._cls, self._spot_id, **options)

    def instance_spot(self) -> TypedRef[S]:
        """With Instance intent: a Missing Spot is activated as the class's stable type
        (``client.request(...).instance_spot(type)``). Instance Spot classes only."""
        if self._type.kind is not SpotKind.INSTANCE:
            raise InvalidOperation(
                f"{self._cls.__qualname__} is a User Spot type: it is created with "
                "node.spots.create / get_or_create, never by a message")
        return self._with(intent=True)

    def in_mesh(self, mesh: str) -> TypedRef[S]:
        """The Mesh to place a Missing Spot in; only after :meth:`instance_spot`."""
        if not self._intent:
            raise InvalidOperation(".in_mesh() only chooses where a Missing Instance Spot "
                                   "is first placed, so it needs .instance_spot() before it")
        return self._with(mesh=validate_mesh_name(mesh))

    def timeout(self, seconds: float) -> TypedRef[S]:
        """The deadline of each call, in seconds (default: the node's ``default_timeout``)."""
        return self._with(timeout=seconds)

    @property
    def call(self) -> S:
        """The Spot's handlers as methods: ``await ref.call.add(Add(2))`` requests with
        ``Add(2)`` and returns the reply of the handler ``add`` (typed as the class)."""
        return cast("S", _Calls(self))

    async def send(self, msg: object) -> None:
        """Send ``msg`` one way (``client.send``); completes at admission."""
        self._handler_for(msg)
        call: Any = self._client.send(self._spot_id, msg)
        await self._options(call)

    def _handler_for(self, msg: object, name: str | None = None) -> HandlerInfo:
        info = self._type.handlers.by_type.get(type(msg))
        if info is None or (name is not None and info.name != name):
            wanted = [i for i in self._type.handlers.by_type.values() if i.name == name]
            takes = (f"{name} takes {wanted[0].message_type.__qualname__}" if wanted
                     else f"its handlers take {self._message_names()}")
            raise InvalidOperation(
                f"{self._cls.__qualname__} has no handler for {type(msg).__qualname__}"
                + (f" named {name!r}" if name else "") + f": {takes}")
        return info

    def _message_names(self) -> str:
        return ", ".join(sorted(c.__qualname__ for c in self._type.handlers.by_type)) or \
            "nothing"

    def _options(self, call: Any) -> Awaitable[Any]:
        if self._intent:
            call = call.instance_spot(self._type.stable_type)
            if self._mesh is not None:
                call = call.in_mesh(self._mesh)
        if self._timeout is not None:
            call = call.timeout(self._timeout)
        return cast("Awaitable[Any]", call)

    def _method(self, name: str) -> Callable[[object], Awaitable[Any]]:
        handlers = [i for i in self._type.handlers.by_type.values() if i.name == name]
        if not handlers:
            raise InvalidOperation(
                f"{self._cls.__qualname__}.{name} is not a handler of its Spot type "
                f"{self._type.stable_type!r}; its handlers: "
                f"{', '.join(sorted(i.name for i in self._type.handlers.by_type.values()))}")

        async def request(msg: object) -> Any:
            info = self._handler_for(msg, name)
            return await self._options(
                self._client.request(self._spot_id, msg, reply=info.reply_type))

        return request


class _Calls:
    """``ref.call``: each handler of the class as an ``async`` method (module doc)."""

    __slots__ = ("_ref",)

    def __init__(self, ref: TypedRef[Any]) -> None:
        self._ref = ref

    def __getattr__(self, name: str) -> Callable[[object], Awaitable[Any]]:
        return self._ref._method(name)


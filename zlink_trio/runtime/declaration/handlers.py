"""Message handlers and lifecycle hooks of a Spot class, found once at decoration time.

Theory of operation
-------------------
A Spot class marks its message handlers with :func:`handler`. The marker only
checks that the method is ``async def`` and tags it; the class does not exist
yet while its body runs, so nothing else can be resolved then. When the class
decorator (``@zl.instance_spot`` / ``@zl.user_spot``) runs, :func:`scan_handlers`
walks the class's attributes (its MRO, a subclass's name hiding its parent's)
and builds one immutable :class:`HandlerTable`:

* the **message class** is the annotation of the parameter after ``self``;
* the **reply class** is the return annotation, ``-> None`` meaning "no reply".

Both must be ``attrs`` classes, because they travel through the typed JSON
codec (:mod:`zlink_trio.wire.codec`). Annotations are resolved with
:func:`typing.get_type_hints`, so ``from __future__ import annotations`` works.
String annotations are looked up in the method's module globals and in the
local namespace of the code that applied the class decorator (so a Spot class
declared inside a function, as tests do, sees the message classes declared
before it in that function). A name that still does not resolve is an
:class:`InvalidConfiguration` that names the handler and the missing name.

Dispatch is by **exact class**, never by ``isinstance``: a message crosses the
network under its own wire type name (:func:`type_name_of`), so a subclass of
``Add`` would not reach the ``Add`` handler remotely; local dispatch refuses it
too, so local and remote calls behave alike. The table therefore also maps
each wire type name to its class for network dispatch
(:meth:`MessageCodec.decode_any`).

Lifecycle hooks are found by name — ``on_activate(self)``,
``on_create(self, request)``, ``on_close(self, reason)`` — and may be sync or
async; :class:`Hook` records which, so the runtime knows whether to await.
Which hooks a kind may define is decided by the kind's type
(:mod:`zlink_trio.runtime.declaration.spot_types`), not here.

Every problem found is an :class:`InvalidConfiguration` raised while the
module defining the Spot is imported: a Spot class that decorates cleanly has
a complete, unambiguous table.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar, get_type_hints

import attrs

from zlink_trio.core.errors import InvalidConfiguration, InvalidOperation, TypeMismatch
from zlink_trio.wire.codec import type_name_of

__all__ = (
    "HOOK_NAMES",
    "HandlerInfo",
    "HandlerTable",
    "Hook",
    "handler",
    "is_handler",
    "resolve_hook",
    "scan_handlers",
)

_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])

#: The attribute :func:`handler` sets on the functions it marks.
_MARK: Final = "__zlink_handler__"

#: Method names the runtime calls as lifecycle hooks; none of them may be a handler.
HOOK_NAMES: Final = ("on_activate", "on_create", "on_close")


def handler(fn: _F) -> _F:
    """Mark the ``async def`` method ``fn`` as the Spot's handler for one message class.

    The message class is the annotation of the parameter after ``self``, the
    reply class the return annotation (``-> None``: no reply); both are read
    when the class decorator runs. Returns ``fn`` itself, only tagged.

    Raises :class:`InvalidConfiguration` at once if ``fn`` is not an
    ``async def`` function (a sync function, an async generator, a
    staticmethod or classmethod object, or any other value).
    """
    if not inspect.isfunction(fn) or not inspect.iscoroutinefunction(fn):
        what = getattr(fn, "__qualname__", None) or type(fn).__name__
        raise InvalidConfiguration(
            f"@zl.handler needs an 'async def' method, got {what!r} "
            f"({'a sync function' if inspect.isfunction(fn) else type(fn).__name__}); "
            "write the handler as 'async def name(self, msg: Message) -> Reply'"
        )
    setattr(fn, _MARK, True)
    return fn


def is_handler(obj: object) -> bool:
    """Tell whether ``obj`` is a function marked with :func:`handler`."""
    return inspect.isfunction(obj) and getattr(obj, _MARK, False) is True


@attrs.frozen(kw_only=True)
class HandlerInfo:
    """One handler of a Spot type: which method takes which message, and what it returns."""

    #: The attrs class of the messages this handler takes (exact class).
    message_type: type[object]
    #: The message class's stable wire type name (``type_name_of``).
    wire_name: str
    #: Name of the method on the Spot class; call ``getattr(spot, name)(msg)``.
    name: str
    #: The attrs class of the reply, or ``None`` when the handler sends no reply.
    reply_type: type[object] | None


def _frozen_map(value: Mapping[Any, Any]) -> Mapping[Any, Any]:
    return types.MappingProxyType(dict(value))


@attrs.frozen
class HandlerTable:
    """The immutable message-class → handler table of one Spot type.

    Build it with :func:`scan_handlers`; both mappings are read-only views.
    """

    #: Message class → handler.
    by_type: Mapping[type[object], HandlerInfo] = attrs.field(converter=_frozen_map)
    #: Wire type name → message class, for network dispatch (``decode_any``).
    by_wire_name: Mapping[str, type[object]] = attrs.field(converter=_frozen_map)

    @property
    def message_types(self) -> tuple[type[object], ...]:
        """Every message class some handler takes, sorted by wire type name."""
        return tuple(self.by_wire_name[name] for name in sorted(self.by_wire_name))

    def __len__(self) -> int:
        return len(self.by_type)

    def __contains__(self, message_type: object) -> bool:
        return message_type in self.by_type

    def find(self, message_type: type[object]) -> HandlerInfo:
        """Return the handler for messages of exactly ``message_type``.

        Raises :class:`TypeMismatch` when no handler takes that class (a
        subclass of a handled class does not match), naming the accepted ones.
        """
        info = self.by_type.get(message_type)
        if info is None:
            raise TypeMismatch(
                f"this Spot type has no handler for {_describe(message_type)}; it accepts "
                f"{self._accepted()}. Send one of those, or add an '@zl.handler' method "
                "that takes this message class"
            )
        return info

    def find_wire(self, wire_name: str) -> HandlerInfo:
        """Return the handler for the message class whose wire type name is ``wire_name``.

        Raises :class:`TypeMismatch` when no handler takes a class of that name.
        """
        message_type = self.by_wire_name.get(wire_name)
        if message_type is None:
            raise TypeMismatch(
                f"this Spot type has no handler for wire message type {wire_name!r}; it "
                f"accepts {self._accepted()}. {_main_note(wire_name, self.by_wire_name)}"
            )
        return self.by_type[message_type]

    def _accepted(self) -> str:
        names = sorted(self.by_wire_name)
        return ", ".join(repr(name) for name in names) if names else "no messages at all"


def _main_note(wire_name: str, accepted: Mapping[str, object]) -> str:
    """Why the names differ: a class defined in ``__main__`` (a script) is named after
    ``__main__`` by the sender and after its module by an importer, unless pinned."""
    main = [name for name in (wire_name, *accepted) if name.startswith("__main__:")]
    if main:
        return (f"{main[0]!r} is a class defined in a script run as __main__: its default "
                "wire name depends on how each process loaded it. Move the message class "
                "into a module both import, or pin its name with __zlink_type__ = "
                '"your.Name" in its body')
    return ("The sender and this node disagree on the Spot type's messages (check both run "
            "the same application version)")


def _describe(cl: object) -> str:
    if isinstance(cl, type):
        return f"message class {cl.__module__}.{cl.__qualname__}"
    return f"{cl!r} (not a class)"


def _namespace(cls: type[object]) -> dict[str, object]:
    """Attributes defined on ``cls`` and its bases, a subclass's name hiding its parent's."""
    merged: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        merged.update(vars(klass))
    return merged


def _hints(
    cls: type[object], name: str, fn: Callable[..., object], localns: Mapping[str, object]
) -> dict[str, Any]:
    ns = {**localns, cls.__name__: cls}
    try:
        return get_type_hints(fn, localns=ns)
    except Exception as exc:
        raise InvalidConfiguration(
            f"cannot resolve the annotations of {cls.__qualname__}.{name} ({type(exc).__name__}: "
            f"{exc}); annotations are resolved when the Spot class is decorated, so define "
            "the message and reply classes before the Spot class, at module level or "
            "earlier in the same function"
        ) from exc


def _attrs_class(cls: type[object], name: str, what: str, value: object) -> type[object]:
    if not isinstance(value, type):
        raise InvalidConfiguration(
            f"{cls.__qualname__}.{name}: the {what} annotation {value!r} is not supported; "
            "annotate it with one attrs class (no unions, generics, Any or Optional)"
        )
    if not attrs.has(value):
        raise InvalidConfiguration(
            f"{cls.__qualname__}.{name}: the {what} class {value.__qualname__} is not an "
            "attrs class, so the codec cannot send it; decorate it with @attrs.frozen"
        )
    return value


def _one_handler(
    cls: type[object], name: str, fn: Callable[..., object], localns: Mapping[str, object]
) -> HandlerInfo:
    params = list(inspect.signature(fn).parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if len(params) != 2 or any(p.kind not in positional for p in params):
        raise InvalidConfiguration(
            f"handler {cls.__qualname__}.{name} must take exactly (self, msg), got "
            f"({', '.join(str(p) for p in params)}); the message is its only argument"
        )
    hints = _hints(cls, name, fn, localns)
    msg_param = params[1].name
    if msg_param not in hints:
        raise InvalidConfiguration(
            f"handler {cls.__qualname__}.{name} has no annotation on '{msg_param}'; annotate "
            f"it with the attrs message class it handles ({msg_param}: MyMessage)"
        )
    if "return" not in hints:
        raise InvalidConfiguration(
            f"handler {cls.__qualname__}.{name} has no return annotation; annotate the reply "
            "class (-> MyReply), or -> None when it sends no reply"
        )
    message_type = _attrs_class(cls, name, "message", hints[msg_param])
    returned = hints["return"]
    reply_type = None if returned is type(None) else _attrs_class(cls, name, "reply", returned)
    try:
        wire_name = type_name_of(message_type)
    except InvalidOperation as exc:
        raise InvalidConfiguration(f"handler {cls.__qualname__}.{name}: {exc.message}") from exc
    return HandlerInfo(
        message_type=message_type, wire_name=wire_name, name=name, reply_type=reply_type
    )


def scan_handlers(cls: type[object], localns: Mapping[str, object] | None = None) -> HandlerTable:
    """Build the :class:`HandlerTable` of the Spot class ``cls``.

    ``localns`` adds names for resolving string annotations (the decorating
    frame's locals). Raises :class:`InvalidConfiguration` when a handler's
    signature or annotations are missing or unsupported, a message or reply
    class is not an attrs class, two handlers take one message class, two
    message classes share one wire type name, or a lifecycle hook name
    (:data:`HOOK_NAMES`) is marked as a handler. A class with no handlers
    gets an empty table.
    """
    by_type: dict[type[object], HandlerInfo] = {}
    by_wire: dict[str, type[object]] = {}
    for name, value in _namespace(cls).items():
        if not is_handler(value):
            continue
        if name in HOOK_NAMES:
            raise InvalidConfiguration(
                f"{cls.__qualname__}.{name} is a lifecycle hook name, so it cannot be a "
                "message handler; rename the handler or remove @zl.handler"
            )
        assert callable(value)
        info = _one_handler(cls, name, value, localns or {})
        other = by_type.get(info.message_type)
        if other is not None:
            raise InvalidConfiguration(
                f"{cls.__qualname__} has two handlers for {_describe(info.message_type)}: "
                f"{other.name} and {info.name}; keep one handler per message class"
            )
        clash = by_wire.get(info.wire_name)
        if clash is not None:
            raise InvalidConfiguration(
                f"{cls.__qualname__} handles {clash.__qualname__} and "
                f"{info.message_type.__qualname__}, which share the wire type name "
                f"{info.wire_name!r}; give one of them another __zlink_type__"
            )
        by_type[info.message_type] = info
        by_wire[info.wire_name] = info.message_type
    return HandlerTable(by_type, by_wire)


@attrs.frozen
class Hook:
    """A lifecycle hook the Spot class defines: call ``getattr(spot, name)(...)``.

    When ``is_async`` is true the call returns an awaitable to await.
    """

    name: str
    is_async: bool


def resolve_hook(cls: type[object], name: str, params: tuple[str, ...]) -> Hook | None:
    """Return the hook ``name`` of ``cls`` (``None`` if absent), checking its arity.

    ``params`` names the arguments the runtime passes after ``self`` (used for
    the count and the error message). Raises :class:`InvalidConfiguration`
    when the attribute is not a plain method (staticmethod, classmethod,
    property, non-callable), is an async generator, or cannot be called with
    ``self`` and ``len(params)`` positional arguments.
    """
    expected = ", ".join(("self", *params))
    value = _namespace(cls).get(name)
    if value is None:
        return None
    if not inspect.isfunction(value):
        raise InvalidConfiguration(
            f"{cls.__qualname__}.{name} must be a plain method, got {type(value).__name__}; "
            f"define 'def {name}({expected})' or 'async def {name}({expected})'"
        )
    if inspect.isasyncgenfunction(value):
        raise InvalidConfiguration(
            f"{cls.__qualname__}.{name} is an async generator; a hook must be a plain "
            f"'def {name}({expected})' or 'async def {name}({expected})' method"
        )
    signature = inspect.signature(value)
    try:
        signature.bind(*([None] * (len(params) + 1)))
    except TypeError:
        raise InvalidConfiguration(
            f"hook {cls.__qualname__}.{name}{signature} cannot be called as "
            f"{name}({expected}); give it exactly that signature"
        ) from None
    return Hook(name, inspect.iscoroutinefunction(value))

"""Spot type declarations: the three kinds and Actors as sibling types; the decorators.

Theory of operation
-------------------
Entry, User and Instance Spots behave differently (docs/concepts.md), so they are three
separate types, never one type with kind flags that could all be true at once.
:class:`SpotType` holds what every kind has (stable type, class, handler table, hooks)
and cannot be instantiated; :class:`EntrySpotType`, :class:`UserSpotType` and
:class:`InstanceSpotType` are its siblings, each with a ``kind`` class constant and the
rules of its kind at its own boundary:

============  ==================  =================  =========================
kind          constructor         ``on_create``      relocation policy
============  ==================  =================  =========================
Entry         ``cls(ctx)``        not allowed        none (never moves)
User          ``cls(ctx, req)``   optional           required
Instance      ``cls(ctx)``        not allowed        required
Actor         ``cls(ctx)``        not allowed        required
============  ==================  =================  =========================

An Actor is not a Spot but a member of one (docs/actors.md); it has handlers, hooks,
a queue and timers like a Spot, so its type is a sibling here (:class:`ActorType`).

Users declare User and Instance Spot types with :func:`user_spot` and
:func:`instance_spot`, and Actor types with :func:`actor`. The decorator validates
everything it cheaply can at import time — the stable type (1..255 UTF-8 bytes), the
relocation policy (required: there is no default), the constructor and hook arities,
the handler table — and attaches the resulting definition to the class as
``__zlink_spot__``; the class is otherwise returned unchanged. Entry Spot
types are built by the framework, not declared by users.

:class:`~zlink_trio.runtime.declaration.registry.SpotTypeRegistry` collects the types
one node serves.

Every declaration problem is an :class:`InvalidConfiguration` that says what
is wrong and how to fix it.
"""

from __future__ import annotations

import enum
import inspect
import sys
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar

import attrs

from zlink_trio.core.errors import InvalidConfiguration, InvalidOperation
from zlink_trio.core.identity import SpotKind, validate_stable_type
from zlink_trio.runtime.declaration.handlers import HandlerTable, Hook, resolve_hook, scan_handlers
from zlink_trio.runtime.declaration.policies import (
    DisableRelocation,
    RecreateOnRelocation,
    RelocationPolicy,
    RelocationUnit,
)
from zlink_trio.runtime.declaration.reminder_message import Reminder

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = (
    "ActorType",
    "EntrySpotType",
    "InstanceSpotType",
    "SpotHooks",
    "SpotType",
    "UserSpotType",
    "actor",
    "instance_spot",
    "relocation_of",
    "spot_type_of",
    "user_spot",
)

_C = TypeVar("_C", bound=type)

#: The class attribute the decorators set to the class's :class:`SpotType`.
_ATTR: Final = "__zlink_spot__"

_CHOICES: Final = (
    "zl.DisableRelocation(), zl.RecreateOnRelocation() or zl.PreserveStateWith(adapter)"
)


class _Missing(enum.Enum):
    MISSING = enum.auto()


_MISSING: Final = _Missing.MISSING


@attrs.frozen(kw_only=True)
class SpotHooks:
    """The lifecycle hooks a Spot class defines; ``None`` where it defines none."""

    #: ``on_activate(self)``: runs once after construction, before Ready.
    on_activate: Hook | None = None
    #: ``on_create(self, request)``: User Spots only; returns None, a reply, or a Reject.
    on_create: Hook | None = None
    #: ``on_close(self, reason)``: runs once when the incarnation ends.
    on_close: Hook | None = None


@attrs.frozen(kw_only=True)
class SpotType:
    """What every Spot kind has; abstract (instantiate a kind's subclass).

    Raises ``TypeError`` when instantiated directly.
    """

    #: The kind this type declares; set by each subclass.
    kind: ClassVar[SpotKind]

    #: The stable type name (1..255 UTF-8 bytes), the Spot's type on the wire and in stores.
    stable_type: str
    #: The application class the runtime constructs.
    cls: type[Any]
    #: Message class → handler.
    handlers: HandlerTable
    #: The lifecycle hooks the class defines.
    hooks: SpotHooks = SpotHooks()
    #: The attrs class of the Spot's durable state (``state=``; docs/state.md), or None.
    state: type[Any] | None = None

    @property
    def reminders(self) -> bool:
        """Whether it handles :class:`Reminder` messages, and so may set reminders
        (``ctx.remind``; docs/reminders.md)."""
        return Reminder in self.handlers.by_type

    def __attrs_post_init__(self) -> None:
        if type(self) is SpotType:
            raise TypeError(
                "SpotType is abstract: build an EntrySpotType, UserSpotType or InstanceSpotType"
            )
        if self.hooks.on_create is not None and self.kind is not SpotKind.USER:
            raise InvalidConfiguration(
                f"{self.cls.__qualname__} defines on_create, but only User Spots are created "
                f"explicitly; a {self.kind.name.title()} Spot never calls it. Remove on_create "
                "or declare the class with @zl.user_spot"
            )


@attrs.frozen(kw_only=True)
class EntrySpotType(SpotType):
    """An Entry Spot type: one per node lifecycle, built by the framework, never moves."""

    kind: ClassVar[SpotKind] = SpotKind.ENTRY

    def construct(self, ctx: object) -> object:
        """Build the application instance: ``cls(ctx)``. Exceptions propagate."""
        return self.cls(ctx)


def _policy(
    instance: SpotType, attribute: attrs.Attribute[RelocationPolicy], value: RelocationPolicy
) -> None:
    _check_policy(value, "the relocation policy")


@attrs.frozen(kw_only=True)
class UserSpotType(SpotType):
    """A User Spot type: created explicitly through the SpotManager; may move."""

    kind: ClassVar[SpotKind] = SpotKind.USER

    #: What happens to the Spot's state when it relocates (docs/relocation.md).
    relocation: RelocationPolicy = attrs.field(validator=_policy)
    #: How a move treats its Actor members (docs/actors.md).
    unit: RelocationUnit = RelocationUnit.SPOT_WIDE

    def construct(self, ctx: object, request: object | None) -> object:
        """Build the application instance: ``cls(ctx, request)``. Exceptions propagate."""
        return self.cls(ctx, request)


@attrs.frozen(kw_only=True)
class InstanceSpotType(SpotType):
    """An Instance Spot type: created by the first message with Instance intent; may move."""

    kind: ClassVar[SpotKind] = SpotKind.INSTANCE

    #: What happens to the Spot's state when it relocates (docs/relocation.md).
    relocation: RelocationPolicy = attrs.field(validator=_policy)

    def construct(self, ctx: object) -> object:
        """Build the application instance: ``cls(ctx)``. Exceptions propagate."""
        return self.cls(ctx)


@attrs.frozen(kw_only=True)
class ActorType(SpotType):
    """An Actor type: a member of an Entry or User Spot (docs/actors.md)."""

    kind: ClassVar[SpotKind] = SpotKind.ACTOR

    #: What happens to the Actor's state when it moves with its container.
    relocation: RelocationPolicy = attrs.field(validator=_policy)

    def construct(self, ctx: object) -> object:
        """Build the application instance: ``cls(ctx)``. Exceptions propagate."""
        return self.cls(ctx)


_DECORATORS: Final = {SpotKind.USER: "user_spot", SpotKind.INSTANCE: "instance_spot",
                      SpotKind.ACTOR: "actor"}


def _check_policy(value: object, where: str) -> RelocationPolicy:
    if value is _MISSING:
        raise InvalidConfiguration(
            f"{where} needs relocation=: choose {_CHOICES} (there is no default: what a "
            "move does to a Spot's state is the application's choice)"
        )
    if isinstance(value, type) and issubclass(value, RelocationPolicy):
        raise InvalidConfiguration(
            f"{where}: relocation= got the class {value.__name__}, not an instance; "
            f"write relocation=zl.{value.__name__}(...)"
        )
    if type(value) is RelocationPolicy or not isinstance(value, RelocationPolicy):
        raise InvalidConfiguration(
            f"{where}: relocation= must be one of {_CHOICES}, got {value!r}"
        )
    return value


def _check_state(value: object, where: str) -> type[Any] | None:
    if value is None:
        return None
    if not (isinstance(value, type) and attrs.has(value)):
        raise InvalidConfiguration(
            f"{where}: state= takes the attrs class of the durable state (the store keeps "
            f"one value of it through the message codec), got {value!r}; decorate the "
            "class with @attrs.frozen or @attrs.define")
    return value


def _check_stable_type(value: object, decorator: str) -> str:
    try:
        return validate_stable_type(value)
    except InvalidOperation as exc:
        raise InvalidConfiguration(f"@zl.{decorator}({value!r}): {exc.message}") from exc


def _check_constructor(cls: type[object], params: tuple[str, ...]) -> None:
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # no introspectable signature (C types): trust it
        return
    try:
        signature.bind(*([None] * len(params)))
    except TypeError:
        expected = ", ".join(("self", *params))
        raise InvalidConfiguration(
            f"{cls.__qualname__}{signature} cannot be constructed as "
            f"{cls.__qualname__}({', '.join(params)}); define __init__({expected})"
        ) from None


def _declare(
    cls: object,
    stable_type: str,
    policy: RelocationPolicy,
    kind: SpotKind,
    localns: Mapping[str, object],
    unit: RelocationUnit = RelocationUnit.SPOT_WIDE,
    state: type[Any] | None = None,
) -> SpotType:
    decorator = _DECORATORS[kind]
    if not isinstance(cls, type):
        raise InvalidConfiguration(
            f"@zl.{decorator}({stable_type!r}) decorates classes, got {cls!r}"
        )
    existing = vars(cls).get(_ATTR)
    if isinstance(existing, SpotType):
        raise InvalidConfiguration(
            f"{cls.__qualname__} is already declared as {existing.kind.name.title()}"
            f"{'' if existing.kind is SpotKind.ACTOR else ' Spot'} type "
            f"{existing.stable_type!r}; a class is exactly one Spot or Actor type, so "
            "remove one of its decorators"
        )
    hooks = SpotHooks(
        on_activate=resolve_hook(cls, "on_activate", ()),
        on_create=resolve_hook(cls, "on_create", ("request",)),
        on_close=resolve_hook(cls, "on_close", ("reason",)),
    )
    handlers = scan_handlers(cls, localns)
    definition: SpotType
    if kind is SpotKind.USER:
        _check_constructor(cls, ("ctx", "request"))
        definition = UserSpotType(
            stable_type=stable_type, cls=cls, handlers=handlers, hooks=hooks, relocation=policy,
            unit=unit, state=state,
        )
    elif kind is SpotKind.ACTOR:
        _check_constructor(cls, ("ctx",))
        definition = ActorType(
            stable_type=stable_type, cls=cls, handlers=handlers, hooks=hooks, relocation=policy,
            state=state,
        )
    else:
        _check_constructor(cls, ("ctx",))
        definition = InstanceSpotType(
            stable_type=stable_type, cls=cls, handlers=handlers, hooks=hooks, relocation=policy,
            state=state,
        )
    setattr(cls, _ATTR, definition)
    return definition


def instance_spot(
    stable_type: str, *, relocation: RelocationPolicy | _Missing = _MISSING,
    state: type[Any] | None = None,
) -> Callable[[_C], _C]:
    """Declare the decorated class as the Instance Spot type ``stable_type``.

    ``relocation`` is required: one of :class:`DisableRelocation`,
    :class:`RecreateOnRelocation`, :class:`PreserveStateWith`. ``state``: the attrs
    class of the Spot's durable state, kept in the store (``ctx.state``; docs/state.md).
    The class is constructed as ``cls(ctx)``; it may define ``on_activate(self)`` and
    ``on_close(self, reason)`` (sync or async) but not ``on_create``.

    Returns the class unchanged except for its ``__zlink_spot__`` attribute
    (the :class:`InstanceSpotType`). Raises :class:`InvalidConfiguration`
    for an invalid stable type or a missing/invalid policy (when called), and
    for anything :func:`user_spot` refuses about the class (when applied).
    """
    name = _check_stable_type(stable_type, "instance_spot")
    policy = _check_policy(relocation, f"@zl.instance_spot({name!r})")
    kept = _check_state(state, f"@zl.instance_spot({name!r})")

    def decorate(cls: _C) -> _C:
        # The caller's locals resolve string annotations of classes declared in a function.
        localns = dict(sys._getframe(1).f_locals)
        _declare(cls, name, policy, SpotKind.INSTANCE, localns, state=kept)
        return cls

    return decorate


def user_spot(
    stable_type: str, *, relocation: RelocationPolicy | _Missing = _MISSING,
    unit: RelocationUnit = RelocationUnit.SPOT_WIDE, state: type[Any] | None = None,
) -> Callable[[_C], _C]:
    """Declare the decorated class as the User Spot type ``stable_type``.

    ``relocation`` is required, as for :func:`instance_spot`. ``unit`` says how a move
    treats the Spot's Actor members (:class:`RelocationUnit`; ``PER_ACTOR`` only with
    :class:`RecreateOnRelocation`). ``state``, as for :func:`instance_spot` (the close
    of the Spot deletes it). The class is
    constructed as ``cls(ctx, request)`` (``request`` is ``None`` when the
    create call sent none); it may define ``on_activate(self)``,
    ``on_create(self, request)`` returning ``None``, a reply or a
    :class:`Reject`, and ``on_close(self, reason)``, each sync or async.

    Returns the class unchanged except for its ``__zlink_spot__`` attribute
    (the :class:`UserSpotType`). Raises :class:`InvalidConfiguration` for an
    invalid stable type or a missing/invalid policy (when called); and, when
    applied, for a non-class, a class already declared as a Spot type, a
    constructor or hook with the wrong arity, or a bad handler.
    """
    name = _check_stable_type(stable_type, "user_spot")
    policy = _check_policy(relocation, f"@zl.user_spot({name!r})")
    if not isinstance(unit, RelocationUnit):
        raise InvalidConfiguration(f"@zl.user_spot({name!r}): unit= must be a "
                                   f"zl.RelocationUnit, got {unit!r}")
    if unit is RelocationUnit.PER_ACTOR and not isinstance(policy, RecreateOnRelocation):
        raise InvalidConfiguration(
            f"@zl.user_spot({name!r}): unit=PER_ACTOR moves the Spot without its members "
            "and carries no Spot state, so it needs relocation=zl.RecreateOnRelocation()")

    kept = _check_state(state, f"@zl.user_spot({name!r})")

    def decorate(cls: _C) -> _C:
        localns = dict(sys._getframe(1).f_locals)
        _declare(cls, name, policy, SpotKind.USER, localns, unit, kept)
        return cls

    return decorate


def actor(
    stable_type: str, *, relocation: RelocationPolicy | _Missing = _MISSING,
    state: type[Any] | None = None,
) -> Callable[[_C], _C]:
    """Declare the decorated class as the Actor type ``stable_type`` (docs/actors.md).

    ``relocation`` is required, as for :func:`instance_spot`: what a move of the Actor
    (with its container, or on its own) does to its state; ``state``, as for
    :func:`instance_spot` (the Actor's close deletes it). The class is constructed as
    ``cls(ctx)``; it may define ``on_activate(self)`` and ``on_close(self, reason)``
    (sync or async) but not ``on_create``, and ``@zl.handler`` methods like a Spot.
    Stable types of Spots and Actors share one namespace on a node.

    Returns the class unchanged except for its ``__zlink_spot__`` attribute (the
    :class:`ActorType`). Raises :class:`InvalidConfiguration` as :func:`user_spot` does.
    """
    name = _check_stable_type(stable_type, "actor")
    policy = _check_policy(relocation, f"@zl.actor({name!r})")
    kept = _check_state(state, f"@zl.actor({name!r})")

    def decorate(cls: _C) -> _C:
        localns = dict(sys._getframe(1).f_locals)
        _declare(cls, name, policy, SpotKind.ACTOR, localns, state=kept)
        return cls

    return decorate


def spot_type_of(cls: object) -> SpotType:
    """Return the :class:`SpotType` declared on the class ``cls``.

    A :class:`SpotType` value passed in is returned as is (so a registry can
    take framework-built Entry types beside decorated classes). Raises
    :class:`InvalidConfiguration` when ``cls`` is not a class, is not
    decorated, or only inherits a declaration from a decorated base (a
    subclass is another class and needs its own decorator).
    """
    if isinstance(cls, SpotType):
        return cls
    if not isinstance(cls, type):
        raise InvalidConfiguration(
            f"expected a Spot class, got {cls!r}; pass the class decorated with "
            "@zl.instance_spot or @zl.user_spot"
        )
    definition = vars(cls).get(_ATTR)
    if isinstance(definition, SpotType):
        return definition
    inherited = getattr(cls, _ATTR, None)
    hint = (
        f" (it only inherits the declaration of {inherited.cls.__qualname__}, and a "
        "subclass needs its own)"
        if isinstance(inherited, SpotType)
        else ""
    )
    raise InvalidConfiguration(
        f"{cls.__qualname__} is not a Spot type{hint}; decorate it with @zl.instance_spot, "
        "@zl.user_spot or @zl.actor"
    )


def relocation_of(spot_type: SpotType) -> RelocationPolicy:
    """The relocation policy of ``spot_type``; an Entry type never moves."""
    if isinstance(spot_type, UserSpotType | InstanceSpotType | ActorType):
        return spot_type.relocation
    return DisableRelocation()

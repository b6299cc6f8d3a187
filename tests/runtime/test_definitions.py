"""Spot type declarations: decorators, handler tables, hooks, relocation policies, registry.

Plain synchronous tests: declaring a Spot type runs no event loop. This module
uses ``from __future__ import annotations`` on purpose, so every annotation
the decorators read is a string that must be resolved (including classes
declared inside the test functions).
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from zlink_trio.core.errors import InvalidConfiguration, InvalidOperation, NotFound, TypeMismatch
from zlink_trio.core.identity import SpotKind
from zlink_trio.runtime.declaration.handlers import HandlerTable, Hook, handler
from zlink_trio.runtime.declaration.policies import (
    CloseReason,
    DisableRelocation,
    PreserveStateWith,
    RecreateOnRelocation,
    Reject,
    RelocationPolicy,
)
from zlink_trio.runtime.declaration.registry import SpotTypeRegistry
from zlink_trio.runtime.declaration.spot_types import (
    EntrySpotType,
    InstanceSpotType,
    SpotHooks,
    SpotType,
    UserSpotType,
    actor,
    instance_spot,
    spot_type_of,
    user_spot,
)
from zlink_trio.wire.codec import MessageCodec, type_name_of


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Total:
    value: int


@attrs.frozen
class Reset:
    pass


@attrs.frozen
class RoomSpec:
    title: str


class NotAttrs:
    pass


@instance_spot("counter", relocation=RecreateOnRelocation())
class Counter:
    def __init__(self, ctx: object) -> None:
        self.ctx = ctx
        self.total = 0

    @handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total)

    @handler
    async def reset(self, msg: Reset) -> None:
        self.total = 0

    def on_activate(self) -> None:
        pass

    async def on_close(self, reason: CloseReason) -> None:
        pass


@user_spot("room", relocation=DisableRelocation())
class Room:
    def __init__(self, ctx: object, request: RoomSpec | None) -> None:
        self.ctx, self.request = ctx, request

    def on_create(self, request: RoomSpec | None) -> Reject | None:
        return None if request else Reject(Total(0))


class Adapter:
    def capture(self, spot: Any) -> bytes:
        return b""

    def restore(self, spot: Any, data: bytes) -> None:
        pass


# --------------------------------------------------------------------------- decorators


def test_instance_spot_attaches_an_instance_spot_type_and_returns_the_class():
    definition = spot_type_of(Counter)
    assert Counter.__zlink_spot__ is definition  # type: ignore[attr-defined]
    assert isinstance(definition, InstanceSpotType)
    assert definition.kind is SpotKind.INSTANCE
    assert (definition.stable_type, definition.cls) == ("counter", Counter)
    assert definition.relocation == RecreateOnRelocation()
    assert Counter(None).total == 0  # still the plain class


def test_user_spot_attaches_a_user_spot_type_with_its_hooks():
    definition = spot_type_of(Room)
    assert isinstance(definition, UserSpotType)
    assert definition.kind is SpotKind.USER
    assert definition.relocation == DisableRelocation()
    assert definition.hooks == SpotHooks(on_create=Hook("on_create", is_async=False))


def test_the_three_kinds_are_separate_types():
    """09 §1: no value can be two kinds at once."""
    kinds = {EntrySpotType: SpotKind.ENTRY, UserSpotType: SpotKind.USER,
             InstanceSpotType: SpotKind.INSTANCE}
    for cls, kind in kinds.items():
        assert cls.kind is kind
        assert issubclass(cls, SpotType)
        assert not any(issubclass(cls, other) for other in kinds if other is not cls)
    with pytest.raises(TypeError, match="abstract"):
        SpotType(stable_type="x", cls=Counter, handlers=HandlerTable({}, {}))


def test_construct_calls_the_constructor_the_kind_defines():
    counter = spot_type_of(Counter)
    room = spot_type_of(Room)
    assert isinstance(counter, InstanceSpotType)
    assert isinstance(room, UserSpotType)
    assert counter.construct("ctx").ctx == "ctx"  # type: ignore[attr-defined]
    built = room.construct("ctx", RoomSpec("t"))
    assert (built.ctx, built.request) == ("ctx", RoomSpec("t"))  # type: ignore[attr-defined]


@pytest.mark.parametrize("decorator", [instance_spot, user_spot])
def test_relocation_policy_is_required(decorator):
    with pytest.raises(InvalidConfiguration) as caught:
        decorator("thing")
    message = caught.value.message
    for choice in ("DisableRelocation()", "RecreateOnRelocation()", "PreserveStateWith(adapter)"):
        assert choice in message


@pytest.mark.parametrize("decorator", [instance_spot, user_spot])
def test_relocation_policy_must_be_a_policy_instance(decorator):
    with pytest.raises(InvalidConfiguration, match=r"not an instance.*DisableRelocation\("):
        decorator("thing", relocation=DisableRelocation)
    with pytest.raises(InvalidConfiguration, match="must be one of"):
        decorator("thing", relocation="disable")


@pytest.mark.parametrize("stable_type", ["", "x" * 256, 7, "\ud800"])
def test_stable_type_is_validated(stable_type):
    with pytest.raises(InvalidConfiguration, match="stable type"):
        instance_spot(stable_type, relocation=DisableRelocation())


def test_a_class_declared_twice_is_refused():
    with pytest.raises(InvalidConfiguration, match="already declared as Instance Spot type"):
        user_spot("counter-as-user", relocation=DisableRelocation())(Counter)
    with pytest.raises(InvalidConfiguration, match="exactly one Spot or Actor type"):
        instance_spot("counter-again", relocation=DisableRelocation())(Counter)
    with pytest.raises(InvalidConfiguration, match="already declared as Instance Spot type"):
        actor("counter-as-actor", relocation=DisableRelocation())(Counter)
    assert spot_type_of(Counter).stable_type == "counter"


def test_decorators_only_take_classes():
    with pytest.raises(InvalidConfiguration, match="decorates classes"):
        instance_spot("f", relocation=DisableRelocation())(lambda ctx: None)


def test_spot_type_of_an_undecorated_class_says_how_to_fix_it():
    with pytest.raises(InvalidConfiguration,
                       match=r"decorate it with @zl.instance_spot, @zl.user_spot or @zl.actor"):
        spot_type_of(NotAttrs)
    with pytest.raises(InvalidConfiguration, match="pass the class decorated"):
        spot_type_of("counter")


def test_a_subclass_needs_its_own_declaration():
    class Special(Counter):
        pass

    with pytest.raises(InvalidConfiguration, match="only inherits the declaration of Counter"):
        spot_type_of(Special)

    declared = instance_spot("special", relocation=DisableRelocation())(Special)
    definition = spot_type_of(declared)
    assert definition.stable_type == "special"
    assert definition.handlers.find(Add).name == "add"  # handlers are inherited
    assert spot_type_of(Counter).stable_type == "counter"


# --------------------------------------------------------------------------- handlers


def test_handler_table_maps_message_classes_to_handlers_and_reply_types():
    table = spot_type_of(Counter).handlers
    add = table.find(Add)
    assert (add.name, add.message_type, add.reply_type) == ("add", Add, Total)
    assert table.find(Reset).reply_type is None
    assert len(table) == 2
    assert Add in table
    assert set(table.message_types) == {Add, Reset}


def test_handler_lookup_by_unknown_type_is_a_type_mismatch_listing_the_accepted_ones():
    table = spot_type_of(Counter).handlers
    with pytest.raises(TypeMismatch) as caught:
        table.find(Total)
    assert type_name_of(Add) in caught.value.message
    assert type_name_of(Reset) in caught.value.message


def test_dispatch_is_by_exact_class_not_subclass():
    @attrs.frozen
    class BigAdd(Add):
        pass

    with pytest.raises(TypeMismatch):
        spot_type_of(Counter).handlers.find(BigAdd)


def test_wire_names_map_to_message_classes_for_network_dispatch():
    table = spot_type_of(Counter).handlers
    assert dict(table.by_wire_name) == {type_name_of(Add): Add, type_name_of(Reset): Reset}
    codec = MessageCodec()
    encoded = codec.encode(Add(3))
    assert table.find_wire(encoded.type_name).name == "add"
    assert codec.decode_any(encoded.type_name, encoded.body, table.by_wire_name) == Add(3)
    with pytest.raises(TypeMismatch, match="no handler for wire message type 'x:Y'"):
        table.find_wire("x:Y")


def test_handler_table_is_immutable():
    table = spot_type_of(Counter).handlers
    with pytest.raises(TypeError):
        table.by_type[Total] = table.find(Add)  # type: ignore[index]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        table.by_type = {}  # type: ignore[misc]


def test_handlers_resolve_classes_declared_in_the_same_function():
    @attrs.frozen
    class Ping:
        pass

    @attrs.frozen
    class Pong:
        pass

    @instance_spot("local", relocation=DisableRelocation())
    class Local:
        def __init__(self, ctx: object) -> None:
            pass

        @handler
        async def ping(self, msg: Ping) -> Pong:
            return Pong()

    assert spot_type_of(Local).handlers.find(Ping).reply_type is Pong


def test_unresolvable_annotation_is_reported_clearly():
    with pytest.raises(InvalidConfiguration, match=r"cannot resolve.*Later.*before the Spot class"):

        @instance_spot("early", relocation=DisableRelocation())
        class Early:
            def __init__(self, ctx: object) -> None:
                pass

            @handler
            async def go(self, msg: Later) -> None:
                pass

    @attrs.frozen
    class Later:
        pass


def test_handler_must_be_async():
    def sync(self, msg: Add) -> None:
        pass

    async def agen(self, msg: Add):
        yield

    for fn in (sync, agen, staticmethod(sync), "add"):
        with pytest.raises(InvalidConfiguration, match="async def"):
            handler(fn)  # type: ignore[type-var]


def _spot_with(method: Any, stable_type: str = "bad") -> type:
    namespace = {"__init__": lambda self, ctx: None, "handle": method}
    return instance_spot(stable_type, relocation=DisableRelocation())(type("Bad", (), namespace))


async def _no_annotation(self, msg) -> None:
    pass


async def _no_return(self, msg: Add):
    pass


async def _int_message(self, msg: int) -> None:
    pass


async def _union_message(self, msg: Add | Reset) -> None:
    pass


async def _plain_message(self, msg: NotAttrs) -> None:
    pass


async def _plain_reply(self, msg: Add) -> NotAttrs:
    return NotAttrs()


async def _two_args(self, msg: Add, extra: int) -> None:
    pass


@pytest.mark.parametrize(
    ("fn", "needle"),
    [
        (_no_annotation, "no annotation on 'msg'"),
        (_no_return, "no return annotation"),
        (_int_message, "not an attrs class"),
        (_union_message, "not supported"),
        (_plain_message, "message class NotAttrs is not an attrs class"),
        (_plain_reply, "reply class NotAttrs is not an attrs class"),
        (_two_args, "exactly (self, msg)"),
    ],
)
def test_bad_handler_declarations_are_invalid_configuration(fn, needle):
    with pytest.raises(InvalidConfiguration) as caught:
        _spot_with(handler(fn))
    assert needle in caught.value.message


def test_two_handlers_for_one_message_class_are_refused():
    with pytest.raises(InvalidConfiguration, match=r"two handlers for .*Add"):

        @instance_spot("twice", relocation=DisableRelocation())
        class Twice:
            def __init__(self, ctx: object) -> None:
                pass

            @handler
            async def one(self, msg: Add) -> None:
                pass

            @handler
            async def two(self, msg: Add) -> Total:
                return Total(0)


def test_a_hook_name_cannot_be_a_handler():
    async def on_close(self, msg: Add) -> None:
        pass

    with pytest.raises(InvalidConfiguration, match="lifecycle hook name"):
        instance_spot("hooky", relocation=DisableRelocation())(
            type("Hooky", (), {"__init__": lambda self, ctx: None, "on_close": handler(on_close)})
        )


# --------------------------------------------------------------------------- hooks and ctor


def test_on_create_is_only_for_user_spots():
    with pytest.raises(InvalidConfiguration, match="only User Spots"):

        @instance_spot("creator", relocation=DisableRelocation())
        class Creator:
            def __init__(self, ctx: object) -> None:
                pass

            def on_create(self, request: object) -> None:
                pass


def test_hooks_may_be_sync_or_async():
    hooks = spot_type_of(Counter).hooks
    assert hooks.on_activate == Hook("on_activate", is_async=False)
    assert hooks.on_close == Hook("on_close", is_async=True)
    assert hooks.on_create is None


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("on_close", lambda self: None, "on_close(self, reason)"),
        ("on_activate", lambda self, extra: None, "on_activate(self)"),
        ("on_activate", staticmethod(lambda: None), "must be a plain method"),
        ("on_close", 42, "must be a plain method"),
    ],
)
def test_hook_signatures_are_checked(name, value, needle):
    cls = type("Hooked", (), {"__init__": lambda self, ctx: None, name: value})
    with pytest.raises(InvalidConfiguration) as caught:
        instance_spot("hooked", relocation=DisableRelocation())(cls)
    assert needle in caught.value.message


def test_constructor_arity_follows_the_kind():
    with pytest.raises(InvalidConfiguration, match=r"define __init__\(self, ctx\)"):
        instance_spot("no-ctx", relocation=DisableRelocation())(type("NoCtx", (), {}))
    with pytest.raises(InvalidConfiguration, match=r"define __init__\(self, ctx, request\)"):
        user_spot("no-request", relocation=DisableRelocation())(
            type("NoRequest", (), {"__init__": lambda self, ctx: None})
        )
    defaulted = type("Defaulted", (), {"__init__": lambda self, ctx, request=None: None})
    assert spot_type_of(user_spot("defaulted", relocation=DisableRelocation())(defaulted))


# --------------------------------------------------------------------------- values


def test_relocation_policies_are_frozen_values():
    assert DisableRelocation() == DisableRelocation()
    assert DisableRelocation() != RecreateOnRelocation()
    adapter = Adapter()
    assert PreserveStateWith(adapter).adapter is adapter
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        PreserveStateWith(adapter).adapter = Adapter()  # type: ignore[misc]
    with pytest.raises(TypeError, match="abstract"):
        RelocationPolicy()


def test_preserve_state_with_checks_its_adapter():
    with pytest.raises(InvalidConfiguration, match="no callable restore"):
        PreserveStateWith(type("Half", (), {"capture": lambda self, spot: b""})())
    with pytest.raises(InvalidConfiguration, match="no callable capture or restore"):
        PreserveStateWith(object())  # type: ignore[arg-type]
    with pytest.raises(InvalidConfiguration, match=r"PreserveStateWith\(Adapter\(\)\)"):
        PreserveStateWith(Adapter)  # type: ignore[arg-type]
    spot = instance_spot("kept", relocation=PreserveStateWith(Adapter()))(
        type("Kept", (), {"__init__": lambda self, ctx: None})
    )
    assert isinstance(spot_type_of(spot).relocation, PreserveStateWith)  # type: ignore[attr-defined]


def test_reject_carries_an_optional_attrs_reply():
    assert Reject().reply is None
    assert Reject(Total(1)).reply == Total(1)
    with pytest.raises(InvalidOperation, match="attrs instance"):
        Reject("no")


def test_close_reasons_are_named():
    assert {reason.name for reason in CloseReason} >= {
        "CLOSED", "IDLE_EVICTED", "NODE_SHUTDOWN", "ACTIVATION_FAILED"
    }
    assert CloseReason.IDLE_EVICTED == "idle_evicted"


# --------------------------------------------------------------------------- registry


def test_registry_indexes_types_by_stable_type_and_kind():
    registry = SpotTypeRegistry.build([Room, Counter])
    assert len(registry) == 2
    assert "room" in registry
    assert registry.get("counter") is spot_type_of(Counter)
    assert registry.get("nope") is None
    assert [t.cls for t in registry.instance_types()] == [Counter]
    assert [t.cls for t in registry.user_types()] == [Room]
    assert [t.stable_type for t in registry] == ["counter", "room"]
    with pytest.raises(TypeError):
        registry.by_stable_type["x"] = spot_type_of(Room)  # type: ignore[index]


def test_registering_one_stable_type_twice_is_a_startup_error():
    other = instance_spot("counter", relocation=DisableRelocation())(
        type("OtherCounter", (), {"__init__": lambda self, ctx: None})
    )
    with pytest.raises(InvalidConfiguration, match="'counter' is registered twice"):
        SpotTypeRegistry.build([Counter, other])
    with pytest.raises(InvalidConfiguration, match="registered twice"):
        SpotTypeRegistry.build([Counter, Counter])


def test_registry_refuses_undecorated_classes():
    with pytest.raises(InvalidConfiguration, match="decorate it with"):
        SpotTypeRegistry.build([NotAttrs])


def test_registry_lookup_tells_missing_from_wrong_kind():
    registry = SpotTypeRegistry.build([Room, Counter])
    assert registry.lookup("room", SpotKind.USER) is spot_type_of(Room)
    with pytest.raises(NotFound, match="serves no Spot type 'nope'"):
        registry.lookup("nope", SpotKind.USER)
    wrong_kind = "'room' has kind User, but this operation needs kind Instance"
    with pytest.raises(TypeMismatch, match=wrong_kind):
        registry.lookup("room", SpotKind.INSTANCE)


def test_a_message_class_from_a_script_run_as_main_names_that_cause():
    table = spot_type_of(Counter).handlers
    with pytest.raises(TypeMismatch, match=r"defined in a script run as __main__.*"
                                           r"__zlink_type__"):
        table.find_wire("__main__:Add")
    with pytest.raises(TypeMismatch, match="same application version"):
        table.find_wire("app.messages:Gone")

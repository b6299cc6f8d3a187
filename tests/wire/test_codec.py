"""The typed JSON message codec: round trips, bounds, strictness, type names.

Pure tests, no event loop: the codec is sans-IO.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import json
from typing import ClassVar

import attrs
import cattrs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from zlink_trio.core.errors import (
    InvalidConfiguration,
    InvalidOperation,
    ProtocolError,
    RemoteProtocolError,
    TypeMismatch,
)
from zlink_trio.core.identity import NodeRid
from zlink_trio.wire.codec import (
    MAX_BODY_BYTES,
    EncodedMessage,
    MessageCodec,
    dump_json,
    load_json,
    make_converter,
    message_table,
    type_name_of,
)

# --------------------------------------------------------------------------- messages


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mode(enum.StrEnum):
    FAST = "fast"
    SAFE = "safe"


@attrs.frozen
class Point:
    x: int
    y: float


@attrs.frozen
class Everything:
    i: int
    f: float
    s: str
    b: bool
    raw: bytes
    when: dt.datetime
    day: dt.date
    color: Color
    level: Level
    mode: Mode
    maybe: int | None
    scalar: int | str | None
    ints: list[int]
    names: tuple[str, ...]
    pair: tuple[int, str]
    points: dict[str, Point]
    nested: list[dict[str, list[Point]]]
    inner: Point | None = None


@attrs.frozen
class Tree:
    label: str
    children: tuple[Tree, ...] = ()


@attrs.frozen
class Blob:
    s: str


@attrs.frozen
class Pinned:
    __zlink_type__: ClassVar[str] = "shop.Pinned/v1"
    n: int = 0


@attrs.frozen
class PinnedChild(Pinned):
    pass


@attrs.frozen
class Outer:
    @attrs.frozen
    class Inner:
        n: int

    inner: Inner


@attrs.frozen
class Routed:
    rid: NodeRid


@attrs.frozen
class Positive:
    n: int = attrs.field()

    @n.validator
    def _check(self, attribute: attrs.Attribute[int], value: int) -> None:
        if value <= 0:
            raise ValueError("n must be positive")


# --------------------------------------------------------------------------- strategies

finite_floats = st.floats(allow_nan=False, allow_infinity=False)
points = st.builds(Point, x=st.integers(), y=finite_floats)
offsets = st.sampled_from(
    [
        None,
        dt.UTC,
        dt.timezone(dt.timedelta(hours=5, minutes=30)),
        dt.timezone(-dt.timedelta(hours=8)),
    ]
)
everything = st.builds(
    Everything,
    i=st.integers(),
    f=finite_floats,
    s=st.text(),
    b=st.booleans(),
    raw=st.binary(),
    when=st.datetimes(timezones=offsets),
    day=st.dates(),
    color=st.sampled_from(Color),
    level=st.sampled_from(Level),
    mode=st.sampled_from(Mode),
    maybe=st.none() | st.integers(),
    scalar=st.none() | st.integers() | st.text(),
    ints=st.lists(st.integers()),
    names=st.lists(st.text()).map(tuple),
    pair=st.tuples(st.integers(), st.text()),
    points=st.dictionaries(st.text(), points),
    nested=st.lists(
        st.dictionaries(st.text(), st.lists(points, max_size=3), max_size=3), max_size=3
    ),
    inner=st.none() | points,
)
trees = st.recursive(
    st.builds(Tree, label=st.text(max_size=5)),
    lambda kids: st.builds(Tree, label=st.text(max_size=5), children=st.lists(kids).map(tuple)),
    max_leaves=20,
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | finite_floats | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=15,
)

CODEC = MessageCodec()


# --------------------------------------------------------------------------- round trips


@given(everything)
def test_round_trip_everything(msg: Everything) -> None:
    encoded = CODEC.encode(msg)
    assert encoded.type_name == f"{Everything.__module__}:Everything"
    decoded = CODEC.decode(encoded.type_name, encoded.body, Everything)
    assert decoded == msg
    assert type(decoded.names) is tuple
    assert type(decoded.color) is Color
    assert type(decoded.level) is Level
    # Deterministic: re-encoding the decoded value gives the same bytes.
    assert CODEC.encode(decoded) == encoded


@given(trees)
def test_round_trip_recursive(tree: Tree) -> None:
    encoded = CODEC.encode(tree)
    assert CODEC.decode(encoded.type_name, encoded.body, Tree) == tree


@given(st.from_type(Point).filter(lambda p: p.y == p.y and abs(p.y) != float("inf")))
def test_round_trip_from_type(point: Point) -> None:
    encoded = CODEC.encode(point)
    assert CODEC.decode(encoded.type_name, encoded.body, Point) == point


@given(st.integers(min_value=2**53, max_value=2**256) | st.integers(max_value=-(2**53)))
def test_big_ints_stay_exact(n: int) -> None:
    encoded = CODEC.encode(Point(n, 0.0))
    assert str(n).encode() in encoded.body
    assert CODEC.decode(encoded.type_name, encoded.body, Point).x == n


def test_body_is_compact_utf8_json() -> None:
    body = CODEC.encode(Blob("é ü")).body
    assert body == '{"s":"é ü"}'.encode()
    assert json.loads(body) == {"s": "é ü"}


def test_bytes_are_standard_base64() -> None:
    msg = Routed(NodeRid(bytes(range(1, 17))))
    body = json.loads(CODEC.encode(msg).body)
    assert base64.b64decode(body["rid"]["value"]) == bytes(range(1, 17))


# --------------------------------------------------------------------------- type names


def test_nested_class_name_uses_qualname() -> None:
    encoded = CODEC.encode(Outer(Outer.Inner(3)))
    assert encoded.type_name == f"{Outer.__module__}:Outer"
    assert type_name_of(Outer.Inner) == f"{Outer.__module__}:Outer.Inner"


def test_zlink_type_pins_the_name() -> None:
    encoded = CODEC.encode(Pinned(4))
    assert encoded == EncodedMessage("shop.Pinned/v1", b'{"n":4}')
    assert CODEC.decode("shop.Pinned/v1", encoded.body, Pinned) == Pinned(4)


def test_zlink_type_is_not_inherited() -> None:
    assert CODEC.encode(PinnedChild(1)).type_name == f"{PinnedChild.__module__}:PinnedChild"


@pytest.mark.parametrize("bad", [7, "", "x" * 256])
def test_invalid_zlink_type_refused(bad: object) -> None:
    cls = attrs.make_class("Bad", {"n": attrs.field(default=0)})
    cls.__zlink_type__ = bad  # type: ignore[attr-defined]
    with pytest.raises(InvalidOperation):
        CODEC.encode(cls())


def test_over_long_default_name_refused() -> None:
    cls = attrs.make_class("L" * 300, {"n": attrs.field(default=0)})
    with pytest.raises(InvalidOperation, match="__zlink_type__"):
        CODEC.encode(cls())


def test_other_type_name_is_type_mismatch() -> None:
    body = CODEC.encode(Point(1, 2.0)).body
    with pytest.raises(TypeMismatch) as info:
        CODEC.decode(type_name_of(Blob), body, Point)
    assert not isinstance(info.value, ProtocolError)


@pytest.mark.parametrize("name", ["", "x" * 256, "é" * 128, "\ud800"])
def test_malformed_type_name_is_protocol_error(name: str) -> None:
    with pytest.raises(RemoteProtocolError):
        CODEC.decode(name, b'{"x":1,"y":2.0}', Point)


def test_decode_any_dispatches_on_the_name() -> None:
    table = message_table([Point, Pinned, Tree])
    assert set(table) == {type_name_of(Point), "shop.Pinned/v1", type_name_of(Tree)}
    for msg in (Point(1, 2.5), Pinned(3), Tree("a", (Tree("b"),))):
        encoded = CODEC.encode(msg)
        assert CODEC.decode_any(encoded.type_name, encoded.body, table) == msg
    with pytest.raises(TypeMismatch, match="no handler"):
        CODEC.decode_any(type_name_of(Blob), b'{"s":"x"}', table)
    with pytest.raises(RemoteProtocolError):
        CODEC.decode_any("", b"{}", table)


def test_message_table_refuses_shared_names() -> None:
    clash = attrs.make_class("Clash", {"n": attrs.field(default=0)})
    clash.__zlink_type__ = "shop.Pinned/v1"  # type: ignore[attr-defined]
    with pytest.raises(InvalidConfiguration, match=r"shop\.Pinned/v1"):
        message_table([Pinned, clash])
    assert message_table([Point, Point]) == {type_name_of(Point): Point}


# --------------------------------------------------------------------------- refusals at encode


@dataclasses.dataclass(frozen=True)
class NotAttrs:
    n: int


@pytest.mark.parametrize("msg", [1, "text", {"n": 1}, [1], None, NotAttrs(1), Point])
def test_non_attrs_messages_refused(msg: object) -> None:
    with pytest.raises(InvalidOperation, match="messages must be attrs classes"):
        CODEC.encode(msg)


def test_non_attrs_expected_refused() -> None:
    with pytest.raises(InvalidOperation, match="messages must be attrs classes"):
        CODEC.decode(type_name_of(Point), b"{}", NotAttrs)


class Ratio(enum.Enum):
    HALF = 0.5


@pytest.mark.parametrize(
    ("fields", "value"),
    [
        ({"s": attrs.field(type=set[int])}, {1, 2}),
        ({"s": attrs.field(type=frozenset[str])}, frozenset({"a"})),
        ({"s": attrs.field(type=dict[int, str])}, {1: "a"}),
        ({"s": attrs.field(type=Ratio)}, Ratio.HALF),
    ],
)
def test_undecodable_field_types_refused_at_encode(
    fields: dict[str, object], value: object
) -> None:
    cls = attrs.make_class("Odd", fields)
    with pytest.raises(InvalidOperation, match="cannot decode"):
        CODEC.encode(cls(value))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_floats_refused_at_encode(value: float) -> None:
    with pytest.raises(InvalidOperation):
        CODEC.encode(Point(0, value))


def test_unencodable_values_refused() -> None:
    with pytest.raises(InvalidOperation):
        CODEC.encode(Blob("\ud800"))
    with pytest.raises(InvalidOperation):
        CODEC.encode(Blob(object()))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- bounds


def test_default_bound_is_one_mebibyte() -> None:
    assert MAX_BODY_BYTES == 1024 * 1024
    assert MessageCodec().max_body_bytes == MAX_BODY_BYTES
    fits = Blob("a" * (MAX_BODY_BYTES - len(b'{"s":""}')))
    assert len(CODEC.encode(fits).body) == MAX_BODY_BYTES
    with pytest.raises(InvalidOperation, match="bound"):
        CODEC.encode(Blob("a" * (MAX_BODY_BYTES - len(b'{"s":""}') + 1)))
    too_big = b'{"s":"' + b"a" * MAX_BODY_BYTES + b'"}'
    with pytest.raises(RemoteProtocolError, match="bound"):
        CODEC.decode(type_name_of(Blob), too_big, Blob)


def test_bound_counts_bytes_both_ways() -> None:
    codec = MessageCodec(max_body_bytes=100)
    name = type_name_of(Blob)
    at_bound = codec.encode(Blob("é" * 46))  # 8 + 92 bytes
    assert len(at_bound.body) == 100
    assert codec.decode(name, at_bound.body, Blob) == Blob("é" * 46)
    with pytest.raises(InvalidOperation):
        codec.encode(Blob("é" * 46 + "a"))
    over = '{"s":"' + "é" * 46 + 'a"}'
    with pytest.raises(RemoteProtocolError):
        codec.decode(name, over.encode(), Blob)
    # The bound is the codec's, not a property of the message.
    roomier = MessageCodec(max_body_bytes=101)
    assert roomier.decode(name, over.encode(), Blob) == Blob("é" * 46 + "a")


@pytest.mark.parametrize("bound", [0, -1, 1.5, True, "10"])
def test_bound_must_be_a_positive_int(bound: object) -> None:
    with pytest.raises(InvalidConfiguration):
        MessageCodec(max_body_bytes=bound)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- malformed input


def _decode_or_protocol_error(body: bytes) -> None:
    """Decode ``body``: it must give an Everything or raise RemoteProtocolError, nothing else."""
    try:
        result = CODEC.decode(type_name_of(Everything), body, Everything)
    except RemoteProtocolError:
        return
    assert isinstance(result, Everything)


@given(st.binary(max_size=200))
@example(b"")
@example(b"\xff\xfe{\x00}\x00")
@example(b"[" * 100_000)
@example(b"1" * 5000)
@example(b'{"i":NaN}')
@example(b'{"i":1e999}')
@example(b'"\\ud800"')
def test_random_bytes_only_raise_protocol_error(body: bytes) -> None:
    _decode_or_protocol_error(body)


@given(json_values)
def test_wrong_shape_only_raises_protocol_error(value: object) -> None:
    with pytest.raises(RemoteProtocolError):
        CODEC.decode(type_name_of(Everything), json.dumps(value).encode(), Everything)


@given(everything, st.sampled_from([f.name for f in attrs.fields(Everything)]), json_values)
def test_one_bad_field_only_raises_protocol_error(
    msg: Everything, field: str, value: object
) -> None:
    body = json.loads(CODEC.encode(msg).body)
    body[field] = value
    _decode_or_protocol_error(json.dumps(body).encode())


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("x", "5", "$.x"),  # no string-to-int coercion
        ("x", True, "$.x"),  # a bool is not an int
        ("x", 1.0, "$.x"),
        ("y", "1.5", "$.y"),
        ("y", False, "$.y"),
    ],
)
def test_scalars_are_not_coerced(field: str, value: object, path: str) -> None:
    body = {"x": 1, "y": 2.0, field: value}
    with pytest.raises(RemoteProtocolError, match=rf"\{path}"):
        CODEC.decode(type_name_of(Point), json.dumps(body).encode(), Point)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("s", 5),
        ("s", {"a": 1}),
        ("b", "false"),
        ("b", 0),
        ("ints", "123"),  # a string is not a list
        ("ints", {"1": 2}),  # an object is not a list
        ("names", "ab"),
        ("pair", [1]),
        ("pair", [1, "a", 2]),
        ("points", []),
        ("points", {"k": {"x": "1", "y": 1.0}}),
        ("color", "blue"),
        ("color", 1),
        ("level", "1"),
        ("level", True),
        ("level", 3),
        ("mode", 1),
        ("raw", "not base64!"),
        ("when", "yesterday"),
        ("when", 1700000000),
        ("maybe", "1"),
        ("scalar", 1.5),
    ],
)
def test_structure_errors_name_the_field(field: str, value: object) -> None:
    base = json.loads(
        CODEC.encode(
            Everything(
                i=1,
                f=1.0,
                s="",
                b=True,
                raw=b"",
                when=dt.datetime(2020, 1, 1),
                day=dt.date(2020, 1, 1),
                color=Color.RED,
                level=Level.LOW,
                mode=Mode.FAST,
                maybe=None,
                scalar=None,
                ints=[],
                names=(),
                pair=(1, "a"),
                points={},
                nested=[],
            )
        ).body
    )
    base[field] = value
    with pytest.raises(RemoteProtocolError, match=rf"\$\.{field}") as info:
        CODEC.decode(type_name_of(Everything), json.dumps(base).encode(), Everything)
    assert isinstance(info.value.__cause__, Exception)


@pytest.mark.parametrize(
    "body",
    [b'{"x":1,"x":2,"y":1.0}', b'{"x":1,"y":Infinity}', b'{"x":1,"y":1e400}', b"null", b"[1,2]"],
)
def test_non_standard_json_refused(body: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        CODEC.decode(type_name_of(Point), body, Point)


def test_int_where_float_expected_is_accepted() -> None:
    # JSON has one number type; other languages write 2.0 as 2.
    assert CODEC.decode(type_name_of(Point), b'{"x":1,"y":2}', Point) == Point(1, 2.0)


def test_unknown_fields_are_ignored() -> None:
    body = b'{"x":1,"y":2.0,"added_in_v2":[1]}'
    assert CODEC.decode(type_name_of(Point), body, Point) == Point(1, 2.0)


def test_missing_field_is_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError, match="required field missing"):
        CODEC.decode(type_name_of(Point), b'{"x":1}', Point)


def test_validator_failures_become_protocol_errors() -> None:
    zero = base64.b64encode(bytes(16)).decode()
    with pytest.raises(RemoteProtocolError) as info:
        CODEC.decode(type_name_of(Routed), json.dumps({"rid": {"value": zero}}).encode(), Routed)
    assert isinstance(info.value.__cause__, Exception)
    with pytest.raises(RemoteProtocolError):
        CODEC.decode(type_name_of(Positive), b'{"n":-1}', Positive)


# --------------------------------------------------------------------------- converter & helpers


def test_make_converter_is_fresh_and_strict() -> None:
    a, b = make_converter(), make_converter()
    assert a is not b
    assert a is not cattrs.global_converter
    assert cattrs.global_converter.structure("5", int) == 5  # the lenient default, untouched
    with pytest.raises(TypeError):
        a.structure("5", int)


def test_dump_and_load_json_for_non_message_values() -> None:
    conv = make_converter()
    body = dump_json(conv, [Point(1, 2.0)], max_bytes=100)
    assert body == b'[{"x":1,"y":2.0}]'
    assert load_json(conv, body, list[Point], max_bytes=100) == [Point(1, 2.0)]
    with pytest.raises(InvalidOperation):
        dump_json(conv, [Point(1, 2.0)], max_bytes=len(body) - 1)
    with pytest.raises(RemoteProtocolError):
        load_json(conv, body, list[Point], max_bytes=len(body) - 1)
    with pytest.raises(RemoteProtocolError):
        load_json(conv, b'{"x":1}', list[Point], max_bytes=100)


@pytest.mark.parametrize(("body", "decoded"), [
    (b'{"s":"plain ascii"}', "plain ascii"),
    ('{"s":"é ✓"}'.encode(), "é ✓"),
    (b'{"s":"\\u00e9"}', "é"),
    (b'{"s":"\\ud800"}', None),  # a lone surrogate: refused on the slow path too
    (b'{"s":5}', None),
])
def test_the_exact_str_shortcut_decodes_what_the_full_check_decodes(body: bytes,
                                                                    decoded: str | None) -> None:
    # ASCII text of a plain ``str`` field skips the enum and surrogate checks; anything
    # else still goes through them.
    if decoded is None:
        with pytest.raises(RemoteProtocolError):
            CODEC.decode(type_name_of(Blob), body, Blob)
    else:
        assert CODEC.decode(type_name_of(Blob), body, Blob) == Blob(decoded)

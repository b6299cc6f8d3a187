"""JSON key naming: ``__zlink_json_names__ = "camelCase"`` on attrs message classes.

Pure tests, no event loop: the codec is sans-IO.
"""

from __future__ import annotations

import json
from typing import ClassVar, Generic, TypeVar

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zlink_trio.core.errors import InvalidOperation, RemoteProtocolError
from zlink_trio.wire._json_names import JSON_NAME_STYLES, camel_case, json_keys
from zlink_trio.wire.codec import MessageCodec, dump_json, load_json, make_converter, type_name_of

# --------------------------------------------------------------------------- messages


@attrs.frozen
class Line:
    __zlink_json_names__: ClassVar[str] = "camelCase"
    sku_code: str
    unit_count: int


@attrs.frozen
class Order:
    __zlink_json_names__: ClassVar[str] = "camelCase"
    order_id: str
    lines: list[Line]
    lines_by_sku: dict[str, Line]
    history: tuple[Line, ...]
    gift_line: Line | None
    status: str  # one word: the key is the name
    shipping_note: str | None = None
    updated_at_unix_ms: int = 0


@attrs.frozen
class PlainHolder:
    """A class that does not opt in: its own keys stay as written, its nested class's do not."""

    order_id: str
    line: Line


@attrs.frozen
class Keywords:
    __zlink_json_names__: ClassVar[str] = "camelCase"
    from_: str
    class_: int


@attrs.frozen
class ChildOrder(Order):
    parent_id: str = ""


@attrs.frozen
class AttributeChild(Line):
    __zlink_json_names__: ClassVar[str] = "attribute"


@attrs.frozen
class Derived:
    __zlink_json_names__: ClassVar[str] = "camelCase"
    order_id: str
    cached_total: int = attrs.field(init=False, default=0)


T = TypeVar("T")


@attrs.frozen
class Box(Generic[T]):
    __zlink_json_names__: ClassVar[str] = "camelCase"
    inner_value: T


@attrs.frozen
class BoxHolder:
    __zlink_json_names__: ClassVar[str] = "camelCase"
    int_box: Box[int]


CODEC = MessageCodec()

lines = st.builds(Line, sku_code=st.text(), unit_count=st.integers())
orders = st.builds(
    Order,
    order_id=st.text(),
    lines=st.lists(lines, max_size=3),
    lines_by_sku=st.dictionaries(st.text(), lines, max_size=3),
    history=st.lists(lines, max_size=3).map(tuple),
    gift_line=st.none() | lines,
    status=st.text(),
    shipping_note=st.none() | st.text(),
    updated_at_unix_ms=st.integers(),
)


def _keys(value: object) -> object:
    """The JSON object keys of ``value``, recursively, lists flattened."""
    if isinstance(value, dict):
        return {key: _keys(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_keys(inner) for inner in value]
    return None


# --------------------------------------------------------------------------- the naming rule


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("order_id", "orderId"),
        ("updated_at_unix_ms", "updatedAtUnixMs"),
        ("status", "status"),
        ("orderId", "orderId"),
        ("http_URL", "httpURL"),
        ("line_2", "line2"),
        ("from_", "from"),
        ("a__b", "aB"),
        ("_private_key", "_privateKey"),
        ("__dunder", "__dunder"),
        ("_", "_"),
    ],
)
def test_camel_case(name: str, key: str) -> None:
    assert camel_case(name) == key


def test_json_keys_follow_field_order() -> None:
    assert list(json_keys(Order).values()) == [
        "orderId",
        "lines",
        "linesBySku",
        "history",
        "giftLine",
        "status",
        "shippingNote",
        "updatedAtUnixMs",
    ]
    assert json_keys(PlainHolder) == {"order_id": "order_id", "line": "line"}
    assert JSON_NAME_STYLES == ("attribute", "camelCase")


# --------------------------------------------------------------------------- round trips


@given(orders)
def test_round_trip_camel_case(order: Order) -> None:
    encoded = CODEC.encode(order)
    decoded = CODEC.decode(encoded.type_name, encoded.body, Order)
    assert decoded == order
    assert type(decoded.history) is tuple
    assert CODEC.encode(decoded) == encoded


def test_body_spells_every_nested_key_in_camel_case() -> None:
    line = Line("A-1", 2)
    order = Order("o-1", [line], {"sku_key": line}, (line,), None, "Created", "door", 7)
    body = json.loads(CODEC.encode(order).body)
    line_keys = {"skuCode": None, "unitCount": None}
    assert _keys(body) == {
        "orderId": None,
        "lines": [line_keys],
        # Mapping keys are data, not field names: never renamed.
        "linesBySku": {"sku_key": line_keys},
        "history": [line_keys],
        "giftLine": None,
        "status": None,
        "shippingNote": None,
        "updatedAtUnixMs": None,
    }
    assert list(body) == list(json_keys(Order).values())  # field order, as before


def test_optional_fields_take_null_and_values() -> None:
    order = Order("o", [], {}, (), Line("s", 1), "Created", None)
    body = json.loads(CODEC.encode(order).body)
    assert body["giftLine"] == {"skuCode": "s", "unitCount": 1}
    assert body["shippingNote"] is None
    # A missing key takes the default; an explicit null is None.
    minimal = b'{"orderId":"o","lines":[],"linesBySku":{},"history":[],"giftLine":null,' \
        b'"status":"s"}'
    decoded = CODEC.decode(type_name_of(Order), minimal, Order)
    assert decoded.shipping_note is None
    assert decoded.updated_at_unix_ms == 0


def test_a_class_without_the_declaration_keeps_its_names_and_its_nested_class_its_own() -> None:
    holder = PlainHolder("o-1", Line("s", 1))
    body = CODEC.encode(holder).body
    assert body == b'{"order_id":"o-1","line":{"skuCode":"s","unitCount":1}}'
    assert CODEC.decode(type_name_of(PlainHolder), body, PlainHolder) == holder


def test_generic_classes_are_named_too() -> None:
    body = CODEC.encode(BoxHolder(Box(3))).body
    assert body == b'{"intBox":{"innerValue":3}}'
    assert CODEC.decode(type_name_of(BoxHolder), body, BoxHolder) == BoxHolder(Box(3))
    with pytest.raises(RemoteProtocolError, match=r"expected int @ \$\.intBox\.innerValue"):
        CODEC.decode(type_name_of(BoxHolder), b'{"intBox":{"innerValue":"3"}}', BoxHolder)


def test_trailing_underscore_gives_keyword_keys() -> None:
    body = CODEC.encode(Keywords("x", 1)).body
    assert body == b'{"from":"x","class":1}'
    assert CODEC.decode(type_name_of(Keywords), body, Keywords) == Keywords("x", 1)


def test_subclass_inherits_the_style_and_may_set_it_back() -> None:
    child = ChildOrder("o", [], {}, (), None, "s", parent_id="p")
    body = json.loads(CODEC.encode(child).body)
    assert "orderId" in body
    assert body["parentId"] == "p"
    assert CODEC.encode(AttributeChild("s", 1)).body == b'{"sku_code":"s","unit_count":1}'


def test_init_false_fields_stay_off_the_wire() -> None:
    assert CODEC.encode(Derived("o")).body == b'{"orderId":"o"}'
    assert json_keys(Derived) == {"order_id": "orderId"}


def test_records_through_dump_and_load_json_are_named_too() -> None:
    conv = make_converter()
    body = dump_json(conv, [Line("s", 1)], max_bytes=100)
    assert body == b'[{"skuCode":"s","unitCount":1}]'
    assert load_json(conv, body, list[Line], max_bytes=100) == [Line("s", 1)]


# --------------------------------------------------------------------------- strictness on decode

NAME = type_name_of(Order)
GOOD = {
    "orderId": "o",
    "lines": [{"skuCode": "s", "unitCount": 1}],
    "linesBySku": {},
    "history": [],
    "giftLine": None,
    "status": "Created",
}


def _decode(body: object) -> Order:
    return CODEC.decode(NAME, json.dumps(body).encode(), Order)


def test_the_good_body_decodes() -> None:
    assert _decode(GOOD).lines == [Line("s", 1)]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # The Python spelling instead of the contract's, at the top and nested.
        (
            {**{k: v for k, v in GOOD.items() if k != "orderId"}, "order_id": "o"},
            r"key 'order_id' is the Python spelling; Order spells it 'orderId' @ \$",
        ),
        (
            {**GOOD, "lines": [{"sku_code": "s", "unitCount": 1}]},
            r"'sku_code' is the Python spelling; Line spells it 'skuCode' @ \$\.lines\[0\]",
        ),
        (
            {**GOOD, "giftLine": {"skuCode": "s", "unit_count": 1}},
            r"Line spells it 'unitCount' @ \$\.giftLine",
        ),
        # Both spellings: still refused, never silently one of them.
        ({**GOOD, "order_id": "x"}, r"'order_id' is the Python spelling"),
        # A field with a default must not silently take it when misspelled.
        ({**GOOD, "updated_at_unix_ms": 5}, r"spells it 'updatedAtUnixMs'"),
        # Wrong types and missing fields are refused, at the key the sender used.
        ({**GOOD, "orderId": 5}, r"expected str @ \$\.orderId"),
        ({**GOOD, "lines": [{"skuCode": "s", "unitCount": "1"}]}, r"\$\.lines\[0\]\.unitCount"),
        ({**GOOD, "giftLine": {"skuCode": "s"}}, r"missing @ \$\.giftLine\.unitCount"),
        ({k: v for k, v in GOOD.items() if k != "linesBySku"}, r"missing @ \$\.linesBySku"),
        ([GOOD], r"expected a JSON object"),
    ],
)
def test_refused_bodies(body: object, message: str) -> None:
    with pytest.raises(RemoteProtocolError, match=message):
        _decode(body)


def test_duplicate_keys_are_refused() -> None:
    body = json.dumps(GOOD, separators=(",", ":")).encode()
    body = body.replace(b'"orderId":"o"', b'"orderId":"o","orderId":"p"')
    assert body.count(b'"orderId"') == 2
    with pytest.raises(RemoteProtocolError, match="duplicate key"):
        CODEC.decode(NAME, body, Order)


def test_other_unknown_keys_are_still_ignored() -> None:
    # Forward compatibility is unchanged: a key no field of any spelling claims.
    assert _decode({**GOOD, "addedInV2": [1], "added_in_v2": 2}) == _decode(GOOD)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(st.sampled_from(sorted(GOOD)), json_values)
def test_any_value_in_any_field_decodes_or_is_a_protocol_error(key: str, value: object) -> None:
    try:
        result = _decode({**GOOD, key: value})
    except RemoteProtocolError:
        return
    assert isinstance(result, Order)


@given(st.dictionaries(st.text(max_size=12), st.none() | st.integers() | st.text(), max_size=6))
def test_any_object_decodes_or_is_a_protocol_error(extra: dict[str, object]) -> None:
    try:
        result = _decode({**GOOD, **extra})
    except RemoteProtocolError:
        return
    assert isinstance(result, Order)


# --------------------------------------------------------------------------- refusals at encode


def _collision() -> type:
    @attrs.frozen
    class Collision:
        __zlink_json_names__: ClassVar[str] = "camelCase"
        order_id: str
        orderId: str  # the collision under test

    return Collision


def test_colliding_keys_are_refused_at_encode() -> None:
    collision = _collision()
    with pytest.raises(InvalidOperation, match=r"'order_id' and 'orderId' .* JSON key 'orderId'"):
        MessageCodec().encode(collision("a", "b"))
    with pytest.raises(InvalidOperation, match="JSON key 'orderId'"):
        dump_json(make_converter(), collision("a", "b"), max_bytes=100)


def test_a_collision_in_a_nested_class_is_refused_at_encode_of_the_outer() -> None:
    collision = _collision()
    outer = attrs.make_class("Outer", {"inner": attrs.field(type=collision)})
    with pytest.raises(InvalidOperation, match="JSON key 'orderId'"):
        MessageCodec().encode(outer(collision("a", "b")))


def test_digits_and_double_underscores_collide_too() -> None:
    @attrs.frozen
    class Digits:
        __zlink_json_names__: ClassVar[str] = "camelCase"
        line_2: int
        line2: int

    with pytest.raises(InvalidOperation, match="JSON key 'line2'"):
        MessageCodec().encode(Digits(1, 2))


def test_colliding_keys_are_refused_when_decoding_too() -> None:
    collision = _collision()
    with pytest.raises(InvalidOperation, match="JSON key 'orderId'"):
        MessageCodec().decode(type_name_of(collision), b"{}", collision)


@pytest.mark.parametrize("style", ["camelcase", "snake_case", "", 1, None])
def test_unknown_styles_are_refused(style: object) -> None:
    cls = attrs.make_class("Styled", {"order_id": attrs.field(default="")})
    cls.__zlink_json_names__ = style  # type: ignore[attr-defined]
    with pytest.raises(InvalidOperation, match="__zlink_json_names__"):
        MessageCodec().encode(cls())

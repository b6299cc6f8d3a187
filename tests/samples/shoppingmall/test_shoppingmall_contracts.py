"""The shared contracts are the JSON declaration, key for key, through the typed JSON codec.

``spec_6_1_declarations.txt`` beside this file holds the declaration's
``message`` blocks verbatim. Each block is parsed into its fields (name, type,
optional); every contract class is then encoded by the codec the runtime uses,
and its JSON keys, their order, the optional ones and the JSON types must be the
declaration's. Pure tests, no event loop.
"""

from __future__ import annotations

import json
import re
import types
import typing
from pathlib import Path

import attrs
import pytest

from zlink_trio.core.errors import RemoteProtocolError
from zlink_trio.samples.shoppingmall.shared import contracts
from zlink_trio.wire._json_names import json_keys
from zlink_trio.wire.codec import MessageCodec, message_table, type_name_of

SPEC = Path(__file__).with_name("spec_6_1_declarations.txt")
CODEC = MessageCodec()


@attrs.frozen
class Declared:
    name: str
    type: str
    optional: bool


def _declarations() -> dict[str, list[Declared]]:
    text = "\n".join(
        line for line in SPEC.read_text("utf-8").splitlines() if not line.startswith("#")
    )
    blocks = re.findall(r"^message (\w+) \{\n(.*?)^\}", text, re.MULTILINE | re.DOTALL)
    result: dict[str, list[Declared]] = {}
    for name, body in blocks:
        fields = []
        for line in body.strip().splitlines():
            match = re.fullmatch(r"\s*(\w+)(\??): (.+)", line)
            assert match, f"cannot parse {line!r} in {name}"
            fields.append(Declared(match[1], match[3].strip(), match[2] == "?"))
        result[name] = fields
    return result


DECLARED = _declarations()


def test_the_declarations_are_all_read():
    assert len(DECLARED) == 26
    assert [f.name for f in DECLARED["OrderState"]][-1] == "updatedAtUnixMs"


def test_every_declared_message_is_a_contract_and_no_other():
    assert sorted(cl.__name__ for cl in contracts.MESSAGE_TYPES) == sorted(DECLARED)
    assert [cl.__name__ for cl in contracts.MESSAGE_TYPES] == list(DECLARED)  # as declared


# --------------------------------------------------------------------------- sample values


def _sample(tp: object, depth: int = 0) -> object:
    """A value of annotation ``tp`` with every optional field set, so every key carries data."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        (inner,) = (arg for arg in args if arg is not type(None))
        return _sample(inner, depth)
    if origin is tuple:
        return (_sample(args[0], depth), _sample(args[0], depth))
    if isinstance(tp, type) and issubclass(tp, contracts.OrderStatus):
        return contracts.OrderStatus.PAYMENT_AUTHORIZED
    if tp is str:
        return f"text-{depth}"
    if tp is bool:
        return True
    if tp is int:
        return 1_700_000_000_123 + depth
    if tp is float:
        return 12.5
    assert isinstance(tp, type), tp
    assert attrs.has(tp), tp
    hints = typing.get_type_hints(tp)
    return tp(**{f.name: _sample(hints[f.name], depth + 1) for f in attrs.fields(tp)})


@pytest.fixture(params=contracts.MESSAGE_TYPES, ids=lambda cl: cl.__name__)
def contract(request: pytest.FixtureRequest) -> type:
    return request.param


# --------------------------------------------------------------------------- keys and types


def _json_type(value: object) -> str:
    return {bool: "bool", int: "int", float: "number", str: "string", dict: "object",
            list: "array", type(None): "null"}[type(value)]


#: A declared type -> the JSON types its value may have when the field holds data.
_SCALAR_TYPES = {
    "string": {"string"},
    "int32": {"int"},
    "int64": {"int"},
    "number": {"number", "int"},
    "bool": {"bool"},
}


def _check_value(declared: str, value: object, where: str) -> None:
    declared = declared.removesuffix(" | null")
    if declared.endswith("[]"):
        assert _json_type(value) == "array", where
        for item in value:
            _check_value(declared[:-2], item, where + "[]")
    elif declared in _SCALAR_TYPES:
        assert _json_type(value) in _SCALAR_TYPES[declared], where
    elif declared.startswith('"'):
        assert value in re.findall(r'"(\w+)"', declared), where
    else:  # a nested message
        assert _json_type(value) == "object", where
        assert list(value) == [f.name for f in DECLARED[declared]], where
        for field in DECLARED[declared]:
            _check_value(field.type, value[field.name], f"{where}.{field.name}")


def test_json_keys_and_types_are_the_declaration(contract: type) -> None:
    body = json.loads(CODEC.encode(_sample(contract)).body)
    declared = DECLARED[contract.__name__]
    assert list(body) == [f.name for f in declared]
    for field in declared:
        _check_value(field.type, body[field.name], f"{contract.__name__}.{field.name}")


def test_optional_fields_and_only_they_may_be_absent(contract: type) -> None:
    declared = {f.name: f for f in DECLARED[contract.__name__]}
    body = json.loads(CODEC.encode(_sample(contract)).body)
    for key in body:
        without = {k: v for k, v in body.items() if k != key}
        data = json.dumps(without).encode()
        if declared[key].optional:
            assert getattr(CODEC.decode(type_name_of(contract), data, contract),
                           _attribute_of(contract, key)) is None
        else:
            with pytest.raises(RemoteProtocolError):
                CODEC.decode(type_name_of(contract), data, contract)


def _attribute_of(contract: type, key: str) -> str:
    (name,) = (name for name, json_key in json_keys(contract).items() if json_key == key)
    return name


def test_round_trip_and_pinned_type_names(contract: type) -> None:
    value = _sample(contract)
    encoded = CODEC.encode(value)
    assert encoded.type_name == f"shoppingmall.{contract.__name__}"
    assert CODEC.decode(encoded.type_name, encoded.body, contract) == value


def test_snake_case_keys_are_refused(contract: type) -> None:
    body = json.loads(CODEC.encode(_sample(contract)).body)
    renamed = {name: key for name, key in json_keys(contract).items() if name != key}
    for name, key in renamed.items():
        spelled_python = {(name if k == key else k): v for k, v in body.items()}
        with pytest.raises(RemoteProtocolError, match=f"'{name}' is the Python spelling"):
            CODEC.decode(type_name_of(contract), json.dumps(spelled_python).encode(), contract)


def test_type_names_are_unique_and_table_ready():
    table = message_table(contracts.MESSAGE_TYPES)
    assert len(table) == len(contracts.MESSAGE_TYPES)


def test_status_values_are_the_declared_literals():
    (status,) = (f for f in DECLARED["OrderState"] if f.name == "status")
    assert [s.value for s in contracts.OrderStatus] == re.findall(r'"(\w+)"', status.type)


def test_event_types_are_keyed_by_the_class_name():
    assert list(contracts.EVENT_TYPES) == [name for name in DECLARED if name.endswith("Event")]
    for name, cl in contracts.EVENT_TYPES.items():
        assert cl.__name__ == name


def test_an_int_amount_from_another_language_decodes_as_a_number():
    body = b'{"orderId":"o","paymentId":"p","paymentMethodId":"m","amount":12,"currency":"KRW"}'
    req = CODEC.decode("shoppingmall.AuthorizePaymentReq", body, contracts.AuthorizePaymentReq)
    assert req.amount == 12.0
    assert type(req.amount) is float

"""The error hierarchy: stable wire codes, docstrings, and rebuilding errors from codes."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zlink_trio.core import errors
from zlink_trio.core.errors import (
    CapacityExceeded,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    ZLinkError,
    error_for_code,
)

#: The wire contract: name -> (code, direct parent). Changing a row breaks
#: peers of other versions; add rows for new classes, never renumber.
PINNED: dict[str, tuple[int, str | None]] = {
    "ZLinkError": (1, None),
    "NotFound": (2, "ZLinkError"),
    "NotConfigured": (3, "ZLinkError"),
    "InvalidOperation": (4, "ZLinkError"),
    "InvalidConfiguration": (5, "InvalidOperation"),
    "CapacityExceeded": (6, "ZLinkError"),
    "TypeMismatch": (7, "ZLinkError"),
    "AlreadyExists": (8, "ZLinkError"),
    "DeadlineExceeded": (9, "ZLinkError"),
    "Unavailable": (10, "ZLinkError"),
    "StaleFence": (11, "Unavailable"),
    "StaleRoute": (12, "ZLinkError"),
    "ProtocolError": (13, "ZLinkError"),
    "LocalProtocolError": (14, "ProtocolError"),
    "RemoteProtocolError": (15, "ProtocolError"),
    "HandlerError": (16, "ZLinkError"),
    "StoreUnavailable": (17, "Unavailable"),
    "NodeLost": (18, "Unavailable"),
}


def _error_classes() -> list[type[ZLinkError]]:
    """Every ZLinkError class in the errors module's namespace, exported or not.

    ``__module__`` is not used: the public package rewrites it to ``zlink_trio``.
    Private names are skipped: the module's registration loop leaves ``_cls`` behind.
    """
    return [
        obj
        for name, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, ZLinkError) and not name.startswith("_")
    ]


ALL = _error_classes()
CONCRETE = [cls for cls in ALL if cls is not ProtocolError]


def test_every_class_is_pinned_and_exported() -> None:
    assert {cls.__name__ for cls in ALL} == set(PINNED)
    assert set(PINNED) <= set(errors.__all__)


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_codes_and_parents_are_pinned(cls: type[ZLinkError]) -> None:
    code, parent = PINNED[cls.__name__]
    # Each class states its own code: an inherited code would alias its parent.
    assert cls.__dict__["code"] == code
    if parent is None:
        assert cls.__bases__ == (Exception,)
    else:
        assert [base.__name__ for base in cls.__bases__] == [parent]


def test_codes_are_unique() -> None:
    codes = [cls.code for cls in ALL]
    assert len(codes) == len(set(codes))


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_every_class_documents_when_it_is_raised(cls: type[ZLinkError]) -> None:
    doc = cls.__dict__.get("__doc__")
    assert doc, f"{cls.__name__} has no docstring of its own"
    assert "raise" in doc.lower(), f"{cls.__name__}'s docstring does not say when it is raised"


@pytest.mark.parametrize(
    "cls", [c for c in CONCRETE if not issubclass(c, ProtocolError)], ids=lambda c: c.__name__
)
def test_error_for_code_round_trips(cls: type[ZLinkError]) -> None:
    rebuilt = error_for_code(cls.code, "what went wrong; what to do")
    assert type(rebuilt) is cls
    assert rebuilt.message == "what went wrong; what to do"
    assert str(rebuilt) == "what went wrong; what to do"
    assert repr(rebuilt) == f"{cls.__name__}('what went wrong; what to do')"


@given(st.integers().filter(lambda n: n not in {code for code, _ in PINNED.values()}), st.text())
def test_unknown_codes_become_plain_zlink_error(code: int, message: str) -> None:
    rebuilt = error_for_code(code, message)
    assert type(rebuilt) is ZLinkError
    assert rebuilt.message == message


@pytest.mark.parametrize("cls", [ProtocolError, LocalProtocolError, RemoteProtocolError])
def test_every_protocol_error_code_from_a_peer_maps_to_remote(cls: type[ProtocolError]) -> None:
    # Seen from here, a protocol failure a peer reports came from the other side of the link.
    rebuilt = error_for_code(cls.code, "bad frame")
    assert type(rebuilt) is RemoteProtocolError
    assert rebuilt.message == "bad frame"


def test_protocol_error_is_abstract() -> None:
    with pytest.raises(TypeError, match="abstract"):
        ProtocolError("x")
    for concrete in (LocalProtocolError("x"), RemoteProtocolError("x")):
        assert isinstance(concrete, ProtocolError)
        assert concrete.message == "x"


def test_capacity_exceeded_carries_lane() -> None:
    err = CapacityExceeded("application lane is full; retry later", lane="application")
    assert err.lane == "application"
    assert err.message == "application lane is full; retry later"
    assert CapacityExceeded("active-object ceiling reached").lane is None
    with pytest.raises(TypeError):
        CapacityExceeded("m", "lifecycle")  # type: ignore[call-arg]


def test_a_handler_error_names_what_the_handler_raised_after_the_wire():
    from zlink_trio.core.errors import HandlerError, error_for_code, handler_error_type

    message = "handler Cart.add raised Outer.Invalid: no such line; the Spot keeps running"
    rebuilt = error_for_code(HandlerError.code, message)
    assert isinstance(rebuilt, HandlerError)
    assert rebuilt.error_type == "Outer.Invalid"
    assert rebuilt.message == message
    assert handler_error_type("the handler returned None, not Total") == ""

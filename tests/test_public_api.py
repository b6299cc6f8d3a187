"""The public surface of ``zlink_trio`` is curated: everything exported is listed and documented.

Like trio's ``test_exports.py`` and anyio's ``test_all_attributes.py``: a name a
user can import from ``zlink_trio`` is a contract, so it must be in ``__all__``,
carry a docstring, and report ``zlink_trio`` as its module.
"""

from __future__ import annotations

import inspect

import zlink_trio as zl


def test_all_is_a_sorted_tuple_of_unique_names():
    assert isinstance(zl.__all__, tuple)
    assert len(set(zl.__all__)) == len(zl.__all__)
    assert list(zl.__all__) == sorted(zl.__all__)


def test_every_public_attribute_is_listed_in_all():
    public = {
        name
        for name, obj in vars(zl).items()
        if not name.startswith("_") and not inspect.ismodule(obj)
    }
    assert public == set(zl.__all__)


def test_every_export_is_documented_and_reports_the_public_module():
    for name in zl.__all__:
        obj = getattr(zl, name)
        assert inspect.getdoc(obj), f"zlink_trio.{name} has no docstring"
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert obj.__module__ == "zlink_trio", name


def test_errors_named_by_the_design_are_importable_and_share_one_root():
    names = [
        "NotFound", "NotConfigured", "InvalidOperation", "CapacityExceeded", "TypeMismatch",
        "AlreadyExists", "DeadlineExceeded", "Unavailable", "StaleRoute", "ProtocolError",
    ]
    for name in names:
        assert issubclass(getattr(zl, name), zl.ZLinkError), name

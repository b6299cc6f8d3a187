"""``load`` measures what it says: every order it starts is confirmed and counted."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from zlink_trio.samples.shoppingmall.runner.load import load

if TYPE_CHECKING:
    import pytest


def test_load_confirms_every_order_it_starts_through_both_apis(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert load(None, clients=4, orders=12, order_timeout=30.0) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["orders"] == result["confirmed"] == 12
    assert result["failed"] == 0
    assert result["orders_per_s"] > 0
    assert 0 < result["start_order_ms"]["p50"] <= result["start_order_ms"]["p99"]

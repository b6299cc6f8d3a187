"""The activation envelope's bytes are the sorted compact JSON of its fields, whatever the text."""

from __future__ import annotations

import json

import pytest

from zlink_trio.runtime.coordinators.envelope import ENVELOPE_FORMAT, ActivationEnvelope
from zlink_trio.wire.codec import EncodedMessage

TEXTS = ["plain", 'quo"te\\back', "\u00e9t\u00e9 \u2603 \U0001f600", "ctl\n\t\x00\x7f", "/slash</"]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("deadline_ms", [None, 1, 1_767_225_600_123])
def test_envelope_bytes_are_the_sorted_compact_json(text: str, deadline_ms: int | None):
    envelope = ActivationEnvelope(
        operation_id=f"op-{text}", spot_id=f"id-{text}", stable_type=f"t-{text}",
        mesh=f"m-{text}", recorded_by=f"rid-{text}",
        message=EncodedMessage(f"type-{text}", text.encode("utf-8") + b"\xff\x00"),
        deadline_ms=deadline_ms)
    encoded = envelope.encode()
    fields = json.loads(encoded)
    assert encoded == json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    assert fields["format"] == ENVELOPE_FORMAT
    assert ActivationEnvelope.decode(encoded) == envelope

"""The operator's node operation (command 61) and its reply: the rules only they have.

Pure tests, no event loop. The golden frames and the fuzzing every frame shares are in
``test_frames.py``; here the action/field combinations are tried at their boundaries.
"""

from __future__ import annotations

import pytest
from test_frames import GOLDEN, OWNER_A, OWNER_B, golden, refused

from zlink_trio.core.errors import LocalProtocolError
from zlink_trio.wire.frames import (
    Command,
    NodeAction,
    NodeOperation,
    NodeOperationOutcome,
    RelocateOutcome,
    Reply,
    decode,
    encode,
)


def test_frame_size_matches_the_byte_table():
    # docs/wire.md: 79+a+b bytes (Spot ID, node).
    assert len(golden("operation-relocate")) == 79 + len("r-1") + len("b")
    assert len(golden("operation-drain")) == 79


def test_relocate_may_leave_the_node_out():
    frame = NodeOperation(correlation=1, operation_id=2, source=OWNER_A, target=OWNER_B,
                          action=NodeAction.RELOCATE, spot_id="k-1", deadline_ms=5)
    assert decode(encode(frame)) == frame


@pytest.mark.parametrize(("fields", "needle"), [
    ({"action": NodeAction.RELOCATE}, "names the Spot ID"),
    ({"action": NodeAction.DRAIN, "spot_id": "k-1"}, "names no Spot ID and no node"),
    ({"action": NodeAction.DRAIN, "to_node": "b"}, "names no Spot ID and no node"),
    ({"action": NodeAction.UNDRAIN, "spot_id": "k-1"}, "UNDRAIN node operation names no"),
    ({"action": NodeAction.UNDRAIN, "to_node": "b"}, "names no Spot ID and no node"),
    ({"action": 1, "spot_id": "k-1"}, "action must be a NodeAction"),
    ({"action": NodeAction.RELOCATE, "spot_id": ""}, "spot_id"),
])
def test_constructor_refuses_what_this_side_may_not_send(fields, needle):
    with pytest.raises(LocalProtocolError, match=needle):
        NodeOperation(correlation=1, operation_id=2, source=OWNER_A, target=OWNER_B,
                      deadline_ms=5, **fields)


def test_decoder_refuses_a_bad_action_or_combination():
    refused(golden("operation-drain", action="00"), "unknown node action 0")
    refused(golden("operation-drain", action="04"), "unknown node action 4")
    undrain = decode(golden("operation-drain", action="03"))
    assert undrain.action is NodeAction.UNDRAIN  # type: ignore[attr-defined]
    refused(golden("operation-drain", action="03", node="01 62"),
            "UNDRAIN node operation carries")
    refused(golden("operation-relocate", spot_id="00"), "RELOCATE node operation has no Spot")
    refused(golden("operation-drain", node="01 62"), "DRAIN node operation carries")
    refused(golden("operation-drain", spot_id="03 722d31"), "DRAIN node operation carries")


def test_reply_report_is_bounded_and_only_answers_61():
    refused(golden("reply-operation"), "above the 3-byte limit", max_body_bytes=3)
    refused(golden("reply-operation", report="00000008 7b2261223a317d"), "truncated")
    with pytest.raises(LocalProtocolError):
        Reply(correlation=1, answers=Command.RELOCATE_SPOT,
              outcome=NodeOperationOutcome(report=b"{}"))
    with pytest.raises(LocalProtocolError):
        Reply(correlation=1, answers=Command.NODE_OPERATION,
              outcome=RelocateOutcome(ref=GOLDEN["reply-relocate"][0].outcome.ref))  # type: ignore[attr-defined]
    with pytest.raises(LocalProtocolError, match="report must be bytes"):
        NodeOperationOutcome(report="{}")  # type: ignore[arg-type]

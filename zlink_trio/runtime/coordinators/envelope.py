"""The activation envelope: a cold activation's first message, durable as a recovery root.

Theory of operation
-------------------
In cold activation step 10 (``statecharts.cold_activation``), before it reserves, the
target stores the complete activation envelope in the Relocation Store as an
unchangeable recovery root -- format ``instance-activation-recovery-v1`` -- and a
restarted process reads it back to resume or abort the creation (docs/stores.md, "Crash
recovery").  :class:`ActivationEnvelope` is that record, and the one place that knows
its bytes: compact JSON with sorted keys (the root is content addressed, so the same
envelope always hashes the same).

The deadline is recorded as ``deadlineMs``, wall-clock milliseconds since the Unix epoch
-- the value command 39 carried (route kind 2's deadline must equal the one this
recovery root records) -- so it means the same in the process that wrote it and in any
process that reads it later.  An envelope without it (written before deadlines were
recorded this way) decodes with ``deadline_ms=None``: no deadline is known.
"""

from __future__ import annotations

import base64
import binascii
import json
import json.encoder
from typing import Final

import attrs

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.wire.codec import EncodedMessage

__all__ = ("ENVELOPE_FORMAT", "ActivationEnvelope", "envelope_bytes")

#: The recovery root's format name.
ENVELOPE_FORMAT: Final = "instance-activation-recovery-v1"
# Built once: json.dumps with options builds a new encoder per call.
_ENVELOPE_JSON: Final = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
#: How that encoder writes a ``str`` (``ensure_ascii``: ASCII with escapes).
_quote: Final = json.encoder.encode_basestring_ascii


@attrs.frozen(kw_only=True)
class ActivationEnvelope:
    """One activation envelope (see the module docstring)."""

    operation_id: str
    spot_id: str
    stable_type: str
    mesh: str
    #: The NodeRid of the node that recorded it (the activation's target).
    recorded_by: str
    #: The first message, as the codec encoded it.
    message: EncodedMessage
    #: The operation's deadline, wall-clock ms since the epoch (``None``: not recorded).
    deadline_ms: int | None

    def encode(self) -> bytes:
        """The envelope's bytes (the recovery root)."""
        return envelope_bytes(self.operation_id, self.spot_id, self.stable_type, self.mesh,
                              self.recorded_by, self.message, self.deadline_ms)

    @classmethod
    def decode(cls, data: bytes) -> ActivationEnvelope:
        """The envelope in ``data``; InvalidOperation for bytes that are not one."""
        try:
            fields = json.loads(data)
            if fields.get("format") != ENVELOPE_FORMAT:
                raise ValueError(f"format {fields.get('format')!r}")
            deadline_ms = fields.get("deadlineMs")
            if deadline_ms is not None and (type(deadline_ms) is not int or deadline_ms < 1):
                raise ValueError(f"deadlineMs {deadline_ms!r}")
            return cls(
                operation_id=str(fields["operationId"]), spot_id=str(fields["spotId"]),
                stable_type=str(fields["stableType"]), mesh=str(fields["mesh"]),
                recorded_by=str(fields["sourceNodeRid"]),
                message=EncodedMessage(str(fields["messageType"]),
                                       base64.b64decode(fields["body"], validate=True)),
                deadline_ms=deadline_ms)
        except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as exc:
            raise InvalidOperation(
                f"the recovery root is not an {ENVELOPE_FORMAT} activation envelope ({exc}); "
                "its creation cannot be resumed"
            ) from exc


def envelope_bytes(operation_id: str, spot_id: str, stable_type: str, mesh: str,
                   recorded_by: str, message: EncodedMessage, deadline_ms: int | None) -> bytes:
    """``ActivationEnvelope(...).encode()`` of these fields, without building the envelope
    (a cold activation only needs its bytes)."""
    if type(deadline_ms) is int or deadline_ms is None:
        # What the encoder writes, spelt out: the keys in sorted order, each string
        # escaped by the encoder's own (C) function -- a third of the encoder's cost.
        text = (f'{{"body":"{base64.b64encode(message.body).decode("ascii")}",'
                f'"deadlineMs":{"null" if deadline_ms is None else deadline_ms},'
                f'"format":"{ENVELOPE_FORMAT}","mesh":{_quote(mesh)},'
                f'"messageType":{_quote(message.type_name)},'
                f'"operationId":{_quote(operation_id)},'
                f'"sourceNodeRid":{_quote(recorded_by)},'
                f'"spotId":{_quote(spot_id)},"stableType":{_quote(stable_type)}}}')
        return text.encode("utf-8")
    return _ENVELOPE_JSON({
        "format": ENVELOPE_FORMAT,
        "operationId": operation_id,
        "spotId": spot_id,
        "stableType": stable_type,
        "mesh": mesh,
        "sourceNodeRid": recorded_by,
        "messageType": message.type_name,
        "body": base64.b64encode(message.body).decode("ascii"),
        "deadlineMs": deadline_ms,
    }).encode("utf-8")

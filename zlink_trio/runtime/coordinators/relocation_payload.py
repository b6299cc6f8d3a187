"""The relocation payload: what moves with a sealed Spot, durable as a Relocation Store root.

Theory of operation
-------------------
The messages not yet run at seal time, the accepted journal, and the timers' logical
registrations and pending ticks are part of the relocation payload, and the target
restores the timers by itself (docs/relocation.md, "What moves and what does not"); with
``PreserveStateWith`` the adapter's opaque bytes travel too.  The source captures them
once it is sealed and its running turn has ended, stores them as one immutable root
(content addressed, like the activation envelope) and names that root in command 60; the
target reads it back from the store -- never from the frame -- before it builds its
shell.

:class:`RelocationPayload` is that record and the one place that knows its bytes
(format ``spot-relocation-v1``, compact JSON with sorted keys):

* ``state`` -- the adapter's bytes (``None`` for ``RecreateOnRelocation``), base64;
* ``timers`` -- every timer registered after activation (the factory and
  ``on_activate`` register theirs again at the target) as the Spot's method name, the
  milliseconds until it is due and its period; a tick that was already queued is a
  one-shot timer due at once;
* ``messages`` -- the not-yet-run messages in queue order: wire type name, body,
  deadline (wall-clock ms), the source's reply correlation (0: a one-way send) and the
  caller's operation ID (0: none drawn; absent in a payload written before it was
  carried, which reads as 0).  The
  target runs them before anything else and sends each reply to the source on the
  link the command came on; the source completes the original caller with it;
* ``members`` -- a SpotWide move's carried member Actors, each a payload of the same
  shape (without members of its own), so the Spot and its members move as one root
  (absent when there are none; present, the format is ``spot-relocation-v2``, which a
  node that reads only v1 refuses before relay-ready).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Final

import attrs

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.wire.codec import EncodedMessage

__all__ = ("GROUP_FORMAT", "PAYLOAD_FORMAT", "MovedMessage", "MovedTimer", "RelocationPayload")

#: The payload root's format name.
PAYLOAD_FORMAT: Final = "spot-relocation-v1"
#: The format name of a payload that carries members: a node that reads only
#: :data:`PAYLOAD_FORMAT` refuses it (the move aborts before relay-ready) instead of
#: committing members it would not build.
GROUP_FORMAT: Final = "spot-relocation-v2"
_JSON: Final = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode


@attrs.frozen
class MovedTimer:
    """One timer the target registers again: a method of the Spot, when, how often."""

    method: str
    due_in_ms: int
    period_ms: int | None


@attrs.frozen
class MovedMessage:
    """One not-yet-run message: the encoded message, its deadline, reply correlation and
    operation ID."""

    message: EncodedMessage
    deadline_ms: int
    #: The correlation the source registered for the reply (0: a one-way send).
    reply_correlation: int
    #: The caller's operation ID as the wire carries it (0: the call never drew one).
    operation_id: int = 0


@attrs.frozen(kw_only=True)
class RelocationPayload:
    """Everything that moves with one sealed Spot (see the module docstring)."""

    spot_id: str
    object_generation: int
    stable_type: str
    mesh: str
    owner_generation: int
    state: bytes | None
    timers: tuple[MovedTimer, ...]
    messages: tuple[MovedMessage, ...]
    #: The member Actors a SpotWide move carries, in ActorId order.
    members: tuple[RelocationPayload, ...] = ()

    def encode(self) -> bytes:
        """The payload's bytes (the relocation root)."""
        return _JSON(self._fields()).encode("utf-8")

    def _fields(self) -> dict[str, object]:
        fields: dict[str, object] = {
            "format": GROUP_FORMAT if self.members else PAYLOAD_FORMAT,
            "spotId": self.spot_id,
            "objectGeneration": self.object_generation,
            "stableType": self.stable_type,
            "mesh": self.mesh,
            "ownerGeneration": self.owner_generation,
            "state": None if self.state is None else base64.b64encode(self.state).decode(),
            "timers": [{"method": t.method, "dueInMs": t.due_in_ms, "periodMs": t.period_ms}
                       for t in self.timers],
            "messages": [{"type": m.message.type_name,
                          "body": base64.b64encode(m.message.body).decode(),
                          "deadlineMs": m.deadline_ms, "replyCorrelation": m.reply_correlation,
                          "operationId": m.operation_id}
                         for m in self.messages],
        }
        if self.members:
            fields["members"] = [member._fields() for member in self.members]
        return fields

    @classmethod
    def decode(cls, data: bytes) -> RelocationPayload:
        """The payload in ``data``; InvalidOperation for bytes that are not one."""
        try:
            return cls._from_fields(json.loads(data), nested=False)
        except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as exc:
            raise InvalidOperation(
                f"the relocation root is not a {PAYLOAD_FORMAT} payload, nor a {GROUP_FORMAT} "
                f"one with members ({exc}); the move is aborted and the Spot stays where it "
                "was"
            ) from exc

    @classmethod
    def _from_fields(cls, fields: Any, *, nested: bool) -> RelocationPayload:
        """The payload of decoded JSON ``fields`` (a member's when ``nested``: it has no
        members of its own); raises what :meth:`decode` turns into InvalidOperation."""
        members = fields.get("members", [])
        if fields.get("format") != (GROUP_FORMAT if members else PAYLOAD_FORMAT):
            raise ValueError(f"format {fields.get('format')!r}")
        if nested and members:
            raise ValueError("a carried member has no members of its own")
        state = fields["state"]
        return cls(
            spot_id=str(fields["spotId"]),
            object_generation=_int(fields["objectGeneration"]),
            stable_type=str(fields["stableType"]), mesh=str(fields["mesh"]),
            owner_generation=_int(fields["ownerGeneration"]),
            state=None if state is None else base64.b64decode(state, validate=True),
            timers=tuple(
                MovedTimer(str(t["method"]), _int(t["dueInMs"], low=0),
                           None if t["periodMs"] is None else _int(t["periodMs"]))
                for t in fields["timers"]),
            messages=tuple(
                MovedMessage(EncodedMessage(str(m["type"]),
                                            base64.b64decode(m["body"], validate=True)),
                             _int(m["deadlineMs"]), _int(m["replyCorrelation"], low=0),
                             _int(m.get("operationId", 0), low=0))
                for m in fields["messages"]),
            members=tuple(cls._from_fields(m, nested=True) for m in members))


def _int(value: object, *, low: int = 1) -> int:
    if type(value) is not int or value < low:
        raise ValueError(f"expected an integer >= {low}, got {value!r}")
    return value

"""The request frames: a Spot message (command 39), a remote create (47) and close (48).

Theory of operation
-------------------
Command 39 takes one of two routes: a :class:`ReadyRoute` to the owner of a
Ready authority, fenced by its object and owner generations, or an
:class:`ActivationRoute`, the cold-activation envelope of a Missing Spot
(spec 06 §4.1). Commands 47 and 48 carry the fences of a remote User Spot
create and close (spec 06 §3.3, §7.1). Every request has a nonzero
``operation_id`` and an absolute ``deadline_ms``; 47 and 48 also have a
nonzero ``correlation``, and a 39 has one unless it is one-way
(``reply_correlation`` 0). A request with a correlation is answered by
exactly one command 20 (:mod:`zlink_trio.wire._reply_frames`).

Times are integers of milliseconds since the Unix epoch (``*_ms``); the
runtime converts its Trio clock to wall-clock time when it builds a frame.
Metadata is bounded here (16 KiB), the payload by ``encode`` (its limit is
configurable); anything else a request cannot carry is refused at
construction with :class:`LocalProtocolError`.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from zlink_trio.core.errors import LocalProtocolError
from zlink_trio.wire._frame_checks import (
    T,
    check_deadline,
    check_gen,
    check_owner,
    check_payload,
    check_ref,
    check_text8,
    check_u64,
    check_u64_nonzero,
    int_in,
)
from zlink_trio.wire._frame_enums import RouteKind
from zlink_trio.wire._frame_fields import MAX_GEN, MAX_METADATA_BYTES, MAX_U32

if TYPE_CHECKING:
    from zlink_trio.core.records import OwnerFence, SpotRef
    from zlink_trio.wire.codec import EncodedMessage

__all__ = ("ActivationRoute", "ReadyRoute", "SpotMessage", "UserSpotClose", "UserSpotCreate")


def _check_lease(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not int_in(value, 0, MAX_GEN):
        raise LocalProtocolError(
            f"{attribute.name} must be milliseconds since the Unix epoch in 0..{MAX_GEN}, "
            f"got {value!r}"
        )


def _check_capacity(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not int_in(value, 1, MAX_U32):
        raise LocalProtocolError(f"{attribute.name} must be an int in 1..{MAX_U32}, got {value!r}")


def _check_optional_text8(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if value is not None:
        check_text8(instance, attribute, value)


def _check_metadata(
    instance: object, attribute: attrs.Attribute[bytes | None], value: bytes | None
) -> None:
    if value is None:
        return
    if not isinstance(value, bytes) or len(value) > MAX_METADATA_BYTES or type(value) is not bytes:
        raise LocalProtocolError(
            f"{attribute.name} must be None or bytes of at most {MAX_METADATA_BYTES} bytes"
        )


@attrs.frozen(kw_only=True)
class ReadyRoute:
    """Route kind 1: to the owner of a Ready authority, with its generation fence."""

    spot_id: str = attrs.field(validator=check_text8)
    object_generation: int = attrs.field(validator=check_gen)
    owner_generation: int = attrs.field(validator=check_gen)
    target: OwnerFence = attrs.field(validator=check_owner)


@attrs.frozen(kw_only=True)
class ActivationRoute:
    """Route kind 2: cold activation of a Missing Spot (no authority generation exists yet)."""

    target_mesh: str = attrs.field(validator=check_text8)
    target: OwnerFence = attrs.field(validator=check_owner)
    spot_id: str = attrs.field(validator=check_text8)
    stable_type: str = attrs.field(validator=check_text8)
    #: The StoreVersion of the target's descriptor claim the source selected.
    descriptor_version: int = attrs.field(validator=check_gen)


def _check_route(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not isinstance(value, ReadyRoute | ActivationRoute):
        raise LocalProtocolError(f"route must be a ReadyRoute or an ActivationRoute, got {value!r}")


@attrs.frozen(kw_only=True)
class SpotMessage:
    """Command 39: one application message to a Spot (spec 06 §4.1 step 8, §5).

    ``reply_correlation`` is 0 for a one-way send (no command 20 follows).
    ``metadata`` is ``None`` when the metadata flag is 0; ``b""`` is present
    but empty. ``deadline_ms`` is the operation's single end-to-end deadline.
    """

    route: ReadyRoute | ActivationRoute = attrs.field(validator=_check_route)
    operation_id: int = attrs.field(validator=check_u64_nonzero)
    reply_correlation: int = attrs.field(validator=check_u64)
    deadline_ms: int = attrs.field(validator=check_deadline)
    source: OwnerFence = attrs.field(validator=check_owner)
    source_spot_id: str | None = attrs.field(validator=_check_optional_text8)
    metadata: bytes | None = attrs.field(validator=_check_metadata)
    payload: EncodedMessage = attrs.field(validator=check_payload)

    @property
    def route_kind(self) -> RouteKind:
        """The route kind byte this frame carries."""
        return RouteKind.READY if isinstance(self.route, ReadyRoute) else RouteKind.ACTIVATION


# --------------------------------------------------------------------------- commands 47, 48


@attrs.frozen(kw_only=True)
class UserSpotCreate:
    """Command 47: commit a reservation the source made, on the target (spec 06 §3.3).

    The reservation fence is ``expected_store_version``, ``object_generation``,
    ``owner_generation``, ``target``, ``owner_lease_expires_ms`` and
    ``pending_capacity``. The creation request is not carried: the target
    reads it from the store's Pending creation projection.
    """

    correlation: int = attrs.field(validator=check_u64_nonzero)
    operation_id: int = attrs.field(validator=check_u64_nonzero)
    source: OwnerFence = attrs.field(validator=check_owner)
    spot_id: str = attrs.field(validator=check_text8)
    stable_type: str = attrs.field(validator=check_text8)
    expected_store_version: int = attrs.field(validator=check_gen)
    object_generation: int = attrs.field(validator=check_gen)
    owner_generation: int = attrs.field(validator=check_gen)
    target: OwnerFence = attrs.field(validator=check_owner)
    owner_lease_expires_ms: int = attrs.field(validator=_check_lease)
    pending_capacity: int = attrs.field(validator=_check_capacity)
    deadline_ms: int = attrs.field(validator=check_deadline)


@attrs.frozen(kw_only=True)
class UserSpotClose:
    """Command 48: close a remote User Spot incarnation (spec 06 §7.1)."""

    correlation: int = attrs.field(validator=check_u64_nonzero)
    operation_id: int = attrs.field(validator=check_u64_nonzero)
    source: OwnerFence = attrs.field(validator=check_owner)
    ref: SpotRef = attrs.field(validator=check_ref)
    target: OwnerFence = attrs.field(validator=check_owner)
    expected_owner_generation: int = attrs.field(validator=check_gen)
    expected_store_version: int = attrs.field(validator=check_gen)
    deadline_ms: int = attrs.field(validator=check_deadline)

"""Values a Spot declaration and its hooks use: relocation policies, Reject, CloseReason.

Theory of operation
-------------------
Moving a Spot owner is an explicit host operation (docs/relocation.md), and every
movable Spot type must say up front what happens to its state when it moves.
There is no default and no "omitted" overload, so the decorators require one
of three frozen values, siblings under :class:`RelocationPolicy`:

* :class:`DisableRelocation` — the Spot never moves; a Relocate request for it
  is refused.
* :class:`RecreateOnRelocation` — the target builds a fresh instance (same
  Spot ID and ObjectGeneration); in-memory state is dropped. Queued messages
  and timers still move, so nothing accepted is lost.
* :class:`PreserveStateWith` — ``adapter.capture(spot)`` turns the sealed
  source instance into opaque bytes, and ``adapter.restore(spot, data)`` puts
  them into the fresh target instance before it is exposed. The application
  owns the byte format and its versioning.

A User Spot with Actor members also says how a move treats them (docs/actors.md), with
its :class:`RelocationUnit`: ``SPOT_WIDE`` (the default: the Spot and its members move
together) or ``PER_ACTOR`` (the Spot moves alone and each member follows it one by one;
only with :class:`RecreateOnRelocation`).

:class:`Reject` is what a User Spot's ``on_create`` hook returns to decline
creation (the create result's state is then REJECTED and its reply is
``Reject.reply``). :class:`CloseReason` tells ``on_close`` why the
incarnation ends.

These are plain values: nothing here runs a hook or reads a clock.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Protocol

import attrs

from zlink_trio.core.errors import InvalidConfiguration, InvalidOperation

__all__ = (
    "CloseReason",
    "DisableRelocation",
    "PreserveStateWith",
    "RecreateOnRelocation",
    "Reject",
    "RelocationPolicy",
    "RelocationUnit",
    "SpotRelocationAdapter",
)


class SpotRelocationAdapter(Protocol):
    """Captures and restores a Spot's state as opaque bytes when it relocates.

    Both methods are plain (sync) calls made from the Spot's own task: capture
    while the source is sealed (no handler runs), restore on the new instance
    before the target serves. Pending messages and timers move without the
    adapter's help; do not re-register timers in ``restore``.
    """

    def capture(self, spot: Any) -> bytes:
        """Return the state of ``spot`` as bytes in a format the application versions."""
        ...

    def restore(self, spot: Any, data: bytes) -> None:
        """Load ``data`` (from :meth:`capture`, maybe of an older version) into ``spot``."""
        ...


@attrs.frozen
class RelocationPolicy:
    """Base of the three relocation policies; not usable by itself.

    Use :class:`DisableRelocation`, :class:`RecreateOnRelocation` or
    :class:`PreserveStateWith`. Instantiating the base raises ``TypeError``.
    """

    def __attrs_post_init__(self) -> None:
        if type(self) is RelocationPolicy:
            raise TypeError(
                "RelocationPolicy is abstract: use DisableRelocation(), "
                "RecreateOnRelocation() or PreserveStateWith(adapter)"
            )


@attrs.frozen
class DisableRelocation(RelocationPolicy):
    """The Spot never moves; an explicit Relocate of it is refused."""


@attrs.frozen
class RecreateOnRelocation(RelocationPolicy):
    """On relocation the target constructs a fresh instance; in-memory state is dropped.

    Queued messages and timer registrations still move with the Spot.
    """


def _check_adapter(
    instance: PreserveStateWith,
    attribute: attrs.Attribute[SpotRelocationAdapter],
    adapter: SpotRelocationAdapter,
) -> None:
    if isinstance(adapter, type):
        raise InvalidConfiguration(
            f"PreserveStateWith needs an adapter instance, got the class "
            f"{adapter.__qualname__}; pass PreserveStateWith({adapter.__qualname__}())"
        )
    missing = [
        name for name in ("capture", "restore") if not callable(getattr(adapter, name, None))
    ]
    if missing:
        raise InvalidConfiguration(
            f"PreserveStateWith adapter {adapter!r} has no callable {' or '.join(missing)}; "
            "it must provide capture(spot) -> bytes and restore(spot, data: bytes) -> None"
        )


@attrs.frozen
class PreserveStateWith(RelocationPolicy):
    """On relocation the state moves through ``adapter`` (capture on source, restore on target).

    Raises :class:`InvalidConfiguration` when ``adapter`` is a class rather
    than an instance, or lacks a callable ``capture`` or ``restore``.
    """

    adapter: SpotRelocationAdapter = attrs.field(validator=_check_adapter)


def _check_reply(instance: Reject, attribute: attrs.Attribute[object], reply: object) -> None:
    if reply is not None and not attrs.has(type(reply)):
        raise InvalidOperation(
            f"Reject's reply must be an attrs instance or None, got {type(reply).__name__}; "
            "the reply travels through the message codec, so decorate its class with "
            "@attrs.frozen"
        )


@attrs.frozen
class Reject:
    """Returned by a User Spot's ``on_create`` hook to decline creation.

    The create operation then ends REJECTED and nothing is created; ``reply``
    (an attrs instance, or ``None``) is passed back to the caller as the
    result's reply. Raises :class:`InvalidOperation` for a reply that is not
    an attrs instance.
    """

    reply: object | None = attrs.field(default=None, validator=_check_reply)


class RelocationUnit(StrEnum):
    """How a move of a User Spot treats its Actor members (``@zl.user_spot(unit=...)``)."""

    #: The Spot and all its members move together, in one aggregate commit
    #: (docs/actors.md: not built yet -- a Spot with members does not move until then).
    SPOT_WIDE = "spot_wide"
    #: The Spot moves alone; calls to it, Actor creation and joins go to its new node at
    #: once, and each member follows it in a move of its own (its own Message Follow
    #: route). Only with RecreateOnRelocation: the Spot's state is not carried.
    PER_ACTOR = "per_actor"


class CloseReason(StrEnum):
    """Why a Spot incarnation ends; passed to its ``on_close(reason)`` hook.

    ``on_close`` runs at most once per incarnation, after admission is sealed
    and the turns accepted before the seal have finished, and before the
    Spot's location is released. The framework saves no state for you:
    save what must survive in ``on_close``.
    """

    #: An explicit close: ``SpotManager.close(ref)`` of a User Spot, or an
    #: Instance Spot's local close from its own lifecycle context.
    CLOSED = "closed"
    #: The catalog evicted an idle Instance Spot. Never given to User
    #: or Entry Spots, which are never idle-evicted.
    IDLE_EVICTED = "idle_evicted"
    #: The node is shutting down in an orderly way (its ``open_node`` block exits).
    NODE_SHUTDOWN = "node_shutdown"
    #: The incarnation moved to another node (a committed relocation); the Spot
    #: lives on at the target, only this local instance ends. With
    #: PreserveStateWith, ``capture`` already ran.
    RELOCATED = "relocated"
    #: This node lost authority without a close: its owner lease expired or its
    #: fence was superseded. Another node may already own the Spot, so do not
    #: write state that assumes you are still the owner.
    OWNERSHIP_LOST = "ownership_lost"
    #: The instance was constructed but never became Ready: ``on_activate`` or
    #: ``on_create`` raised, ``on_create`` returned a Reject, or the activation
    #: deadline passed. Release what ``__init__``/``on_activate`` acquired.
    ACTIVATION_FAILED = "activation_failed"

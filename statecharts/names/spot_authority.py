"""Typed names of :class:`~statecharts.SpotAuthority`.

Generated from the compiled charts: do not edit.
Regenerate with ``python -m statecharts render docs/statecharts``; CI's
``python -m statecharts check docs/statecharts`` fails when this module differs from
a fresh render.  See :mod:`statecharts._typed` for what the names are for.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, NewType, final

from statecharts._compile import compile
from statecharts._typed import TypedChart
from statecharts.spot_authority import SpotAuthority

__all__ = (
    "SPOT_AUTHORITY",
    "AuthorityState",
    "SpotAuthorityChart",
    "SpotAuthorityEvent",
    "SpotAuthorityEvents",
    "SpotAuthorityState",
    "SpotAuthorityStates",
    "SpotAuthorityTags",
)


SpotAuthorityState = NewType("SpotAuthorityState", str)
SpotAuthorityEvent = NewType("SpotAuthorityEvent", str)


@final
class SpotAuthorityStates:
    """The states of :class:`~statecharts.SpotAuthority`, in declaration order."""

    __slots__ = ()

    missing: Final = SpotAuthorityState("missing")
    creating: Final = SpotAuthorityState("creating")
    ready: Final = SpotAuthorityState("ready")
    closing: Final = SpotAuthorityState("closing")
    relocating: Final = SpotAuthorityState("relocating")
    sealed: Final = SpotAuthorityState("sealed")
    relay_ready: Final = SpotAuthorityState("relay_ready")


@final
class SpotAuthorityEvents:
    """The events of :class:`~statecharts.SpotAuthority`, in declaration order."""

    __slots__ = ()

    reserve: Final = SpotAuthorityEvent("reserve")
    commit_ready: Final = SpotAuthorityEvent("commit_ready")
    abort_creating: Final = SpotAuthorityEvent("abort_creating")
    begin_close: Final = SpotAuthorityEvent("begin_close")
    begin_idle_eviction: Final = SpotAuthorityEvent("begin_idle_eviction")
    release: Final = SpotAuthorityEvent("release")
    begin_relocation: Final = SpotAuthorityEvent("begin_relocation")
    seal: Final = SpotAuthorityEvent("seal")
    accept_relay_ready: Final = SpotAuthorityEvent("accept_relay_ready")
    commit_relocation: Final = SpotAuthorityEvent("commit_relocation")
    abort_relocation: Final = SpotAuthorityEvent("abort_relocation")
    release_expired: Final = SpotAuthorityEvent("release_expired")
    release_relay_ready: Final = SpotAuthorityEvent("release_relay_ready")


@final
class SpotAuthorityTags:
    """The tags of :class:`~statecharts.SpotAuthority`: the states answering each question."""

    __slots__ = ()

    moving: Final[frozenset[SpotAuthorityState]] = frozenset((
        SpotAuthorityStates.relocating,
        SpotAuthorityStates.sealed,
        SpotAuthorityStates.relay_ready,
    ))


class AuthorityState(StrEnum):
    """The states of :class:`~statecharts.SpotAuthority` as stored values."""

    MISSING = "missing"
    CREATING = "creating"
    READY = "ready"
    CLOSING = "closing"
    RELOCATING = "relocating"
    SEALED = "sealed"
    RELAY_READY = "relay_ready"


@final
class SpotAuthorityChart(TypedChart[SpotAuthorityState, SpotAuthorityEvent]):
    """:class:`~statecharts.SpotAuthority`, compiled, with its typed names."""

    __slots__ = ()

    st: Final = SpotAuthorityStates()
    ev: Final = SpotAuthorityEvents()
    tags: Final = SpotAuthorityTags()


SPOT_AUTHORITY: Final = SpotAuthorityChart(compile(SpotAuthority))

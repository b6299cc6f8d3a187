"""Stepping the SpotAuthority chart over stored records: where a record's new state comes from.

Theory of operation
-------------------
Every transaction of the rules that changes a record's :class:`AuthorityState` names
the chart event it is (``EV.commit_ready``) and takes the new state from
:func:`step`, never from a state it spells itself: Reserve steps ``missing`` by
``reserve``, CommitReady steps the Creating record by ``commit_ready``, and a step to
``missing`` (AbortCreating, Release, ReleaseExpired) deletes the record. So the
memory and SQLite backends, which both run these rules, take exactly the
transitions ``statecharts.spot_authority`` defines, and the Redis scripts step the
same chart in Lua (``store.redis.lua.authority``).

The chart is compiled once, at import, into :data:`_STEPS`: state -> event -> the
target as an :class:`AuthorityState` member, so a step is two dict lookups (no key
tuple to build) and the record keeps the enum member the rest of the store compares
with ``is``. A
transition the chart does not define raises :class:`InvalidOperation` naming the
events it does allow; the transactions call :func:`step` before their first write,
so a refused step writes nothing. Each transaction checks its own preconditions
first, with its own errors (a stale fence, a close that meets a move); the step
is what stands between those checks and a write the chart does not allow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from statecharts.names import SPOT_AUTHORITY, AuthorityState
from zlink_trio.core.errors import InvalidOperation

if TYPE_CHECKING:
    from statecharts.names import SpotAuthorityEvent

__all__ = ("EV", "step", "step_to_missing")

#: The chart's events by name (``EV.begin_close``): the transactions' events.
EV: Final = SPOT_AUTHORITY.ev

#: The compiled chart: state -> event -> target, as stored-state enum members (every
#: state has its entry, empty when it accepts no event).
_STEPS: Final[dict[AuthorityState, dict[str, AuthorityState]]] = {
    state: {event: AuthorityState(SPOT_AUTHORITY.table.step(state, event))
            for event in SPOT_AUTHORITY.table.events_from(state)}
    for state in AuthorityState}


def step(state: AuthorityState, event: SpotAuthorityEvent) -> AuthorityState:
    """The state ``event`` takes a record in ``state`` to (``MISSING``: the record goes).

    :class:`InvalidOperation` when the SpotAuthority chart defines no such transition;
    nothing is written then (callers step before their first write).
    """
    target = _STEPS[state].get(event)
    if target is None:
        allowed = SPOT_AUTHORITY.table.events_from(state)
        raise InvalidOperation(
            f"the SpotAuthority chart has no transition {event!r} from {state.value!r} "
            f"(from there it allows {', '.join(allowed) or 'nothing'}); nothing was "
            "written -- re-read the authority and take the step its state allows")
    return target


def step_to_missing(state: AuthorityState, event: SpotAuthorityEvent) -> None:
    """Step an event that ends the incarnation: the caller deletes the record after it.

    :class:`InvalidOperation` as :func:`step` when the chart has no such transition, or
    when its target is a stored state (the event does not end the record).
    """
    target = step(state, event)
    if target is not AuthorityState.MISSING:
        raise InvalidOperation(
            f"the SpotAuthority chart takes {event!r} from {state.value!r} to "
            f"{target.value!r}, not to missing; the record stays, nothing was written")

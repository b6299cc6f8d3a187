"""A Spot's durable state as pure transactions (the oracle of ``store.state_steps``).

Theory of operation
-------------------
:attr:`LocationState.saved` maps a Spot ID to its :class:`SavedState`. A write checks
the fence against the authority record before anything else is written
(:func:`owning_record`), so a write from anyone but the current owner with a live lease
changes nothing: the whole rule of ``store.state_steps``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zlink_trio.core._checks import check_finite
from zlink_trio.core.errors import InvalidOperation, StaleFence, Unavailable
from zlink_trio.core.identity import validate_spot_id
from zlink_trio.core.records import AuthorityFence, AuthorityState
from zlink_trio.store.rules.location import check_owner
from zlink_trio.store.values import MAX_STATE_BYTES, SavedState

if TYPE_CHECKING:
    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.store.rules.location import LocationState

__all__ = ("check_state_args", "not_serving", "owning_record", "stale_writer",
           "txn_clear_state", "txn_load_state", "txn_save_state")

#: The states whose owner writes: Ready; a move's source until relay-ready -- Relocating
#: (it serves) and Sealed (the turn that ran when the move sealed it finishes there,
#: before the source captures and the target loads anything); and Closing (the turn that
#: ran when the close began finishes, before Release ends the incarnation). Creating
#: does not serve yet; past relay-ready the target owns what comes next.
WRITING = (AuthorityState.READY, AuthorityState.RELOCATING, AuthorityState.SEALED,
           AuthorityState.CLOSING)


def check_state_args(fence: object, now: float, data: object = b"") -> bytes:
    """The argument checks of ``save_state`` / ``clear_state`` (every backend): the data
    as ``bytes``."""
    if not isinstance(fence, AuthorityFence):
        raise InvalidOperation(f"a state write takes the writer's AuthorityFence, got "
                               f"{type(fence).__name__}")
    check_finite(now, "now")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidOperation(f"a Spot's state is bytes, got {type(data).__name__}")
    raw = bytes(data)
    if len(raw) > MAX_STATE_BYTES:
        raise InvalidOperation(f"the state of {fence.spot_id!r} is {len(raw)} bytes, more than "
                               f"the {MAX_STATE_BYTES} a Spot may keep; keep less, or keep "
                               "large values elsewhere and their keys in the state")
    return raw


def stale_writer(fence: AuthorityFence, record: AuthorityRecord | None) -> StaleFence:
    """The refusal of a state write whose ``fence`` is not ``record``'s (every backend)."""
    found = "missing" if record is None else (
        f"generation {record.object_generation}, owner generation "
        f"{record.owner_generation}, owner {record.owner}")
    return StaleFence(
        f"{fence.spot_id!r} is {found}, not the incarnation that writes its state "
        f"(generation {fence.object_generation}, owner generation "
        f"{fence.owner_generation}, owner {fence.owner}): another one owns it now, and "
        "nothing was written")


def not_serving(record: AuthorityRecord) -> Unavailable:
    """The refusal of a state write while ``record`` does not serve (every backend)."""
    return Unavailable(f"{record.spot_id!r} is {record.state.value}: its state is written "
                       "only while it serves; nothing was written")


def owning_record(state: LocationState, fence: AuthorityFence, now: float,
                  allowed: tuple[AuthorityState, ...]) -> AuthorityRecord:
    """The record ``fence`` owns, in one of ``allowed`` states, its owner's lease live at
    ``now``; :class:`StaleFence` / :class:`Unavailable` otherwise (nothing written)."""
    record = state.records.get(fence.spot_id)
    if (record is None or record.object_generation != fence.object_generation
            or record.owner_generation != fence.owner_generation
            or record.owner != fence.owner):
        raise stale_writer(fence, record)
    if record.state not in allowed:
        raise not_serving(record)
    check_owner(state, record.mesh, record.owner, now)
    return record


def txn_save_state(state: LocationState, fence: AuthorityFence, data: bytes, *,
                   now: float) -> SavedState:
    """SaveState; see ``StateSteps.save_state``."""
    raw = check_state_args(fence, now, data)
    record = owning_record(state, fence, now, WRITING)
    old = state.saved.get(record.spot_id)
    saved = SavedState(spot_id=record.spot_id, data=raw,
                       version=1 if old is None else old.version + 1,
                       object_generation=record.object_generation)
    state.saved[record.spot_id] = saved
    return saved


def txn_load_state(state: LocationState, spot_id: str) -> SavedState | None:
    """LoadState; see ``StateSteps.load_state``."""
    validate_spot_id(spot_id)
    return state.saved.get(spot_id)


def txn_clear_state(state: LocationState, fence: AuthorityFence, *, now: float) -> bool:
    """ClearState; see ``StateSteps.clear_state``."""
    check_state_args(fence, now)
    record = owning_record(state, fence, now, WRITING)
    return state.saved.pop(record.spot_id, None) is not None

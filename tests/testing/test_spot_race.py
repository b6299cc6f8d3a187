"""``SpotRaceModel`` over Instance and User Spots on every store: a correct pair of Spots
keeps every invariant, and the model really drives what it says (cold activation,
creates, closes, relocations, idle eviction).

Few examples (the model's own cost: a fresh three-node cluster per example), fixed
settings (derandomized, no database), so the run is the same on every machine.
"""

from __future__ import annotations

from typing import ClassVar, Final

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from kit_spots import (
    Add,
    Counter,
    KeptCounter,
    KeptRoom,
    RemindedCounter,
    RemindedRoom,
    Room,
    Spec,
)

import zlink_trio as zl
from zlink_trio.testing import SpotRaceModel

FIXED: Final = settings(max_examples=6, stateful_step_count=25, deadline=None,
                        derandomize=True, database=None, print_blob=False,
                        phases=[Phase.explicit, Phase.generate],
                        suppress_health_check=list(HealthCheck))
#: What the runs did, over every example of one test.
SEEN: set[str] = set()


class CounterAndRoomRace(SpotRaceModel):
    spots = (Counter, Room)
    instance_ids: ClassVar = {"c0": "kit-counter", "c1": "kit-counter"}
    user_ids: ClassVar = {"r0": "kit-room"}
    create_type = "kit-room"
    messages = st.builds(Add, st.integers(1, 50))
    create_requests = st.builds(Spec, st.sampled_from(["a", "b"]))

    def final_spot_invariants(self, record):
        SEEN.update(op.kind for op in self.ops.values() if op.done)
        SEEN.update(c.reason.name for c in record.closes)
        if record.factory_runs:
            SEEN.add("factory")


def test_counter_and_room_keep_the_invariants_on_every_store(kit_store: str) -> None:
    SEEN.clear()

    class Race(CounterAndRoomRace):
        store = kit_store  # SQLite: every example on a fresh file beside this one

    Race.run(settings=FIXED)
    assert {"factory", "request", "send", "goc", "relocate"} <= SEEN, SEEN


class KeptStateRace(SpotRaceModel):
    """Spots that save their total after every message (``ctx.state``), raced with
    moves, idle eviction, closes and writes through ended incarnations (``zombie_write``)."""

    spots = (KeptCounter, KeptRoom)
    instance_ids: ClassVar = {"k0": "kit-kept", "k1": "kit-kept"}
    user_ids: ClassVar = {"kr0": "kit-kept-room"}
    create_type = "kit-kept-room"
    messages = st.builds(Add, st.integers(1, 50))

    def final_spot_invariants(self, record):
        SEEN.update(e.action if e.version is not None else f"refused {e.action}"
                    for e in record.state_events)


def _examples(store: str, examples: int) -> int:
    """``examples``, or a third of them on PostgreSQL, where every example creates a schema
    (its DDL is most of an example's time there)."""
    return examples // 3 if store.startswith("postgresql") else examples


def test_durable_state_keeps_the_invariants_on_every_store(kit_store: str) -> None:
    """A save acknowledged is never lost (every load reads the last one), and no write of
    an incarnation that ended is ever applied."""
    SEEN.clear()

    class Race(KeptStateRace):
        store = kit_store

    Race.run(settings=settings(FIXED, max_examples=_examples(kit_store, 60)))
    # Which ended incarnations exist when the zombie rule runs depends on the timing of
    # the example; a refused write of some kind always happens.
    assert {"load", "save"} <= SEEN, SEEN
    assert any(seen.startswith("refused") for seen in SEEN), SEEN


class RemindedRace(SpotRaceModel):
    """Spots that set durable reminders (the ``remind`` rule) and are woken by them,
    raced with moves, idle eviction, closes and writes through ended incarnations
    (``zombie_remind``)."""

    spots = (RemindedCounter, RemindedRoom)
    instance_ids: ClassVar = {"m0": "kit-reminded", "m1": "kit-reminded"}
    user_ids: ClassVar = {"mr0": "kit-reminded-room"}
    messages = st.builds(Add, st.integers(1, 50))

    def final_spot_invariants(self, record):
        SEEN.update("delivered" for t in record.turns if isinstance(t.message, zl.Reminder))
        SEEN.update(f"{w.action} refused" if isinstance(w.outcome, Exception) else w.action
                    for w in self.reminder_writes)
        SEEN.update("zombie refused" for w in self.reminder_writes
                    if w.zombie and isinstance(w.outcome, Exception))


def test_reminders_keep_the_invariants_on_every_store(kit_store: str) -> None:
    """A reminder set and not cancelled reaches its Spot at least once, even across
    idle eviction and moves; two deliveries of one due never overlap; no write through
    an ended incarnation is acknowledged."""
    SEEN.clear()

    class Race(RemindedRace):
        store = kit_store

    Race.run(settings=settings(FIXED, max_examples=_examples(kit_store, 80)))
    assert {"set", "delivered", "cancel", "zombie refused"} <= SEEN, SEEN

"""The mutation gate's entries for durable Spot state (docs/state.md): only the current
owner with a live lease writes it, in the transaction that checks its authority; the
close of a User Spot or an Actor ends it; every incarnation starts from it.

Each entry is a :class:`~mutation.Mutation`; see ``catalog.py``.
"""

from __future__ import annotations

from typing import Final

from mutation import Mutation

__all__ = ("STATE_RULES",)

#: The row of docs/architecture.md's "Where each rule lives" table.
_STATE: Final = "Durable state: fenced saves"
_RULES: Final = "zlink_trio/store/rules/state.py"
_CONFORMANCE: Final = "tests/store/test_state_conformance.py::"
_RUNTIME: Final = "tests/runtime/test_durable_state.py::"

STATE_RULES: tuple[Mutation, ...] = (
    Mutation(
        name="state.only_the_owning_incarnation_writes",
        family=_STATE,
        rule="A state write whose fence is not the record's (a zombie: the Spot moved or "
             "was re-activated) writes nothing.",
        path=_RULES,
        find="        raise stale_writer(fence, record)\n",
        replace="        pass\n",
        guards=[_CONFORMANCE + "test_a_zombie_owner_never_overwrites_its_successors_state"
                "[memory://]"],
    ),
    Mutation(
        name="state.a_live_lease_writes",
        family=_STATE,
        rule="An owner whose lease expired writes no state.",
        path=_RULES,
        find="    check_owner(state, record.mesh, record.owner, now)\n    return record\n",
        replace="    return record\n",
        guards=[_CONFORMANCE + "test_an_owner_whose_lease_expired_writes_nothing[memory://]"],
    ),
    Mutation(
        name="state.only_while_serving",
        family=_STATE,
        rule="A Spot not serving yet, or past a move's relay-ready, saves no state.",
        path=_RULES,
        find="    if record.state not in allowed:\n        raise not_serving(record)\n",
        replace="",
        guards=[_CONFORMANCE + "test_the_state_is_written_only_while_the_spot_serves"
                "[memory://]"],
    ),
    Mutation(
        name="state.close_ends_it",
        family=_STATE,
        rule="The close of a User Spot or an Actor deletes its state in Release; an "
             "Instance Spot's deactivation keeps it.",
        path="zlink_trio/store/rules/location.py",
        find="        state.saved.pop(record.spot_id, None)\n",
        replace="        pass\n",
        guards=[_CONFORMANCE + "test_the_close_of_a_user_spot_ends_its_state_an_instance_"
                "spots_stays[memory://]"],
    ),
    Mutation(
        name="state.redis_checks_the_fence",
        family=_STATE,
        rule="Redis: the state and reminder scripts check the writer's fence against the "
             "record before they write (the prelude's state_writer).",
        path="zlink_trio/store/redis/lua/prelude.py",
        find="  if not fenced(r, ARGV[3], ARGV[4], ARGV[5], ARGV[6]) then\n    if r == nil",
        replace="  if r == nil then\n    if r == nil",
        guards=[_CONFORMANCE + "test_a_zombie_owner_never_overwrites_its_successors_state"
                "[redis]",
                "tests/store/test_reminder_conformance.py::test_a_zombie_owner_never_sets_or_"
                "cancels_a_reminder[redis]"],
    ),
    Mutation(
        name="state.loaded_before_the_factory",
        family=_STATE,
        rule="Every incarnation of a type with state starts from the last value saved.",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="            await self.durable.fetch()\n",
        replace="            pass\n",
        guards=[_RUNTIME + "test_an_instance_spots_state_outlives_idle_eviction[memory]"],
    ),
)

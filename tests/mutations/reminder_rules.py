"""The mutation gate's entries for durable reminders (docs/reminders.md): only the
current owner sets or cancels them; a take holds a reminder until it runs out; a done
acts only on the reminder exactly as taken; the close of a User Spot ends them; the
node records each delivery; a type without a ``zl.Reminder`` handler sets none.

Each entry is a :class:`~mutation.Mutation`; see ``catalog.py``.
"""

from __future__ import annotations

from typing import Final

from mutation import Mutation

__all__ = ("REMINDER_RULES",)

#: The row of docs/architecture.md's "Where each rule lives" table.
_REMINDERS: Final = "Durable reminders: fenced, taken, at least once"
_RULES: Final = "zlink_trio/store/rules/reminders.py"
_CONFORMANCE: Final = "tests/store/test_reminder_conformance.py::"
_RUNTIME: Final = "tests/runtime/test_reminders.py::"

REMINDER_RULES: tuple[Mutation, ...] = (
    Mutation(
        name="reminders.only_the_owner_sets",
        family=_REMINDERS,
        rule="A reminder set through a fence that is not the record's owning incarnation "
             "(a zombie), or past a move's relay-ready, writes nothing.",
        path=_RULES,
        find="    record = owning_record(state, fence, now, WRITING)\n    if record.kind not in",
        replace="    record = state.records[fence.spot_id]\n    if record.kind not in",
        guards=[_CONFORMANCE + "test_a_zombie_owner_never_sets_or_cancels_a_reminder"
                "[memory://]"],
    ),
    Mutation(
        name="reminders.a_take_holds",
        family=_REMINDERS,
        rule="A taken reminder is not due to anyone until its take runs out (never two "
             "deliveries of one due at once).",
        path=_RULES,
        find="        took = attrs.evolve(current, taker=taker, taken_until=now + hold)\n",
        replace="        took = attrs.evolve(current, taker=taker, taken_until=now)\n",
        guards=[_CONFORMANCE + "test_a_take_holds_due_reminders_of_its_partitions_in_scan_"
                "order[memory://]"],
    ),
    Mutation(
        name="reminders.only_a_live_taker_takes",
        family=_REMINDERS,
        rule="A node whose claim is not live takes no reminder.",
        path=_RULES,
        find="    check_owner(state, mesh, taker, now)\n    if candidates is None:",
        replace="    if candidates is None:",
        guards=[_CONFORMANCE + "test_a_taker_without_a_live_claim_takes_nothing[memory://]"],
    ),
    Mutation(
        name="reminders.done_is_of_that_take",
        family=_REMINDERS,
        rule="A done acts only on the take it came from: an earlier take's late done does "
             "not end a later take of the same reminder (each holds until its own time).",
        path=_RULES,
        find=" or current.taken_until != taken.taken_until):",
        replace="):",
        guards=[_CONFORMANCE + "test_a_done_of_an_earlier_take_does_not_end_a_later_one"
                "[memory://]"],
    ),
    Mutation(
        name="reminders.done_is_of_that_setting",
        family=_REMINDERS,
        rule="A reminder set again while taken is not done by the old take.",
        path=_RULES,
        find="    if (current is None or current.version != taken.version",
        replace="    if (current is None",
        guards=[_CONFORMANCE + "test_a_reminder_set_again_while_taken_is_not_done_by_the_"
                "old_take[memory://]"],
    ),
    Mutation(
        name="reminders.close_ends_them",
        family=_REMINDERS,
        rule="The close of a User Spot deletes its reminders in Release; an Instance "
             "Spot's deactivation keeps them.",
        path="zlink_trio/store/rules/location.py",
        find="        state.reminders.pop(record.spot_id, None)\n",
        replace="        pass\n",
        guards=[_CONFORMANCE + "test_the_close_of_a_user_spot_ends_its_reminders_an_"
                "instance_spots_stay[memory://]"],
    ),
    Mutation(
        name="reminders.a_delivery_is_recorded",
        family=_REMINDERS,
        rule="A node records each delivery that ended (a one-shot reminder ends, a "
             "repeating one moves on), so it is not delivered again.",
        path="zlink_trio/runtime/coordinators/reminders.py",
        find="        await _bounded(rt, lambda: rt.store.location.reminder_done(reminder, "
             "now=rt.now()))\n",
        replace="        pass\n",
        guards=[_RUNTIME + "test_a_due_reminder_reaches_an_idle_evicted_spot[memory]"],
    ),
    Mutation(
        name="reminders.cluster_hint_never_late",
        family=_REMINDERS,
        rule="Redis Cluster: a reminder write whose hint a take swept meanwhile (the "
             "partition's watermark passed its token) is refused and hinted again, so a "
             "hint is never later than its reminder's wake.",
        path="zlink_trio/store/redis_cluster/lua.py",
        find="  if w and not dec_lt(w, token) then return {'REM_BANNED'} end\n",
        replace="",
        guards=["tests/store/test_redis_cluster_reminders.py::test_a_set_whose_hint_a_take_"
                "swept_meanwhile_writes_a_new_one"],
    ),
    Mutation(
        name="reminders.sqlite_idle_take_reads",
        family=_REMINDERS,
        rule="SQLite: a take with nothing due is a read; it takes no write lock that a "
             "frozen process would hold against the others.",
        path="zlink_trio/store/sqlite/location.py",
        find="        if not await self._db.read(lambda conn: attempt(conn, False), single=True):",
        replace="        if False:",
        guards=["tests/store/test_sqlite_fast_paths.py::test_a_take_with_nothing_due_takes_"
                "no_write_lock"],
    ),
    Mutation(
        name="reminders.needs_a_handler",
        family=_REMINDERS,
        rule="A Spot type without a zl.Reminder handler sets no reminder (nothing could "
             "deliver it).",
        path="zlink_trio/runtime/incarnation/reminders.py",
        find="    if writes is None or not spot_type.reminders:\n",
        replace="    if writes is None:\n",
        guards=[_RUNTIME + "test_a_reminder_needs_a_handler_for_it[memory]"],
    ),
)

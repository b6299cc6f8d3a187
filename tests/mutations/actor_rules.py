"""The mutation gate's entries for Actors (docs/actors.md): membership in the store's
rules, a Close that keeps a Spot with members, the Entry Spot taken from the descriptor,
and ToActor calls that never reach a Spot (or the reverse).

Each entry is a :class:`~mutation.Mutation`; see ``catalog.py``.
"""

from __future__ import annotations

from typing import Final

from mutation import Mutation

__all__ = ("ACTOR_RULES",)

#: The row of docs/architecture.md's "Where each rule lives" table.
_ACTORS: Final = "Actors: membership, ToActor calls"
_RULES: Final = "zlink_trio/store/rules/location.py"
_DRIVER: Final = "zlink_trio/runtime/actors/membership.py"
_TEST: Final = "tests/runtime/test_actors.py::"
_CONFORMANCE: Final = "tests/store/test_membership_conformance.py::"
_CARRIED: Final = "tests/store/test_carried_members_conformance.py::"
_STEPS: Final = "zlink_trio/store/rules/relocation_steps.py"
_RELOCATION: Final = "zlink_trio/runtime/coordinators/relocation.py"
_CLUSTER: Final = "zlink_trio/store/redis_cluster/location.py"
_CLUSTER_LUA: Final = "zlink_trio/store/redis_cluster/lua.py"
_CARRY: Final = "zlink_trio/store/redis_cluster/carry.py"

ACTOR_RULES: tuple[Mutation, ...] = (
    Mutation(
        name="actors.close_keeps_members",
        family=_ACTORS,
        rule="User Spot Close doesn't secretly clean up active membership: BeginClose of a "
             "Spot an Actor's record names is refused (06 §10).",
        path=_RULES,
        find="    if members:\n        raise MembersRemain(record, len(members))\n",
        replace="",
        guards=[_TEST + "test_user_spot_close_does_not_secretly_clean_up_active_membership"
                "[memory]",
                _CONFORMANCE + "test_user_spot_with_a_member_does_not_close[memory://]"],
    ),
    Mutation(
        name="actors.close_ends_false",
        family=_ACTORS,
        rule="A Close that meets a member ends False, locally and over command 48, with "
             "admission and authority kept (06 §10, the 48 target's membership check).",
        path="zlink_trio/runtime/coordinators/close_operation.py",
        find="        except MembersRemain:",
        replace="        except ZeroDivisionError:",
        guards=[_TEST + "test_user_spot_close_does_not_secretly_clean_up_active_membership_"
                "remote[memory]"],
    ),
    Mutation(
        name="actors.entry_from_the_descriptor",
        family=_ACTORS,
        rule="A new Actor starts on the Entry Spot its node's descriptor publishes, never "
             "on an ID derived from the NodeId (06 §10).",
        path=_DRIVER,
        find="    container = rt.entry_spot_id if container is None else ",
        replace="    container = (__import__('zlink_trio.core.identity', fromlist=['x'])"
                ".new_entry_spot_id(rt.node_id)) if container is None else ",
        guards=[_TEST + "test_entry_spot_join_and_placement_use_the_descriptor_mapping"
                "[memory]"],
    ),
    Mutation(
        name="actors.leave_to_the_descriptors_entry",
        family=_ACTORS,
        rule="Leave returns an Actor to the Entry Spot its node's descriptor publishes "
             "(06 §10).",
        path=_DRIVER,
        find="    if spot is None:\n        container = rt.entry_spot_id\n",
        replace="    if spot is None:\n        container = ref.container\n",
        guards=[_TEST + "test_entry_spot_join_and_placement_use_the_descriptor_mapping"
                "[memory]"],
    ),
    Mutation(
        name="actors.container_of_the_owner",
        family=_ACTORS,
        rule="An Actor joins only a container its own node owns: another node's Entry or "
             "User Spot takes no member from here.",
        path=_RULES,
        find="    if record.owner != owner:\n        return StaleFence(f\"{container!r}",
        replace="    if False:\n        return StaleFence(f\"{container!r}",
        guards=[_CONFORMANCE + "test_an_actor_joins_only_a_container_its_owner_owns"
                "[memory://]"],
    ),
    Mutation(
        name="actors.instance_spots_have_no_members",
        family=_ACTORS,
        rule="An Instance Spot (or an Actor) has no members: every membership operation "
             "on one is InvalidOperation.",
        path=_RULES,
        find="    if record.kind not in (SpotKind.ENTRY, SpotKind.USER):",
        replace="    if False:",
        guards=[_TEST + "test_an_instance_spot_refuses_every_membership_operation[memory]"],
    ),
    Mutation(
        name="actors.arriving_member_keeps_the_spot",
        family=_ACTORS,
        rule="An Actor on its way into a Spot is already its member: the Spot does not "
             "close under it.",
        path="zlink_trio/store/rules/relocation_steps.py",
        find="    if container is not None:  # a member of both until the move ends",
        replace="    if False:  # a member of both until the move ends",
        guards=[_CONFORMANCE + "test_an_actor_joins_a_user_spot_on_another_node_by_a_move"
                "[memory://]"],
    ),
    Mutation(
        name="actors.per_actor_members_follow",
        family=_ACTORS,
        rule="PerActor: after the Spot's commit each member follows it in a move of its own "
             "(06 §6.1); none is left behind by the move.",
        path="zlink_trio/runtime/coordinators/relocation.py",
        find="            await _members_follow(rt, spot_id, claim.descriptor.node_id, deadline, "
             "report)",
        replace="            pass",
        guards=[_TEST + "test_a_per_actor_spot_moves_and_its_members_follow_it[memory]"],
    ),
    Mutation(
        name="actors.follow_keeps_the_membership",
        family=_ACTORS,
        rule="A member that follows its Spot into the same container stays its member "
             "through the commit and an abort.",
        path="zlink_trio/store/rules/relocation_steps.py",
        find="    if record.next_container not in (None, record.container):\n"
             "        assert record.container is not None",
        replace="    if record.next_container is not None:\n"
                "        assert record.container is not None",
        guards=[_CONFORMANCE + "test_a_member_follows_its_per_actor_spot_into_the_same_"
                "container[memory://]"],
    ),
    Mutation(
        name="actors.calls_by_kind",
        family=_ACTORS,
        rule="A ToActor call reaches only an Actor, and a Spot call only a Spot "
             "(TypeMismatch before anything runs).",
        path="zlink_trio/runtime/coordinators/routing.py",
        find="    if (record.kind is SpotKind.ACTOR) is not call.to_actor:",
        replace="    if False:",
        guards=[_TEST + "test_spot_calls_and_actor_calls_do_not_cross[memory]"],
    ),
    Mutation(
        name="actors.entry_actors_are_candidates",
        family=_ACTORS,
        rule="An Actor on an Entry Spot is a relocation candidate (a drain moves it onto "
             "the target's Entry Spot); the Entry Spot itself is not (09 §8).",
        path="zlink_trio/runtime/coordinators/relocation.py",
        find="    if current == rt.entry_spot_id:\n        return \"\", None, to\n",
        replace="",
        guards=[_TEST + "test_entry_spot_is_not_a_relocation_candidate_and_its_actors_are"
                "[memory]"],
    ),
    Mutation(
        name="actors.members_stay_in_their_spot",
        family=_ACTORS,
        rule="A member of a User Spot is never moved out of it on its own (a drain leaves "
             "it; only a join or leave moves it).",
        path="zlink_trio/runtime/coordinators/relocation.py",
        find="    return \"it is a member of a User Spot, which it leaves only when asked\", "
             "None, to",
        replace="    return \"\", None, to",
        guards=[_TEST + "test_a_member_of_a_user_spot_does_not_relocate_alone[memory]"],
    ),
    Mutation(
        name="actors.join_move_keeps_its_own_deadline",
        family=_ACTORS,
        rule="A join that moves the Actor to another node is not cancelled from outside at "
             "its deadline: the move aborts itself before relay-ready, never stranded "
             "Sealed between two store steps.",
        path=_DRIVER,
        find="    return await _join_elsewhere(rt, membership, container, to, deadline)\n",
        replace="    with trio.move_on_at(deadline.at):\n"
                "        return await _join_elsewhere(rt, membership, container, to, "
                "deadline)\n"
                "    raise _deadline_passed('the join')\n",
        guards=[_TEST + "test_a_join_elsewhere_whose_deadline_passes_at_the_seal_aborts_and_"
                "the_actor_stays[memory]",
                "tests/runtime/test_actor_model.py::test_a_join_past_its_deadline_at_the_seal_"
                "aborts_in_the_model"],
    ),
    Mutation(
        name="actors.no_move_without_members",
        family=_ACTORS,
        rule="A move never splits a Spot from its members unasked: the store refuses to "
             "move a Spot with members unless they stay (PerActor) or are carried "
             "(SpotWide).",
        path=_STEPS,
        find="        if not carry_members:\n            raise members_refusal(record.spot_id)\n",
        replace="",
        guards=[_CONFORMANCE + "test_a_move_never_splits_an_actor_from_its_container"
                "[memory://]"],
    ),
    Mutation(
        name="actors.carried_members_ready",
        family=_ACTORS,
        rule="A SpotWide move carries only members that are Ready, of the Spot's owner and "
             "in no move of their own (a joining member refuses the Spot's move).",
        path=_STEPS,
        find="            if refusal is not None:\n                raise refusal\n"
             "            members.append(member)\n",
        replace="            members.append(member)\n",
        guards=[_CARRIED + "test_a_spotwide_move_waits_for_a_member_in_its_own_move"
                "[memory://]"],
    ),
    Mutation(
        name="actors.one_aggregate_commit",
        family=_ACTORS,
        rule="SpotWide: the Spot's commit commits each carried member at the target in the "
             "same transaction, its owner generation + 1 (one aggregate commit).",
        path=_STEPS,
        find="    for member in members:  # one aggregate commit",
        replace="    for member in []:  # one aggregate commit",
        guards=[_CARRIED + "test_a_spotwide_move_carries_its_members_in_one_commit"
                "[memory://]"],
    ),
    Mutation(
        name="actors.carried_member_has_no_own_step",
        family=_ACTORS,
        rule="A carried member takes only its Spot's steps: its own fence is refused.",
        path=_STEPS,
        find="        if is_carried(record):\n            raise carried_refusal(record)\n",
        replace="",
        guards=[_CARRIED + "test_a_carried_member_takes_no_step_of_its_own[memory://]"],
    ),
    Mutation(
        name="actors.group_abort",
        family=_ACTORS,
        rule="An aborted SpotWide move keeps every carried member Ready at the source.",
        path=_STEPS,
        find="    _group_step(state, members, EV.abort_relocation, None)\n",
        replace="",
        guards=[_CARRIED + "test_an_aborted_spotwide_move_keeps_its_members_at_the_source"
                "[memory://]"],
    ),
    Mutation(
        name="actors.group_capacity",
        family=_ACTORS,
        rule="A SpotWide move needs room at the target for the Spot and every member.",
        path=_STEPS,
        find="    if load + len(members) >= claim.descriptor.capacity:",
        replace="    if load >= claim.descriptor.capacity:",
        guards=[_CARRIED + "test_a_spotwide_move_needs_room_for_every_member[memory://]"],
    ),
    Mutation(
        name="actors.group_released_with_its_spot",
        family=_ACTORS,
        rule="Restart recovery ends a SpotWide move's carried members with their Spot "
             "(aborted together, then each released), never one by one.",
        path="zlink_trio/store/dead_lifecycle.py",
        find="    if is_carried(record):\n        return ()\n",
        replace="",
        guards=[_CARRIED + "test_a_dead_lifecycle_releases_a_carried_group_with_its_spot"
                "[memory://]"],
    ),
    Mutation(
        name="actors.members_claimed_with_their_spot",
        family=_ACTORS,
        rule="A SpotWide Spot moves with its members here: each is claimed, sealed, "
             "captured and opened at the target with it.",
        path=_RELOCATION,
        find="    carried, busy = _claim_members(rt, spot_id) if spot_wide else ([], \"\")\n",
        replace="    carried, busy = [], \"\"\n",
        guards=[_TEST + "test_a_spotwide_spot_moves_with_its_members_in_one_commit[memory]"],
    ),
    Mutation(
        name="actors.spot_turn_before_members_hold",
        family=_ACTORS,
        rule="A SpotWide move seals the members only after the Spot's running turn ended, "
             "so a turn that calls its members finishes.",
        path=_RELOCATION,
        find="                    if host is not job.host:\n"
             "                        # A member is sealed once its Spot's running turn "
             "ended: a Spot's\n"
             "                        # turn that awaits its members (a fan-out) finishes "
             "before they hold.\n"
             "                        host.seal_for_relocation()\n",
        replace="                    if host is job.host:  # all at once\n"
                "                        for part in job.carried:\n"
                "                            part.host.seal_for_relocation()\n",
        guards=[_TEST + "test_a_rooms_turn_that_calls_its_members_at_the_seal_finishes_before"
                "_they_hold[memory]"],
    ),
    Mutation(
        name="actors.cluster_members_follow_each_step",
        family=_ACTORS,
        rule="Redis Cluster: after each step of a SpotWide move the carried members follow "
             "it in their own buckets.",
        path=_CLUSTER,
        find="        await self.carry.stepped(name, flat, record)\n",
        replace="",
        guards=[_CARRIED + "test_a_spotwide_move_carries_its_members_in_one_commit"
                "[redis-cluster]"],
    ),
    Mutation(
        name="actors.cluster_members_checked_before_the_move",
        family=_ACTORS,
        rule="Redis Cluster: a member no move can carry refuses the Spot's move before "
             "anything is written.",
        path="zlink_trio/store/redis_cluster/membership.py",
        find="            for refusal in refusals:\n                if refusal is not None:\n"
             "                    raise refusal\n",
        replace="",
        guards=[_CARRIED + "test_a_spotwide_move_waits_for_a_member_in_its_own_move"
                "[redis-cluster]"],
    ),
    Mutation(
        name="actors.cluster_refused_follow_ends_the_move",
        family=_ACTORS,
        rule="Redis Cluster: a member that refuses to follow the begin ends the whole move "
             "(the Spot and every member back at the source).",
        path=_CARRY,
        find="        with trio.CancelScope(shield=True):\n            await abort()\n"
             "        what = ",
        replace="        what = ",
        guards=[_CARRIED + "test_redis_cluster_a_member_that_changes_as_the_move_begins_ends"
                "_the_move[redis-cluster]"],
    ),
    Mutation(
        name="actors.cluster_resolve_a_commit",
        family=_ACTORS,
        rule="Redis Cluster: a member a commit left behind is moved to the target when read "
             "(the Spot's owner generation is past the move's).",
        path=_CARRY,
        find="        elif int(s[\"ogen\"]) > int(cog):\n            step = \"commit\"\n",
        replace="",
        guards=[_CARRIED + "test_redis_cluster_members_a_commit_left_behind_follow_on_their"
                "_next_read[redis-cluster]"],
    ),
    Mutation(
        name="actors.cluster_find_resolves",
        family=_ACTORS,
        rule="Redis Cluster: whoever reads a carried member left behind by its Spot's move "
             "resolves it first.",
        path=_CLUSTER,
        find="        if record is not None and is_carried(record) and await self.carry.resolve(",
        replace="        if False and await self.carry.resolve(",
        guards=[_CARRIED + "test_redis_cluster_members_an_abort_left_behind_return_to_the"
                "_source[redis-cluster]"],
    ),
    Mutation(
        name="actors.cluster_group_before_a_new_move",
        family=_ACTORS,
        rule="Redis Cluster: a Spot whose record holds an ended move's group begins no new "
             "move until that group is resolved.",
        path=_CLUSTER_LUA,
        find="  if r.grp then return {'GROUP', ",
        replace="  if false then return {'GROUP', ",
        guards=[_CARRIED + "test_redis_cluster_members_a_commit_left_behind_follow_on_their"
                "_next_read[redis-cluster]"],
    ),
    Mutation(
        name="actors.cluster_commit_raises_the_owner_generation",
        family=_ACTORS,
        rule="Redis Cluster: a carried member follows the commit with its own owner "
             "generation + 1.",
        path=_CLUSTER_LUA,
        find="  redis.call('HSET', KEYS[1], 'orid', m.trid, 'olc', m.tlc)\n"
             "  redis.call('HINCRBY', KEYS[1], 'ogen', 1)\n",
        replace="  redis.call('HSET', KEYS[1], 'orid', m.trid, 'olc', m.tlc)\n",
        guards=[_CARRIED + "test_a_spotwide_move_carries_its_members_in_one_commit"
                "[redis-cluster]"],
    ),
    Mutation(
        name="actors.cluster_release_ends_members",
        family=_ACTORS,
        rule="Redis Cluster: the members of a move released past relay-ready end with their "
             "Spot, also when their follow was lost.",
        path=_CLUSTER_LUA,
        find="  drop_record(m)  -- its unit went back",
        replace="  do return {'OK', 0} end  -- its unit went back",
        guards=[_CARRIED + "test_redis_cluster_members_a_release_left_behind_end_with_their"
                "_spot[redis-cluster]"],
    ),
    Mutation(
        name="actors.members_follow_by_the_deadline",
        family=_ACTORS,
        rule="The members of a PerActor Spot that moved follow it by the move's deadline: "
             "none begins its move after it (they stay, members still).",
        path="zlink_trio/runtime/coordinators/relocation.py",
        find="    late = await _in_parallel(members, follow, in_time)\n",
        replace="    late = await _in_parallel(members, follow, lambda: True)\n",
        guards=[_TEST + "test_no_member_of_a_per_actor_spot_starts_its_move_past_the_moves"
                "_deadline[memory]"],
    ),
)

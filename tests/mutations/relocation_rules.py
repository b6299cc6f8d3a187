"""The mutation gate's entries for planned relocation:
the hold, Message Follow (route checks, order, identity) and
the relay.

Each entry is a :class:`~mutation.Mutation`; see ``catalog.py``.
"""

from __future__ import annotations

from typing import Final

from mutation import Mutation

__all__ = ("RELOCATION_RULES",)

FAMILY: Final = "Planned relocation and Message Follow"
FOLLOW_FAMILY: Final = "Route cache and Message Follow routes"

_FOLLOW = "zlink_trio/runtime/mesh/message_follow.py"
_RELOCATION_TESTS = "tests/runtime/test_relocation.py"
_FOLLOW_TESTS = "tests/runtime/test_message_follow.py"


def _relocation_test(name: str) -> str:
    """The memory-store run of one test of ``test_relocation.py`` (a few seconds)."""
    return f"{_RELOCATION_TESTS}::{name}[memory]"


_IDENTITY = _relocation_test(
    "test_held_and_followed_messages_keep_their_operation_ids_and_run_once")
_FORGED = _relocation_test(
    "test_a_forged_message_follow_is_refused_and_direct_messages_ignore_generations")
_COMMAND_60 = _relocation_test(
    "test_the_target_takes_over_only_the_sealed_record_its_command_names")
_STRANDED = _relocation_test(
    "test_past_relay_ready_the_source_is_never_restored_and_ends_its_hold")

RELOCATION_RULES: tuple[Mutation, ...] = (
    # ------------------------------------------------------------ the relocation hold
    Mutation(
        name="M4",
        family=FAMILY,
        rule="A move aborted before relay-ready queues the held messages in their "
             "arrival order, behind the captured work.",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="        for work, size in held:\n            lane.append_unbounded(work, size)",
        replace="        for work, size in reversed(held):\n"
                "            lane.append_unbounded(work, size)",
        guards=[_relocation_test(
            "test_held_messages_of_a_move_aborted_before_relay_ready_run_in_arrival_order"),
            "tests/runtime/test_relocation_model.py::"
            "test_held_messages_of_an_aborted_move_keep_their_order_in_the_model"],
    ),
    Mutation(
        name="hold.sealed_admission_holds",
        family=FAMILY,
        rule="A message admitted to a sealed incarnation waits in the relocation hold; "
             "it is neither run nor queued (06 §6.1).",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="        move = self.admission(now)\n        if move is not None:",
        replace="        move = self.admission(now)\n        if False:",
        guards=[_relocation_test(
            "test_ingress_after_the_capture_waits_in_the_hold_and_follows_the_spot")],
    ),
    # ------------------------------------------------------------ operation identity
    Mutation(
        name="identity.held_relay",
        family=FAMILY,
        rule="A held message is relayed with its caller's operation ID (06 §6.1).",
        path=_FOLLOW,
        find='op_id=f"{work.operation_id:016x}" if work.operation_id else ""',
        replace='op_id=""',
        guards=[_IDENTITY],
    ),
    Mutation(
        name="identity.inbound",
        family=FAMILY,
        rule="A message from another node keeps the operation ID its frame carried.",
        path="zlink_trio/runtime/coordinators/inbound.py",
        find="deadline, operation_id=frame.operation_id,",
        replace="deadline, operation_id=0,",
        guards=[_IDENTITY],
    ),
    Mutation(
        name="identity.moved_queue",
        family=FAMILY,
        rule="A message queued at the seal moves in the payload with its operation ID.",
        path="zlink_trio/runtime/coordinators/relocation_capture.py",
        find="                                         item.operation_id))",
        replace="                                         0))",
        guards=[_IDENTITY],
    ),
    Mutation(
        name="identity.at_most_once",
        family=FAMILY,
        rule="A followed message whose operation ID already reached the incarnation "
             "along its move is not run again.",
        path=_FOLLOW,
        find="    if not arrival.first_delivery(frame.operation_id, deadline.at, now):",
        replace="    if False:",
        guards=[_IDENTITY],
    ),
    Mutation(
        name="identity.at_most_once_table",
        family=FAMILY,
        rule="The arrival's table answers a second delivery of an unexpired operation ID "
             "with 'not the first'.",
        path="zlink_trio/runtime/incarnation/arrival.py",
        find="if known is not None and known > now:",
        replace="if False:",
        guards=[_IDENTITY],
    ),
    Mutation(
        name="identity.moved_queue_recorded",
        family=FAMILY,
        rule="The target records the moved queue's operation IDs: a later follow of one "
             "of them is a redelivery.",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="                arrival.first_delivery(work.operation_id, work.deadline.at, now)",
        replace="                pass",
        guards=[_IDENTITY],
    ),
    # ------------------------------------------------ the receiver of a followed message
    Mutation(
        name="follow_receiver.object_generation",
        family=FAMILY,
        rule="A followed message naming another ObjectGeneration than the local "
             "incarnation's is InvalidOperation, not run.",
        path=_FOLLOW,
        find="    if route.object_generation != host.generation:",
        replace="    if False:",
        guards=[_FORGED],
    ),
    Mutation(
        name="follow_receiver.target_owner_generation",
        family=FAMILY,
        rule="A followed message must name the owner generation the relocation gave the "
             "local incarnation (else Unavailable, not run).",
        path=_FOLLOW,
        find="route.target_owner_generation != arrival.owner_generation",
        replace="False",
        guards=[_FORGED],
    ),
    Mutation(
        name="follow_receiver.source_owner_generation",
        family=FAMILY,
        rule="A followed message's source owner generation is one below its target's.",
        path=_FOLLOW,
        find="or route.source_owner_generation + 1 != route.target_owner_generation:",
        replace="or False:",
        guards=[_FORGED],
    ),
    Mutation(
        name="follow_receiver.relaying_node",
        family=FAMILY,
        rule="Only the node the Spot moved from relays to it: a followed message from "
             "another peer is Unavailable, not run.",
        path=_FOLLOW,
        find="    if not _same_lifecycle(peer, arrival.source):",
        replace="    if False:",
        guards=[_FORGED],
    ),
    # ------------------------------------------------ Message Follow on the old owner
    Mutation(
        name="follow.object_generation",
        family=FOLLOW_FAMILY,
        rule="A message naming another ObjectGeneration than the route's is not followed "
             "(InvalidOperation).",
        path=_FOLLOW,
        find="    if incoming.object_generation != route.object_generation:\n"
             "        return FollowEvent.DROP_GENERATION",
        replace="    if False:\n        return FollowEvent.DROP_GENERATION",
        guards=[f"{_FOLLOW_TESTS}::test_another_object_generation_is_invalid_operation"],
    ),
    Mutation(
        name="follow.owner_generation",
        family=FOLLOW_FAMILY,
        rule="A message naming an owner generation newer than the route's is not followed "
             "(Unavailable).",
        path=_FOLLOW,
        find="    if held > route.source_owner_generation:\n        # Addressed",
        replace="    if False:\n        # Addressed",
        guards=[f"{_FOLLOW_TESTS}::test_a_newer_owner_generation_than_the_route_is_unavailable"],
    ),
    Mutation(
        name="follow.max_hops",
        family=FOLLOW_FAMILY,
        rule="A message follows at most 8 routes; the ninth hop is Unavailable.",
        path=_FOLLOW,
        find="    if hops > MAX_HOPS:",
        replace="    if hops > MAX_HOPS + 1:",
        guards=[f"{_FOLLOW_TESTS}::test_the_ninth_hop_is_refused_with_unavailable"],
    ),
    Mutation(
        name="follow.superseded_owner_generation",
        family=FOLLOW_FAMILY,
        rule="A route older than the owner generation a message names no longer applies.",
        path=_FOLLOW,
        find="    return held > route.source_owner_generation",
        replace="    return False",
        guards=[f"{_FOLLOW_TESTS}::"
                "test_a_route_older_than_the_owner_generation_addressed_is_superseded"],
    ),
    Mutation(
        name="follow.superseded_direct_generation",
        family=FOLLOW_FAMILY,
        rule="A direct message to another ObjectGeneration than the route's is answered "
             "as for a Spot the node no longer hosts, not followed.",
        path=_FOLLOW,
        find="        return not isinstance(incoming, FollowFrameRoute)",
        replace="        return False",
        guards=[f"{_FOLLOW_TESTS}::"
                "test_a_direct_message_to_another_object_generation_is_superseded"],
    ),
    Mutation(
        name="follow.route_expiry",
        family=FOLLOW_FAMILY,
        rule="A route is gone once its MessageFollowDuration ran out.",
        path="zlink_trio/runtime/mesh/follow_routes.py",
        find="        if route is not None and now >= route.expires_at:",
        replace="        if False:",
        guards=[f"{_FOLLOW_TESTS}::test_a_route_is_gone_once_its_message_follow_duration_ran_out"],
    ),
    Mutation(
        name="follow.no_route_unavailable",
        family=FOLLOW_FAMILY,
        rule="A followed message reaching a node with neither the Spot nor a route ends "
             "Unavailable (06 §6).",
        path="zlink_trio/runtime/coordinators/inbound.py",
        find="        if isinstance(route, FollowFrameRoute):\n            follow_event(",
        replace="        if False:\n            follow_event(",
        guards=[_relocation_test("test_a_followed_message_that_finds_no_route_is_unavailable")],
    ),
    # ------------------------------------------------ past relay-ready, on the source
    Mutation(
        name="relay_ready.source_never_restored",
        family=FAMILY,
        rule="Past relay-ready the source never serves again, even when the target does "
             "not commit (06 §6.1, §8).",
        path="zlink_trio/runtime/coordinators/relocation.py",
        find="        host.strand(stuck)",
        replace="        host.unseal()",
        guards=[_STRANDED],
    ),
    Mutation(
        name="relay_ready.held_end_unavailable",
        family=FAMILY,
        rule="A stranded move ends its held requests Unavailable at once, not at their "
             "deadlines.",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="                work.completion.set_error(Unavailable(why))",
        replace="                pass",
        guards=[_STRANDED],
    ),
    Mutation(
        name="relay_ready.ingress_refused",
        family=FAMILY,
        rule="A stranded move refuses new ingress with Unavailable instead of holding it.",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="        move.stranded = why",
        replace="        pass",
        guards=[_STRANDED],
    ),
    # ------------------------------------------------ command 60: the target's fences
    Mutation(
        name="relocation_target.store_version",
        family=FAMILY,
        rule="The target takes over only the Sealed record whose StoreVersion its command "
             "60 names (a delayed 60 of an earlier seal moves nothing).",
        path="zlink_trio/runtime/coordinators/remote_relocation.py",
        find="        (record.store_version == frame.expected_store_version,",
        replace="        (True,",
        guards=[_COMMAND_60],
    ),
    Mutation(
        name="relocation_target.owner_generation",
        family=FAMILY,
        rule="The target takes over only the owner generation its command 60 names.",
        path="zlink_trio/runtime/coordinators/remote_relocation.py",
        find="        (record.owner_generation == frame.owner_generation,",
        replace="        (True,",
        guards=[_COMMAND_60],
    ),
    Mutation(
        name="relocation_target.owner",
        family=FAMILY,
        rule="Only the Spot's owner can hand it over: a command 60 from another node moves "
             "nothing.",
        path="zlink_trio/runtime/coordinators/remote_relocation.py",
        find="        (record.owner == frame.source, ",
        replace="        (True, ",
        guards=[_COMMAND_60],
    ),
    Mutation(
        name="relocation_target.sealed",
        family=FAMILY,
        rule="The target takes over only a Sealed record (relay-ready comes after the seal).",
        path="zlink_trio/runtime/coordinators/remote_relocation.py",
        find="        (record.state is AuthorityState.SEALED, ",
        replace="        (True, ",
        guards=[_COMMAND_60],
    ),
    # target died after relay-ready
    Mutation(
        name="relocation.release_needs_a_dead_target",
        family="Planned relocation and Message Follow",
        rule="ReleaseRelayReady ends a move past relay-ready only once its target's "
             "lease is over (TargetAlive: a live target commits).",
        path="zlink_trio/store/rules/relocation_steps.py",
        find="            and claim.is_live(now)):\n        raise TargetAlive(",
        replace="            and claim.is_live(now) and False):\n        raise TargetAlive(",
        guards=["tests/store/test_relocation_release_conformance.py::"
                "test_a_move_toward_a_live_target_is_not_released[memory://]"],
    ),
    Mutation(
        name="relocation.release_needs_a_dead_target.lua",
        family="Planned relocation and Message Follow",
        rule="On Redis too, ReleaseRelayReady refuses a move whose target's lease is live.",
        path="zlink_trio/store/redis/lua/location.py",
        find="if c ~= nil and c.lc == r.tlc and tonumber(ARGV[9]) < tonumber(c.exp) then",
        replace="if false then",
        guards=["tests/store/test_relocation_release_conformance.py::"
                "test_a_move_toward_a_live_target_is_not_released[redis]"],
    ),
    Mutation(
        name="relocation.release_names_the_moves_target",
        family="Planned relocation and Message Follow",
        rule="ReleaseRelayReady is fenced by the target the move names (StaleFence for "
             "another).",
        path="zlink_trio/store/rules/relocation_steps.py",
        find="    if record.relocation_target != target:\n        raise StaleFence(\n"
             "            f\"{record.spot_id!r} moves to",
        replace="    if False:\n        raise StaleFence(\n"
                "            f\"{record.spot_id!r} moves to",
        guards=["tests/store/test_relocation_release_conformance.py::"
                "test_release_relay_ready_refusals_write_nothing[memory://]"],
    ),
    Mutation(
        name="relocation.dead_target_moves_are_listed",
        family="Planned relocation and Message Follow",
        rule="A restarted NodeId's startup scan finds the moves past relay-ready toward "
             "its dead lifecycles (dead_owned).",
        path="zlink_trio/store/rules/recovery.py",
        find="if (r.owner in owners or is_dead_target_move(r, owners))",
        replace="if (r.owner in owners)",
        guards=["tests/store/test_dead_lifecycle_conformance.py::"
                "test_a_restarted_target_releases_a_move_its_dead_lifecycle_left_past_relay_ready"
                "[memory://]"],
    ),
    Mutation(
        name="relocation.restart_releases_the_dead_targets_move",
        family="Planned relocation and Message Follow",
        rule="Restart recovery releases a RelayReady move whose target died "
             "(release_relay_ready), it does not leave it Unavailable.",
        path="zlink_trio/store/dead_lifecycle.py",
        find="            await location.release_relay_ready(record.fence(), target=target, "
             "now=now())",
        replace="            return \"left\"",
        guards=["tests/store/test_dead_lifecycle_conformance.py::"
                "test_a_restarted_target_releases_a_move_its_dead_lifecycle_left_past_relay_ready"
                "[memory://]"],
    ),
    Mutation(
        name="relocation.live_target_keeps_its_move",
        family="Planned relocation and Message Follow",
        rule="Restart recovery of a dead source leaves a move toward a live target past "
             "relay-ready to that target (reported, not released).",
        path="zlink_trio/store/dead_lifecycle.py",
        find="        except TargetAlive:\n            return (",
        replace="        except TargetAlive:\n            return None and (",
        guards=["tests/store/test_dead_lifecycle_conformance.py::"
                "test_release_dead_node_ends_each_state_with_its_fenced_transaction[memory://]"],
    ),
    Mutation(
        name="relocation.released_payload_root_deleted",
        family="Planned relocation and Message Follow",
        rule="Releasing a move that died after its capture deletes the payload root its "
             "record names.",
        path="zlink_trio/store/dead_lifecycle.py",
        find="    if record.relocation_payload is not None:\n"
             "        await relocation.delete_root(record.relocation_payload)",
        replace="    if record.relocation_payload is not None:\n        pass",
        guards=["tests/store/test_dead_lifecycle_conformance.py::"
                "test_a_restarted_source_deletes_the_payload_root_of_a_move_it_captured"
                "[memory://]"],
    ),
    Mutation(
        name="relocation.payload_named_before_the_root",
        family="Planned relocation and Message Follow",
        rule="The source names its payload root on the Sealed record before it writes it, "
             "so a move that dies after its capture leaves no root nobody can find.",
        path="zlink_trio/runtime/coordinators/relocation.py",
        find="    job.record = await location.record_relocation_payload(job.record.fence(), "
             "payload=receipt,",
        replace="    job.record = job.record or await location.record_relocation_payload("
                "job.record.fence(), payload=receipt,",
        guards=["tests/runtime/test_relocation_target_died.py::"
                "test_a_restarted_target_releases_the_move_it_died_in_past_relay_ready[memory]"],
    ),
    Mutation(
        name="relocation.released_source_ends",
        family="Planned relocation and Message Follow",
        rule="A source whose move was released past relay-ready ends its incarnation "
             "(on_close(OWNERSHIP_LOST), no store write).",
        path="zlink_trio/runtime/coordinators/relocation.py",
        find="        host.lose_ownership(error)",
        replace="        host.move.stranded = error.message if host.move else None",
        guards=["tests/runtime/test_relocation_target_died.py::"
                "test_a_restarted_target_releases_the_move_it_died_in_past_relay_ready[memory]"],
    ),
    # relay and lifecycle lane
    Mutation(
        name="relay.flow_control",
        family="Planned relocation and Message Follow",
        rule="The relay of a hold streams within the link's flow control: it waits while "
             "the link is not writable instead of queuing the whole hold at once.",
        path="zlink_trio/runtime/mesh/message_follow.py",
        find="        if not link.writable:\n",
        replace="        if False:\n",
        guards=["tests/runtime/test_relocation_relay.py::"
                "test_a_hold_above_the_links_bound_streams_exactly_once_in_order_beside_other_calls"],
    ),
    Mutation(
        name="relay.target_queues_the_hold",
        family="Planned relocation and Message Follow",
        rule="The new owner queues a followed (relayed) message past its application "
             "lane's bounds: the hold was accepted at the source.",
        path="zlink_trio/runtime/coordinators/inbound.py",
        find="            host.admit_followed(work, len(payload.body))",
        replace="            host.admit(work, len(payload.body))",
        guards=["tests/runtime/test_relocation_relay.py::"
                "test_the_new_owner_queues_a_relayed_hold_past_its_full_application_lane"],
    ),
    Mutation(
        name="drain.untried_listed",
        family="Planned relocation and Message Follow",
        rule="A drain out of time lists the Spots whose move it never began as not moved "
             "(they stay on the node), so a drain is never reported complete while Spots "
             "remain (issue #32).",
        path="zlink_trio/runtime/coordinators/relocation.py",
        find="                        not_moved.append(aborted(spot_id, _NOT_BEGUN))\n",
        replace="                        pass\n",
        guards=["tests/runtime/test_node_stop.py::"
                "test_a_drain_out_of_time_lists_every_spot_it_did_not_move[all-listed]"],
    ),
    Mutation(
        name="relocation.own_fault_aborts",
        family=FAMILY,
        rule="A fault of the source's own before command 60 (not a ZLinkError: a bug) "
             "aborts the move and the Spot serves again at the source; it never stays "
             "sealed until the node stops.",
        path="zlink_trio/runtime/coordinators/relocation.py",
        find="            if await _abort(job, why, sealed=sealed) is None:\n"
             "                await _settle(job, why)\n",
        replace="",
        guards=[_relocation_test("test_a_fault_of_the_source_after_the_seal_aborts_the_move"
                                 "_and_the_spot_serves_again")],
    ),
    Mutation(
        name="relay.target_waits_for_the_relay",
        family="Planned relocation and Message Follow",
        rule="Until the source says its relay is over (command 62), the new owner runs "
             "only the moved queue and followed messages: a sender on the target node "
             "never overtakes its message held at the source.",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="        arrival.waiting = []\n",
        replace="        arrival.waiting = None\n",
        guards=["tests/runtime/test_relocation_relay.py::"
                "test_a_sender_on_the_new_owner_waits_until_the_hold_is_relayed"],
    ),
    # The lifecycle lane's admission is the incarnation's (runtime_rules' family
    # "Execution lanes"); it is listed here, with the relay, because the relocation's
    # seal is the lifecycle work a full application lane must not refuse.
    Mutation(
        name="lanes.lifecycle_admission",
        family="Execution lanes",
        rule="Lifecycle work (a relocation's seal, ctx.close()'s BeginClose) is admitted "
             "under the lifecycle lane's own bounds, however full the application lane is.",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="        self.lanes.lifecycle.admit(work, 0)",
        replace="        self.lanes.application.admit(work, 0)",
        guards=["tests/runtime/test_lifecycle_lane.py"],
    ),
    # A stop is a drain (runtime/node.py, runtime/stopping.py)
    Mutation(
        name="stop.drains_first",
        family=FAMILY,
        rule="Leaving the open_node block normally first moves the node's Spots to another "
             "live node that serves their types, each by its relocation policy.",
        path="zlink_trio/runtime/node.py",
        find="                            await move_spots_away(rt, setup.lifecycle, stop)",
        replace="                            pass",
        guards=["tests/runtime/test_node_stop.py::"
                "test_leaving_the_block_moves_each_spot_by_its_policy_to_another_node"],
    ),
    Mutation(
        name="stop.close_after_failure",
        family=FAMILY,
        rule="A block that ended with an error closes the node's Spots instead of moving "
             "them: only a normal stop (or a stop_on signal) is graceful.",
        path="zlink_trio/runtime/node.py",
        find="                        if stop.graceful:",
        replace="                        if True:",
        guards=["tests/runtime/test_node_stop.py::"
                "test_a_block_that_raises_closes_instead_of_moving"],
    ),
    Mutation(
        name="stop.second_signal_hurries",
        family=FAMILY,
        rule="A second stop_on signal starts no further move: what has not moved closes at "
             "once.",
        path="zlink_trio/runtime/stopping.py",
        find="            stop.hurried.set()",
        replace="            pass",
        guards=["tests/runtime/test_node_stop.py::"
                "test_a_second_signal_starts_no_further_move_and_closes_the_rest"],
    ),
)

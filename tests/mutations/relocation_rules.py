"""The mutation gate's entries for planned relocation:
the hold, Message Follow (route checks, order, identity) and
the relay.

Each entry is a :class:`~mutation.Mutation`; see ``catalog.py``.
"""

from __future__ import annotations

from mutation import Mutation

__all__ = ("RELOCATION_RULES",)

RELOCATION_RULES: tuple[Mutation, ...] = (
    Mutation(
        name="M4",
        family="Planned relocation and Message Follow (06 §6, §6.1, §8; 09 §2)",
        rule="A move aborted before relay-ready queues the held messages in their "
             "arrival order, behind the captured work.",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="        for work, size in held:\n            lane.append_unbounded(work, size)",
        replace="        for work, size in reversed(held):\n"
                "            lane.append_unbounded(work, size)",
        guards=["tests/runtime/test_relocation.py"],
    ),
    # target died after relay-ready
    Mutation(
        name="relocation.release_needs_a_dead_target",
        family="Planned relocation and Message Follow (06 §6, §6.1, §8; 09 §2)",
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
        family="Planned relocation and Message Follow (06 §6, §6.1, §8; 09 §2)",
        rule="On Redis too, ReleaseRelayReady refuses a move whose target's lease is live.",
        path="zlink_trio/store/redis/lua/location.py",
        find="if c ~= nil and c.lc == r.tlc and tonumber(ARGV[9]) < tonumber(c.exp) then",
        replace="if false then",
        guards=["tests/store/test_relocation_release_conformance.py::"
                "test_a_move_toward_a_live_target_is_not_released[redis]"],
    ),
    Mutation(
        name="relocation.release_names_the_moves_target",
        family="Planned relocation and Message Follow (06 §6, §6.1, §8; 09 §2)",
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
        family="Planned relocation and Message Follow (06 §6, §6.1, §8; 09 §2)",
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
        family="Planned relocation and Message Follow (06 §6, §6.1, §8; 09 §2)",
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
        family="Planned relocation and Message Follow (06 §6, §6.1, §8; 09 §2)",
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
        family="Planned relocation and Message Follow (06 §6, §6.1, §8; 09 §2)",
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
        family="Planned relocation and Message Follow (06 §6, §6.1, §8; 09 §2)",
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
        family="Planned relocation and Message Follow (06 §6, §6.1, §8; 09 §2)",
        rule="A source whose move was released past relay-ready ends its incarnation "
             "(on_close(OWNERSHIP_LOST), no store write).",
        path="zlink_trio/runtime/coordinators/relocation.py",
        find="    job.host.lose_ownership(error)",
        replace="    job.host.move.stranded = error.message if job.host.move else None",
        guards=["tests/runtime/test_relocation_target_died.py::"
                "test_a_restarted_target_releases_the_move_it_died_in_past_relay_ready[memory]"],
    ),
)

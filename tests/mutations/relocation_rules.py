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
    # relay and lifecycle lane
    Mutation(
        name="relay.flow_control",
        family="Planned relocation and Message Follow (06 §6, §6.1, §8; 09 §2)",
        rule="The relay of a hold streams within the link's flow control: it waits while "
             "the link is not writable instead of queuing the whole hold at once.",
        path="zlink_trio/runtime/mesh/message_follow.py",
        find="        if not link.writable:\n",
        replace="        if False:\n",
        guards=["tests/runtime/test_relocation_relay.py::"
                "test_a_hold_above_the_links_bound_streams_exactly_once_in_order_beside_other_calls"],
    ),
    Mutation(
        name="relay.behind_the_hold",
        family="Planned relocation and Message Follow (06 §6, §6.1, §8; 09 §2)",
        rule="A call this node sends to a Spot whose hold is still being relayed goes "
             "behind the hold, never overtaking a held message.",
        path="zlink_trio/runtime/coordinators/routing.py",
        find="    relay = rt.follow.relay(call.spot_id)\n",
        replace="    relay = None\n",
        guards=["tests/runtime/test_relocation_relay.py::"
                "test_a_hold_above_the_links_bound_streams_exactly_once_in_order_beside_other_calls"],
    ),
    Mutation(
        name="relay.target_queues_the_hold",
        family="Planned relocation and Message Follow (06 §6, §6.1, §8; 09 §2)",
        rule="The new owner queues a followed (relayed) message past its application "
             "lane's bounds: the hold was accepted at the source.",
        path="zlink_trio/runtime/coordinators/inbound.py",
        find="            host.admit_followed(work, len(payload.body))",
        replace="            host.admit(work, len(payload.body))",
        guards=["tests/runtime/test_relocation_relay.py::"
                "test_the_new_owner_queues_a_relayed_hold_past_its_full_application_lane"],
    ),
    # The lifecycle lane's admission is the incarnation's (runtime_rules' family
    # "Execution lanes"); it is listed here, with the relay, because the relocation's
    # seal is the lifecycle work a full application lane must not refuse.
    Mutation(
        name="lanes.lifecycle_admission",
        family="Execution lanes (09 §6)",
        rule="Lifecycle work (a relocation's seal, ctx.close()'s BeginClose) is admitted "
             "under the lifecycle lane's own bounds, however full the application lane is.",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="        self.lanes.lifecycle.admit(work, 0)",
        replace="        self.lanes.application.admit(work, 0)",
        guards=["tests/runtime/test_lifecycle_lane.py"],
    ),
)

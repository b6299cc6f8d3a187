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
)

"""The mutation gate's entries for the runtime:
routing and delivery, admission and the lease, create and close
(and their 47/48 targets), the ceiling, idle eviction and the lanes.

Each entry is a :class:`~mutation.Mutation`; see ``catalog.py``.
"""

from __future__ import annotations

from mutation import Mutation

__all__ = ("RUNTIME_RULES",)

RUNTIME_RULES: tuple[Mutation, ...] = (
    Mutation(
        name="M1",
        family="Direct calls: send / request, one deadline, no hidden retry (06 §4, §5)",
        rule="A message is never delivered to a local instance whose generation the store "
             "no longer names.",
        path="zlink_trio/runtime/coordinators/routing.py",
        find="if host is None or host.generation != record.object_generation:",
        replace="if host is None:",
        guards=["tests/runtime/test_spec_06.py"],
    ),
)

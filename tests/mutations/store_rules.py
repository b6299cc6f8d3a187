"""The mutation gate's entries for the store:
every fence check of the transaction rules (``store/rules/``, the
oracle) and of the backends that do not run them (the Redis Lua).

Each entry is a :class:`~mutation.Mutation`; see ``catalog.py``.
"""

from __future__ import annotations

from mutation import Mutation

__all__ = ("STORE_RULES",)

STORE_RULES: tuple[Mutation, ...] = (
    Mutation(
        name="store.owner_lifecycle_fence",
        family="Store transactions (06 §3, §4.1, §7, §8)",
        rule="An owner fence whose lifecycle generation is not the claim's current one "
             "changes no authority (StaleFence).",
        path="zlink_trio/store/rules/location.py",
        find="if claim is None or claim.lifecycle_generation != owner.lifecycle_generation:",
        replace="if claim is None:",
        guards=["tests/store/test_location_conformance.py"],
    ),
)

"""The mutation gate's catalog: every safety rule, a small change that breaks it, and
the tests that must notice.

Theory of operation
-------------------
A test guards a rule only if deleting the rule makes it fail. Each :class:`Mutation`
names one rule (``rule``), the family it belongs to (a row of ``docs/architecture.md``'s
"Where each rule lives" table), the one place in the source where it is enforced
(``path`` and ``find``, which must occur exactly once there) and a change that deletes
or weakens it (``replace``). ``guards`` are the pytest node IDs run against the mutated
copy: at least one of them must fail. ``tests/mutations/run.py`` applies each mutation
to a copy of the tree in turn; ``tests/test_mutation_catalog.py`` checks, in every
ordinary test run, that each ``find`` still occurs exactly once and each guard exists,
so the catalog cannot drift from the code silently.
"""

from __future__ import annotations

import attrs

__all__ = ("MUTATIONS", "Mutation")


@attrs.frozen
class Mutation:
    """One rule and the change that deletes it."""

    #: A short unique name (``M1``... for the audit's five, ``family.rule`` otherwise).
    name: str
    #: The row of the "Where each rule lives" table (docs/architecture.md).
    family: str
    #: What the rule says, in a sentence.
    rule: str
    #: The file that enforces it, relative to the repository root.
    path: str
    #: Source text that occurs exactly once in ``path``.
    find: str
    #: What ``find`` becomes.
    replace: str
    #: Pytest node IDs (files, or ``file::test``); one must fail under the mutation.
    guards: tuple[str, ...] = attrs.field(converter=tuple)


MUTATIONS: tuple[Mutation, ...] = ()

"""One entry of the mutation gate: a safety rule, a change that deletes it, its guards.

See ``catalog.py`` for how the gate uses them.
"""

from __future__ import annotations

import attrs

__all__ = ("Mutation",)


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
    #: Seconds its guards may run, when less than the gate's ``--timeout``: for a rule
    #: whose deletion leaves a caller waiting for good, so the gate need not wait as long.
    timeout: float | None = None

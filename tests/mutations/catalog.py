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

The entries live beside the layer they guard: ``input_rules`` (identity formats and
the handshake's authentication), ``store_rules`` (the store's fences, the
oracle and every backend), ``runtime_rules`` (routing, admission, create, close, the
47/48 targets, ceilings and lanes), ``relocation_rules`` (the relocation hold, Message
Follow, relay), ``actor_rules`` (Actor membership and ToActor calls), ``state_rules``
(durable state), ``reminder_rules`` (durable reminders). This module joins them in that order.
"""

from __future__ import annotations

from actor_rules import ACTOR_RULES
from input_rules import INPUT_RULES
from mutation import Mutation
from relocation_rules import RELOCATION_RULES
from reminder_rules import REMINDER_RULES
from runtime_rules import RUNTIME_RULES
from state_rules import STATE_RULES
from store_rules import STORE_RULES

__all__ = ("MUTATIONS", "Mutation")

MUTATIONS: tuple[Mutation, ...] = (*INPUT_RULES, *STORE_RULES, *RUNTIME_RULES,
                                   *RELOCATION_RULES, *ACTOR_RULES, *STATE_RULES,
                                   *REMINDER_RULES)

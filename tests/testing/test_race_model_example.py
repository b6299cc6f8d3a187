"""The worked example of docs/testing.md: ``SpotRaceModel`` finds a Spot that keeps its
state outside itself, and passes the same Spot written right.

``LeakyTally`` keeps its running total in a module-level dict keyed by Spot ID instead of
on the instance. One incarnation never notices; but when the runtime builds a *new*
instance -- after idle eviction, after a close, on the target of a relocation -- that
instance must start from zero (the Spot's own contract: "a fresh tally starts at 0"),
and the leaked total carries over. The model's own invariant says so after every rule;
hypothesis finds a schedule (activate, let it idle out or move it, call again) and
shrinks it. ``Tally`` keeps the total on ``self`` and passes. Both run with fixed
settings (derandomized, no example database), so neither can rot into a pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Final

import attrs
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

import zlink_trio as zl
from zlink_trio.testing import SpotRaceModel

if TYPE_CHECKING:
    from zlink_trio.testing import Recorder


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Total:
    value: int


#: The bug: state that outlives the instance.
LEAKED: dict[str, int] = {}


@zl.instance_spot("leaky-tally", relocation=zl.RecreateOnRelocation())
class LeakyTally:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.spot_id = ctx.spot_id

    @zl.handler
    async def add(self, msg: Add) -> Total:
        LEAKED[self.spot_id] = LEAKED.get(self.spot_id, 0) + msg.n
        return Total(LEAKED[self.spot_id])


@zl.instance_spot("tally", relocation=zl.RecreateOnRelocation())
class Tally:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.total = 0

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total)


class TallyRace(SpotRaceModel):
    """A fresh instance starts at 0: each reply is the sum of what *that* instance ran."""

    spots = (Tally,)
    instance_ids: ClassVar = {"t0": "tally", "t1": "tally"}
    messages = st.builds(Add, st.integers(1, 3))

    def __init__(self) -> None:
        super().__init__()
        LEAKED.clear()  # every example is a fresh process, as far as a Spot can tell

    def spot_invariants(self, record: Recorder) -> None:
        for run, turns in record.turns_by_instance().items():
            total = 0
            for turn in turns:
                if not turn.done:
                    break
                total += turn.message.n  # type: ignore[attr-defined]
                assert turn.result == Total(total), (
                    f"{run.spot_id}@{run.generation} on {run.node} replied {turn.result} "
                    f"to {turn.message}, but that instance only ran "
                    f"{[t.message for t in turns[:turns.index(turn) + 1]]}")


class LeakyTallyRace(TallyRace):
    spots = (LeakyTally,)
    instance_ids: ClassVar = {"t0": "leaky-tally", "t1": "leaky-tally"}


#: Fixed: the same examples on every run and machine (no database, derandomized), and no
#: shrinking (minutes of replays; run it locally to see the minimal program).
FIXED: Final = settings(max_examples=40, stateful_step_count=20, deadline=None,
                        derandomize=True, database=None, print_blob=False,
                        phases=[Phase.explicit, Phase.generate],
                        suppress_health_check=list(HealthCheck))


def test_the_race_model_finds_a_spot_that_keeps_its_state_outside_the_instance() -> None:
    with pytest.raises(AssertionError, match=r"t\d@\d+ on node-\d replied Total"):
        LeakyTallyRace.run(settings=FIXED)


def test_the_same_race_model_passes_the_spot_that_keeps_its_state_on_the_instance() -> None:
    TallyRace.run(settings=settings(FIXED, max_examples=10))

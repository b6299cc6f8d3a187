"""The runtime steps a lifecycle only along its chart (``zlink_trio.runtime.charts.step``).

Every pair of a chart's states and events is stepped: a transition the chart defines
returns its target, and one it does not define is refused with InvalidOperation (a
runtime bug surfaced), never a silent stay or jump. Pure: no I/O, no clock.
"""

from __future__ import annotations

import pytest

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.runtime.charts import CLOSE, COLD, CREATE, INCARNATION, NODE, RELOCATION, step

CHARTS = (CREATE, CLOSE, COLD, INCARNATION, NODE, RELOCATION)


@pytest.mark.parametrize("chart", CHARTS, ids=lambda chart: chart.name)
def test_step_takes_every_defined_transition_and_refuses_every_other(chart) -> None:
    table = chart.table
    refused = 0
    for state in table.state_order:
        for event in table.event_order:
            target = table.transitions.get((state, event))
            if target is not None:
                assert step(chart, state, event) == target
                continue
            refused += 1
            with pytest.raises(InvalidOperation, match="internal lifecycle error") as raised:
                step(chart, state, event)
            assert f"event {event!r} from state {state!r}" in raised.value.message
    assert refused > 0  # every chart leaves some event undefined in some state

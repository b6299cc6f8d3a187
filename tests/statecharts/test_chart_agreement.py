"""Property: a chart instance and its compiled table agree on every event sequence.

For random sequences of events (the chart's own events plus one it does not know), a
python-statemachine instance and ``compile(chart).step`` must accept and refuse the
same events, reach the same state, and leave the state unchanged on refusal.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statemachine.exceptions import TransitionNotAllowed

from statecharts import ALL_CHARTS, UndefinedTransition, compile

UNKNOWN_EVENT = "no_such_event"


@pytest.mark.parametrize("chart", ALL_CHARTS, ids=lambda c: c.__name__)
@settings(max_examples=150)
@given(data=st.data())
def test_instance_and_table_agree_on_random_event_sequences(chart, data):
    table = compile(chart)
    events = st.sampled_from((*table.event_order, UNKNOWN_EVENT))
    sequence = data.draw(st.lists(events, max_size=40), label="events")
    machine = chart()
    state = table.initial
    for event in sequence:
        try:
            expected = table.step(state, event)
        except UndefinedTransition:
            expected = None
        try:
            machine.send(event)
        except TransitionNotAllowed:
            accepted = False
        else:
            accepted = True
        assert accepted == (expected is not None), (state, event)
        if expected is not None:
            state = expected
        assert set(machine.configuration_values) == {state}, (state, event)

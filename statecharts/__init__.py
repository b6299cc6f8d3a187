"""The formal lifecycle definitions of zlink_trio, as python-statemachine charts.

Each lifecycle (a Spot's authority, cold activation, User Spot create, close, the
incarnation, planned relocation, the node, an Actor's membership) is one flat
:class:`StrictChart` in its own module; the module docstring is its theory of
operation and states the rules it encodes.  The runtime does not keep chart
instances: it calls :func:`compile` once per chart class and steps a plain state id
through the resulting :class:`TransitionTable`, which raises
:class:`UndefinedTransition` for any transition the chart does not define.
``python -m statecharts render docs/statecharts`` writes the diagrams;
``python -m statecharts check DIR`` fails on drift.

This package is pure: it never imports trio or zlink_trio and does no I/O except in
:mod:`statecharts.render` when asked to write pages.

Modules:

- ``spot_authority``, ``cold_activation``, ``user_create``, ``incarnation``,
  ``relocation``, ``close``, ``node_lifecycle``, ``actor_membership`` -- the charts,
  one lifecycle each
- ``_base``     -- :class:`StrictChart`, the strict base every chart derives from
- ``_compile``  -- :func:`compile`: a chart as an immutable :class:`TransitionTable`
- ``_typed``    -- a compiled chart with typed state, event and tag names
- ``names/``    -- those names for every chart (``CHART.st``, ``.ev``, ``.tags``),
                   generated: do not edit
- ``codegen``   -- writes ``names/`` from the compiled charts
- ``links``     -- the runtime modules that drive each chart and the tests that cover
                   it (the pages link them)
- ``trace``     -- the JSON-lines trace file of transitions a run took (``TraceWriter``
                   records one from the runtime's ``charts.TRACE``)
- ``diagram``   -- one chart with a trace highlighted, as mermaid or Graphviz DOT
                   (``zlink-trio statecharts``)
- ``svg``       -- the same as an SVG drawing laid out in pure Python (no Graphviz)
- ``render``    -- the Markdown page of every chart and the index; the drift check
- ``__main__``  -- ``python -m statecharts render DIR`` / ``check DIR``
"""

from __future__ import annotations

from statecharts._base import StrictChart as StrictChart
from statecharts._compile import ChartNotCompilable as ChartNotCompilable
from statecharts._compile import TransitionTable as TransitionTable
from statecharts._compile import UndefinedTransition as UndefinedTransition
from statecharts._compile import compile as compile
from statecharts.actor_membership import ActorMembership as ActorMembership
from statecharts.close import CloseOperation as CloseOperation
from statecharts.cold_activation import ColdActivation as ColdActivation
from statecharts.incarnation import Incarnation as Incarnation
from statecharts.node_lifecycle import NodeLifecycle as NodeLifecycle
from statecharts.relocation import PlannedRelocation as PlannedRelocation
from statecharts.spot_authority import SpotAuthority as SpotAuthority
from statecharts.user_create import UserCreate as UserCreate

#: Every lifecycle chart, in the order the docs index lists them.
ALL_CHARTS: tuple[type[StrictChart], ...] = (
    SpotAuthority,
    ColdActivation,
    UserCreate,
    Incarnation,
    CloseOperation,
    PlannedRelocation,
    NodeLifecycle,
    ActorMembership,
)

__all__ = (
    "ALL_CHARTS",
    "ActorMembership",
    "ChartNotCompilable",
    "CloseOperation",
    "ColdActivation",
    "Incarnation",
    "NodeLifecycle",
    "PlannedRelocation",
    "SpotAuthority",
    "StrictChart",
    "TransitionTable",
    "UndefinedTransition",
    "UserCreate",
    "compile",
)

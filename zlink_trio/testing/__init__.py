"""The public test kit: test your Spots on real nodes, with faults and race models.

``docs/testing.md`` is the guide. ``import zlink_trio`` never imports this package, and it
imports without hypothesis or pytest: only :mod:`.race_model` needs hypothesis and only
:mod:`.pytest_plugin` needs pytest (``SpotRaceModel`` and ``run_race_model`` are loaded
from :mod:`.race_model` when first named here).

=================  ================================================================
``cluster``        ``open_test_cluster(n, store=..., clock=...)``: n nodes in one
                   process on one store, real loopback links, a recorder and fault
                   hooks; ``TestCluster``; ``open_test_node`` (one node, no links)
``faults``         ``Faults``: fail the next store call, cut / heal a link, pause /
                   resume / kill a node, crash at a named step; ``InjectedFault``,
                   ``SimulatedCrash``, ``FaultyStore``
``doubles``        ``MemoryStoreWith``: a memory store whose Location Store is your
                   own subclass, to steer single transactions
``recorder``       ``Recorder``: factory runs, handler turns (which owner), closes,
                   the chart transitions each operation took; ``Gate``, ``LogCapture``,
                   ``chart_violation``
``store_io``       ``InFlight``: store calls in flight under a MockClock (autojump
                   suspended, a watchdog for hangs); ``settle``; ``Patcher``
``race_model``     ``TrioMachine`` and ``run_race_model``: hypothesis state machines
                   whose rules drive nodes in one Trio run on a MockClock (hypothesis)
``spot_race``      ``SpotRaceModel``: the ready-made race model over your own Spot
                   types and messages, checking the runtime's invariants and yours
                   (hypothesis)
``race_checks``    the runtime invariants ``SpotRaceModel`` checks, as functions of
                   its operations (``RaceOp``, ``ReminderWrite``) and the recorder
``pytest_plugin``  the pytest plugin (entry point ``zlink_trio``): fixtures ``zl_node``
                   and ``zl_cluster`` (pytest)
=================  ================================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zlink_trio.testing.cluster import TestCluster, open_test_cluster, open_test_node
from zlink_trio.testing.doubles import MemoryStoreWith
from zlink_trio.testing.faults import CRASH_STEPS, Faults, InjectedFault, SimulatedCrash
from zlink_trio.testing.recorder import (
    Closed,
    FactoryRun,
    Gate,
    LogCapture,
    Recorder,
    Transition,
    Turn,
    chart_violation,
)
from zlink_trio.testing.store_io import InFlight, Patcher, StoreCallHung, settle

if TYPE_CHECKING:
    from zlink_trio.testing.race_model import RaceHarness as RaceHarness
    from zlink_trio.testing.race_model import TrioMachine as TrioMachine
    from zlink_trio.testing.race_model import run_race_model as run_race_model
    from zlink_trio.testing.spot_race import SpotRaceModel as SpotRaceModel

__all__ = (
    "CRASH_STEPS",
    "Closed",
    "FactoryRun",
    "Faults",
    "Gate",
    "InFlight",
    "InjectedFault",
    "LogCapture",
    "MemoryStoreWith",
    "Patcher",
    "RaceHarness",
    "Recorder",
    "SimulatedCrash",
    "SpotRaceModel",
    "StoreCallHung",
    "TestCluster",
    "Transition",
    "TrioMachine",
    "Turn",
    "chart_violation",
    "open_test_cluster",
    "open_test_node",
    "run_race_model",
    "settle",
)

_LAZY = {"SpotRaceModel": "spot_race", "TrioMachine": "race_model", "RaceHarness": "race_model",
         "run_race_model": "race_model"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:  # needs hypothesis: imported on first use only
        import importlib

        return getattr(importlib.import_module(f"zlink_trio.testing.{module}"), name)
    raise AttributeError(f"module 'zlink_trio.testing' has no attribute {name!r}")

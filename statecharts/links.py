"""Where each chart lives in the code: the modules that drive it and the tests that cover it.

Theory of operation
-------------------
A chart is only worth reading if a reader can go from it to the code that steps it
and to the tests that hold the code to it.  :data:`CHART_LINKS` maps each chart's
class name to a :class:`ChartLinks` of repository paths: ``drivers`` are the modules
that step the chart (``runtime.charts.step`` with its typed names) or, for the store
side of ``SpotAuthority``, run its transactions; ``tests`` are the test modules that
check runs against the chart (TRACE observers, model tests, path tests).

The rendered pages (:mod:`statecharts.render`) and ``zlink-trio statecharts`` show
these links.  ``tests/statecharts/test_chart_links_trace.py`` keeps them honest: every path
exists, every chart has both kinds, and every ``zlink_trio`` module that steps a
chart's typed names is listed as one of its drivers.

Pure data: no I/O, no imports of ``zlink_trio``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ("CHART_LINKS", "ChartLinks")


@dataclass(frozen=True, slots=True)
class ChartLinks:
    """Repository paths (``/``-separated, from the repository root) about one chart."""

    #: Modules that step the chart (or run its transactions), most central first.
    drivers: tuple[str, ...]
    #: Test modules that check behaviour against the chart.
    tests: tuple[str, ...]


_RT = "zlink_trio/runtime/"

#: Chart class name -> its links, in the order of ``statecharts.ALL_CHARTS``.
CHART_LINKS: Final[dict[str, ChartLinks]] = {
    "SpotAuthority": ChartLinks(
        drivers=("zlink_trio/store/rules/authority.py", "zlink_trio/store/rules/location.py",
                 "zlink_trio/store/rules/recovery.py",
                 "zlink_trio/store/rules/operator.py", "zlink_trio/store/rules/relocation_steps.py",
                 "zlink_trio/store/redis/lua/authority.py", _RT + "coordinators/recovery.py"),
        tests=("tests/store/test_authority_chart_conformance.py",
               "tests/store/test_redis_authority_lua.py",
               "tests/store/test_memory_model.py", "tests/store/test_multiprocess.py",
               "tests/core/test_store_records.py", "tests/statecharts/test_chart_paths.py"),
    ),
    "ColdActivation": ChartLinks(
        drivers=(_RT + "coordinators/activation.py",
                 _RT + "coordinators/placement.py", _RT + "incarnation/first_record.py",
                 _RT + "coordinators/recovery.py", _RT + "coordinators/inbound.py"),
        tests=("tests/runtime/test_activation.py", "tests/runtime/test_activation_drivers.py",
               "tests/runtime/test_runtime_model.py",
               "tests/runtime/test_runtime_races.py", "tests/runtime/test_crash_recovery.py"),
    ),
    "UserCreate": ChartLinks(
        drivers=(_RT + "coordinators/create_operation.py", _RT + "coordinators/create.py",
                 _RT + "coordinators/remote_create.py"),
        tests=("tests/runtime/test_create.py", "tests/runtime/test_runtime_model.py",
               "tests/runtime/test_runtime_races.py", "tests/statecharts/test_chart_paths.py"),
    ),
    "Incarnation": ChartLinks(
        drivers=(_RT + "incarnation/incarnation.py", _RT + "incarnation/catalog.py",
                 _RT + "coordinators/relocation.py"),
        tests=("tests/runtime/test_execution.py", "tests/runtime/test_runtime_model.py",
               "tests/runtime/test_relocation_model.py", "tests/runtime/test_runtime_idle.py"),
    ),
    "CloseOperation": ChartLinks(
        drivers=(_RT + "coordinators/close_operation.py",),
        tests=("tests/runtime/test_close.py", "tests/runtime/test_runtime_model.py",
               "tests/runtime/test_runtime_races.py"),
    ),
    "PlannedRelocation": ChartLinks(
        drivers=(_RT + "coordinators/relocation.py", _RT + "coordinators/remote_relocation.py"),
        tests=("tests/runtime/test_relocation.py", "tests/runtime/test_relocation_model.py",
               "tests/mesh/test_mesh_relocation.py"),
    ),
    "NodeLifecycle": ChartLinks(
        drivers=(_RT + "node.py", _RT + "coordinators/lease.py", _RT + "state.py"),
        tests=("tests/runtime/test_node.py", "tests/runtime/test_ownership_lost.py",
               "tests/mesh/test_mesh_crash.py", "tests/mesh/test_mesh_restart.py"),
    ),
    "ActorMembership": ChartLinks(
        drivers=(_RT + "actors/membership.py", _RT + "state.py",
                 _RT + "coordinators/relocation.py"),
        tests=("tests/runtime/test_actors.py", "tests/statecharts/test_chart_paths.py"),
    ),
}

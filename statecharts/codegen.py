"""Generate :mod:`statecharts.names`: typed state, event and tag names of every chart.

One module per chart (``statecharts/names/<chart module>.py``) and an ``__init__``
that re-exports them all.

Theory of operation
-------------------
:func:`render_names` is pure: from each compiled chart it writes, in declaration
order, a ``NewType`` for the chart's states and one for its events, a namespace class
of state constants (``st``), one of event constants (``ev``), one of the chart's tags
(``tags``: frozensets of states), and a :class:`~statecharts._typed.TypedChart`
subclass holding the three with the compiled table, bound to an upper-case constant
(``ColdActivation`` -> ``COLD_ACTIVATION``).  A chart that sets ``state_enum``
(:class:`~statecharts.StrictChart`) also gets that ``StrEnum`` of its states, the
value type a store keeps (``SpotAuthority`` -> ``AuthorityState``).  The output is
deterministic, so
``python -m statecharts check`` compares it with the committed module byte for byte,
exactly like the rendered pages; ``python -m statecharts render`` rewrites it.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path
from typing import TYPE_CHECKING

from statecharts import ALL_CHARTS
from statecharts._compile import compile

if TYPE_CHECKING:
    from collections.abc import Iterable

    from statecharts._base import StrictChart

__all__ = ("NAMES_PACKAGE", "check_names", "constant_name", "render_names", "write_names")

#: Where the generated package lives (inside this package).
NAMES_PACKAGE = Path(__file__).with_name("names")


def constant_name(chart: type[StrictChart]) -> str:
    """The module-level constant of a chart: ``ColdActivation`` -> ``COLD_ACTIVATION``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", chart.__name__).upper()


def _check_identifier(chart: str, what: str, name: str) -> str:
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
        raise ValueError(f"{chart}: {what} {name!r} cannot be a Python attribute name")
    return name


def _chart_block(chart: type[StrictChart]) -> list[str]:
    table = compile(chart)
    name = chart.__name__
    state_t, event_t = f"{name}State", f"{name}Event"
    source = f"statecharts/{chart.__module__.rsplit('.', 1)[-1]}.py"
    lines = [
        f"# --- {name} ({source}) " + "-" * max(0, 72 - len(name) - len(source)),
        "",
        f'{state_t} = NewType("{state_t}", str)',
        f'{event_t} = NewType("{event_t}", str)',
        "",
        "",
        "@final",
        f"class {name}States:",
        f'    """The states of :class:`~statecharts.{name}`, in declaration order."""',
        "",
        "    __slots__ = ()",
        "",
    ]
    lines += [f'    {_check_identifier(name, "state", s)}: Final = {state_t}("{s}")'
              for s in table.state_order]
    lines += [
        "",
        "",
        "@final",
        f"class {name}Events:",
        f'    """The events of :class:`~statecharts.{name}`, in declaration order."""',
        "",
        "    __slots__ = ()",
        "",
    ]
    lines += [f'    {_check_identifier(name, "event", e)}: Final = {event_t}("{e}")'
              for e in table.event_order]
    lines += [
        "",
        "",
        "@final",
        f"class {name}Tags:",
        f'    """The tags of :class:`~statecharts.{name}`: the states answering each question."""',
        "",
        "    __slots__ = ()",
    ]
    if table.tags:
        lines.append("")
    for tag in sorted(table.tags):
        members = [s for s in table.state_order if s in table.tags[tag]]
        lines.append(f"    {_check_identifier(name, 'tag', tag)}: Final[frozenset[{state_t}]] = "
                     "frozenset((")
        lines += [f"        {name}States.{s}," for s in members]
        lines.append("    ))")
    lines += _state_enum(chart, table.state_order)
    lines += [
        "",
        "",
        "@final",
        f"class {name}Chart(TypedChart[{state_t}, {event_t}]):",
        f'    """:class:`~statecharts.{name}`, compiled, with its typed names."""',
        "",
        "    __slots__ = ()",
        "",
        f"    st: Final = {name}States()",
        f"    ev: Final = {name}Events()",
        f"    tags: Final = {name}Tags()",
        "",
        "",
        f"{constant_name(chart)}: Final = {name}Chart(compile({name}))",
        "",
        "",
    ]
    return lines


def _state_enum(chart: type[StrictChart], states: tuple[str, ...]) -> list[str]:
    """The ``StrEnum`` the chart's ``state_enum`` names (no lines when it names none)."""
    enum = chart.state_enum
    if enum is None:
        return []
    name = chart.__name__
    lines = [
        "",
        "",
        f"class {_check_identifier(name, 'state_enum', enum)}(StrEnum):",
        f'    """The states of :class:`~statecharts.{name}` as stored values."""',
        "",
    ]
    lines += [f'    {_check_identifier(name, "state", s).upper()} = "{s}"' for s in states]
    return lines


def _module_header(summary: str) -> list[str]:
    return [
        f'"""{summary}',
        "",
        "Generated from the compiled charts: do not edit.",
        "Regenerate with ``python -m statecharts render docs/statecharts``; CI's",
        "``python -m statecharts check docs/statecharts`` fails when this module differs from",
        "a fresh render.  See :mod:`statecharts._typed` for what the names are for.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
    ]


def _sorted_exports(exported: Iterable[str]) -> list[str]:
    return sorted(exported, key=lambda name: (not name.isupper(), name))  # as ruff sorts


def _exports(chart: type[StrictChart]) -> list[str]:
    enum = [] if chart.state_enum is None else [chart.state_enum]
    return _sorted_exports(
        [constant_name(chart), *enum] + [f"{chart.__name__}{suffix}" for suffix in
                                         ("Chart", "Event", "Events", "State", "States", "Tags")])


def _chart_module(chart: type[StrictChart]) -> str:
    module = chart.__module__.rsplit(".", 1)[-1]
    lines = _module_header(f"Typed names of :class:`~statecharts.{chart.__name__}`.")
    if chart.state_enum is not None:
        lines += ["from enum import StrEnum"]
    lines += [
        "from typing import Final, NewType, final",
        "",
        "from statecharts._compile import compile",
        "from statecharts._typed import TypedChart",
        f"from statecharts.{module} import {chart.__name__}",
        "",
        "__all__ = (",
        *[f'    "{name}",' for name in _exports(chart)],
        ")",
        "",
        "",
    ]
    block = _chart_block(chart)
    return "\n".join(lines + block[2:]).rstrip("\n") + "\n"  # no section ruler


def _package_init(charts: tuple[type[StrictChart], ...]) -> str:
    lines = _module_header(
        "Typed names of every lifecycle chart: ``CHART.st``, ``.ev``, ``.tags``.")
    exported: list[str] = []
    for chart in sorted(charts, key=lambda c: c.__module__):
        module = chart.__module__.rsplit(".", 1)[-1]
        for name in _exports(chart):
            lines.append(f"from statecharts.names.{module} import {name} as {name}")
            exported.append(name)
    lines += ["", "__all__ = (", *[f'    "{name}",' for name in _sorted_exports(exported)], ")"]
    return "\n".join(lines) + "\n"


def render_names(charts: Iterable[type[StrictChart]] = ALL_CHARTS) -> dict[str, str]:
    """File name -> text of the :mod:`statecharts.names` package (pure, deterministic)."""
    charts = tuple(charts)
    files = {f"{chart.__module__.rsplit('.', 1)[-1]}.py": _chart_module(chart)
             for chart in charts}
    files["__init__.py"] = _package_init(charts)
    return files


def write_names(directory: Path = NAMES_PACKAGE) -> Path:
    """Write the generated package into ``directory`` (stale generated files removed)."""
    files = render_names()
    directory.mkdir(exist_ok=True)
    for stale in sorted(directory.glob("*.py")):
        if stale.name not in files:
            stale.unlink()
    for name, text in files.items():
        (directory / name).write_bytes(text.encode("utf-8"))
    return directory


def check_names(directory: Path = NAMES_PACKAGE) -> list[str]:
    """``[]`` when ``directory`` holds a fresh render; else one line per differing file."""
    files = render_names()
    problems = []
    for name, text in sorted(files.items()):
        path = directory / name
        if not path.is_file():
            problems.append(f"missing: names/{name}")
        elif path.read_bytes() != text.encode("utf-8"):
            problems.append(f"changed: names/{name}")
    problems += [f"extra: names/{path.name}" for path in sorted(directory.glob("*.py"))
                 if path.name not in files]
    return problems

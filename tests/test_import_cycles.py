"""No import cycles in ``zlink_trio`` and ``statecharts`` -- type-only imports included.

A cycle makes the order of module initialisation matter and hides which module a
concept belongs to (a 12-file circle once held the whole runtime together). The rule
here is stricter than Python's: *every* import is an arrow -- at module level, inside
a function, and under ``if TYPE_CHECKING:`` -- because a type-level dependency is still
a dependency a reader has to follow.

Inside ``zlink_trio/runtime/`` the rule holds for folders too: each wing (a folder)
and each module at its top level is one part, and every import between two parts
points down this order, bottom first (``RUNTIME_ORDER``)::

    declaration     what a node serves: Spot types, handlers, policies, the registry
    charts          the compiled lifecycle charts and ``step()``
    options         ``open_node``'s option groups
    results         what the public API hands back
    observers       what a node tells the test kit
    crash_points    ``ZLINK_CRASH_AT``: where a test may kill the process
    observe         log fields and loggers, the metrics recorder, the /metrics server
    collector       the garbage collector against the lease: freezes, full collections
    calls           the client, a call's delivery, completions and their deadlines
    state           ``NodeState``: what every part below the node runtime reads
    incarnation     one Spot on this node, its first record, timers, context; the catalog
    mesh            links to other nodes: peers, command 39 and round trips, command 20
                    replies, Message Follow
    coordinators    ``NodeRuntime`` and the operations that change authority, each with
                    its remote side (commands 47, 48, 60, 61), the inbound frames'
                    dispatch, ``SpotManager``
    actors          Actors, members of Entry and User Spots: the membership driver and
                    ``node.actors``
    sampling        a node's gauges, read at scrape time
    inspection      ``node.inspection``
    stopping        how a node stops: stop request, signals, moving Spots away first
    node_handle     ``Node``
    node            ``open_node``

So no two wings import each other, even through a third: a wing can be read, and
tested, with only the parts below it in mind.

The graph is read with :mod:`ast` (nothing is imported). ``from pkg import name`` is
an arrow to ``pkg.name`` when that is a module of ours, else to ``pkg`` (its
``__init__``); an arrow to a module we do not have goes to its closest package that
we do. A cycle is a strongly connected set of more than one module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("statecharts", "zlink_trio")

#: ``zlink_trio/runtime/``'s folders and top-level modules, bottom first (see above).
RUNTIME = "zlink_trio.runtime"
RUNTIME_ORDER = (
    "declaration", "charts", "options", "results", "observers", "crash_points", "observe",
    "collector", "calls", "state", "incarnation", "mesh", "coordinators", "actors", "sampling",
    "inspection",
    "stopping", "node_handle", "node",
)


def _modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _targets(node: ast.AST, module: str, is_package: bool, known: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, base] if base else parts)
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
            for alias in node.names]


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES
                 ) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (every import statement counts)."""
    known = _modules(root, packages)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            for target in _targets(node, module, path.name == "__init__.py", known):
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def part_graph(graph: dict[str, set[str]], package: str = RUNTIME) -> dict[str, set[str]]:
    """``package``'s parts -> the parts they import; a part is a folder or a module at
    the top of ``package`` (its ``__init__`` is no part)."""
    def part(module: str) -> str | None:
        inside = module.removeprefix(package + ".")
        return None if inside == module else inside.partition(".")[0]

    parts: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = part(module)
        if source is None:
            continue
        parts.setdefault(source, set())
        for target in targets:
            imported = part(target)
            if imported is not None and imported != source:
                parts[source].add(imported)
    return parts


def upward_imports(graph: dict[str, set[str]], order: tuple[str, ...],
                   package: str = RUNTIME) -> list[str]:
    """Each import of ``package`` between two parts that does not point down ``order``."""
    rank = {part: index for index, part in enumerate(order)}
    found = []
    for module, targets in sorted(graph.items()):
        source = module.removeprefix(package + ".").partition(".")[0]
        if not module.startswith(package + ".") or source not in rank:
            continue
        for target in sorted(targets):
            imported = target.removeprefix(package + ".").partition(".")[0]
            if (target.startswith(package + ".") and imported in rank
                    and rank[imported] >= rank[source] and imported != source):
                found.append(f"{module} -> {target}")
    return found


def test_the_checker_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
        "b.py": "def f():\n    import pkg.c\n",
        "c.py": "from . import d\n",
        "d.py": "from pkg.sub import e\n",
        "sub/__init__.py": "",
        "sub/e.py": "from .. import a\nfrom pkg import nothing_here\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.a"] == {"pkg.b"}  # under TYPE_CHECKING
    assert graph["pkg.b"] == {"pkg.c"}  # inside a function
    assert graph["pkg.c"] == {"pkg.d"}  # relative, names a module
    assert graph["pkg.d"] == {"pkg.sub.e"}
    assert graph["pkg.sub.e"] == {"pkg.a", "pkg"}  # a name, not a module: the package
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.d", "pkg.sub.e"]]


def test_the_part_graph_joins_a_folder(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    for folder in ("low", "high"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    files = {
        "__init__.py": "",
        "top.py": "from pkg.high import b\n",
        "low/a.py": ("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from pkg.high.c import C\n"),
        "high/b.py": "from pkg.low import a\n",
        "high/c.py": "",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    graph = import_graph(tmp_path, ("pkg",))
    assert not cycles(graph)  # no cycle of files ...
    parts = part_graph(graph, "pkg")
    assert parts == {"top": {"high"}, "low": {"high"}, "high": {"low"}}
    assert cycles(parts) == [["high", "low"]]  # ... but one of folders
    assert upward_imports(graph, ("low", "high", "top"), "pkg") == ["pkg.low.a -> pkg.high.c"]
    assert upward_imports(graph, ("high", "low", "top"), "pkg") == ["pkg.high.b -> pkg.low.a"]


def test_the_project_is_read() -> None:
    graph = import_graph()
    assert {"statecharts", "zlink_trio", "zlink_trio.runtime.node"} <= set(graph)
    assert "zlink_trio.runtime.node" in graph["zlink_trio"]


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles (every import counts, type-only too):\n" + "\n".join(
        " <-> ".join(component) for component in found)


def test_the_runtime_order_names_every_part() -> None:
    parts = part_graph(import_graph())
    assert sorted(parts) == sorted(RUNTIME_ORDER), (
        "RUNTIME_ORDER must name each folder and top-level module of zlink_trio/runtime/ once")


def test_no_folder_level_cycle_in_the_runtime() -> None:
    graph = import_graph()
    found = cycles(part_graph(graph))
    assert not found, "folder-level import cycles in zlink_trio/runtime/:\n" + "\n".join(
        " <-> ".join(component) for component in found)
    upward = upward_imports(graph, RUNTIME_ORDER)
    assert not upward, ("imports against RUNTIME_ORDER (move the module to the part its idea "
                        "belongs to, or pass it a narrower value):\n" + "\n".join(upward))

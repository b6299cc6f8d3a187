"""The mutation gate's catalog stays true to the code (``tests/mutations/``).

The gate itself (``tests/mutations/run.py``) runs in CI after the suite; these checks
run with every test run, so a change that moves or rewords a guarded rule, or renames
a guarding test, fails here at once, naming the entry to update.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "mutations"))

from catalog import MUTATIONS  # noqa: E402


def test_names_are_unique() -> None:
    names = [m.name for m in MUTATIONS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_each_mutation_changes_one_place(mutation) -> None:
    source = (ROOT / mutation.path).read_text()
    assert source.count(mutation.find) == 1, (
        f"{mutation.name}: the text to mutate must occur once in {mutation.path}")
    assert mutation.replace != mutation.find


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_each_guard_exists(mutation) -> None:
    assert mutation.guards, f"{mutation.name} names no guarding test"
    for guard in mutation.guards:
        path, _, test = guard.partition("::")
        source = (ROOT / path).read_text()
        name = test.split("::")[-1].split("[")[0]
        assert not name or f"def {name}(" in source or f"class {name}" in source, (
            f"{mutation.name}: {guard} does not exist")


def _rule_table() -> dict[str, str]:
    """docs/architecture.md's "Where each rule lives": family -> its mutations cell."""
    lines = (ROOT / "docs" / "architecture.md").read_text().splitlines()
    start = lines.index("| Rule family | Implemented in | Checked by | Mutations killed |")
    rows: dict[str, str] = {}
    for line in lines[start + 2:]:
        if not line.startswith("| "):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        rows[cells[0]] = cells[-1]
    return rows


def test_every_family_is_a_row_of_the_rule_table() -> None:
    rows = _rule_table()
    assert {m.family for m in MUTATIONS} <= set(rows)


def test_the_rule_table_gives_each_familys_count() -> None:
    # The gate (tests/mutations/run.py) fails CI unless every mutation is killed, so
    # the table can state "killed of total" as "n / n".
    for family, cell in _rule_table().items():
        total = sum(m.family == family for m in MUTATIONS)
        assert cell == (f"{total} / {total}" if total else "none"), family

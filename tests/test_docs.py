"""The hand-kept docs agree with the code they describe."""

from __future__ import annotations

import re
from pathlib import Path

from zlink_trio.core import errors

ROOT = Path(__file__).resolve().parent.parent


def test_errors_page_lists_every_error_class_with_its_wire_code():
    page = (ROOT / "docs/errors.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| `\w+` \| (\d+) \|", page, re.MULTILINE))
    classes = {name: getattr(errors, name) for name in errors.__all__
               if isinstance(getattr(errors, name), type)}
    assert set(rows) == set(classes)
    for name, cls in classes.items():
        assert int(rows[name]) == cls.code, name


def test_readme_links_point_at_files_that_exist():
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(((?:docs|statecharts)/[^)#]*)\)", readme):
        assert (ROOT / target).exists(), target



def test_readme_python_example_runs(capsys):
    readme = (ROOT / "README.md").read_text()
    (example,) = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    exec(compile(example, "README.md", "exec"), {"__name__": "readme_example"})
    assert capsys.readouterr().out.splitlines() == ["Total(value=2)", "Total(value=5)"]


def _resolve_map_path(path: str, last_dir: str) -> Path:
    """A path from the architecture map: whole (``tests/x.py``, ``core/x.py``) or, after
    a whole one in the same cell, relative to where that one is (``create_operation.py``,
    ``calls/delivery.py`` after ``runtime/calls/client.py``)."""
    bases = [ROOT, ROOT / "zlink_trio"]
    if last_dir:
        bases += [ROOT / last_dir, *(ROOT / last_dir).parents]
    for base in bases:
        if (base / path).exists():
            return base / path
    return ROOT / path


def test_architecture_map_names_modules_and_tests_that_exist():
    page = (ROOT / "docs/architecture.md").read_text()
    section = page.split("## Where each rule lives", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) > 10
    missing = []
    for row in rows[1:]:  # the header row names no files
        for cell in row.split("|")[2:4]:
            last_dir = ""
            for path in re.findall(r"`([\w/]+(?:\.py|/))`", cell):
                resolved = _resolve_map_path(path, last_dir)
                if not resolved.exists():
                    missing.append(f"{path} ({row.split('|')[1].strip()})")
                else:
                    last_dir = str((resolved if resolved.is_dir() else resolved.parent)
                                   .relative_to(ROOT))
    assert not missing, missing

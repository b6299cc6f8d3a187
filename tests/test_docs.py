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

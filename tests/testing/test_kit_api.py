"""The kit's public surface: what imports what, and what docs/testing.md promises.

``import zlink_trio`` never imports the kit; the kit imports without hypothesis and
pytest (only ``SpotRaceModel`` and the plugin need them); the names docs/testing.md
lists are exactly the kit's exports. The import checks run in a fresh interpreter.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import zlink_trio.testing as kit

ROOT = Path(__file__).resolve().parent.parent.parent

BLOCK_TEST_TOOLS = textwrap.dedent('''
    import sys

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in ("hypothesis", "pytest", "_pytest"):
                raise ImportError(f"{name} is blocked in this check")
            return None

    sys.meta_path.insert(0, Block())
''')


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False, cwd=ROOT)


def test_importing_zlink_trio_does_not_import_the_kit() -> None:
    done = _run("import sys, zlink_trio\nprint(sorted(m for m in sys.modules "
                "if m.startswith('zlink_trio.testing')))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_kit_imports_and_runs_a_cluster_without_hypothesis_or_pytest() -> None:
    done = _run(BLOCK_TEST_TOOLS + textwrap.dedent('''
        import trio
        from zlink_trio.testing import open_test_cluster

        async def main():
            with trio.fail_after(20):
                async with open_test_cluster(1, links=False) as cluster:
                    print(len(cluster))

        trio.run(main)
        try:
            from zlink_trio.testing import SpotRaceModel
        except ImportError as exc:
            print("race model needs:", exc)
    '''))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "1", "race model needs: hypothesis is blocked in this check"]


def test_the_lazy_names_load_their_modules() -> None:
    from zlink_trio.testing.race_model import TrioMachine, run_race_model
    from zlink_trio.testing.spot_race import SpotRaceModel

    assert kit.SpotRaceModel is SpotRaceModel
    assert kit.TrioMachine is TrioMachine
    assert kit.run_race_model is run_race_model
    assert issubclass(SpotRaceModel, TrioMachine)


def test_every_export_is_documented_in_the_guide_and_nothing_else_is_named() -> None:
    page = (ROOT / "docs/testing.md").read_text()
    names = page.split("## Names", 1)[1]
    exported = set(re.findall(r"`(\w+)`", names.split("; the pytest")[0])) - {
        "zlink_trio"}
    assert exported == set(kit.__all__)
    for name in kit.__all__:
        assert getattr(kit, name).__doc__, f"{name} has no docstring"


def test_the_guide_links_point_at_files_that_exist() -> None:
    page = (ROOT / "docs/testing.md").read_text()
    for target in re.findall(r"\]\((\.\./[^)#]+|[\w/]+\.md)\)", page):
        assert (ROOT / "docs" / target).resolve().exists(), target

"""The README's Quickstart commands are exactly what CI runs, and its programs run.

CI (``.ci/run``) must install and test the way a newcomer following the
README would; this test fails when the two drift apart. The "Several nodes"
program is run as the README says: saved to a file and started twice, as two
node processes in one directory (the Quickstart's own example runs in
``tests/test_docs.py``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Seconds the two-node program may take in all (each process serves 10 s after its call).
SEVERAL_NODES_TIMEOUT = 60


def _bash_blocks(markdown: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", markdown, re.DOTALL)]


def _ci_section(name: str) -> str:
    text = (ROOT / ".ci" / "run").read_text()
    match = re.search(rf"# README-{name}-BEGIN\n(.*?)# README-{name}-END", text, re.DOTALL)
    assert match, f".ci/run lost its README-{name} markers"
    return match.group(1).strip()


def test_ci_installs_and_runs_the_demo_with_the_readme_command():
    blocks = _bash_blocks((ROOT / "README.md").read_text())
    assert blocks[0] == _ci_section("INSTALL")


def test_ci_runs_the_tests_with_the_readme_command():
    blocks = _bash_blocks((ROOT / "README.md").read_text())
    assert blocks[1] == _ci_section("TEST")


def test_quickstart_is_one_install_and_demo_command_and_one_test_command():
    blocks = _bash_blocks((ROOT / "README.md").read_text())
    assert len(blocks) == 2
    assert all("\n" not in block for block in blocks)
    assert blocks[0].endswith(".venv/bin/python -m zlink_trio.samples.demo")


def _several_nodes_program() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Several nodes\n", 1)[1].split("\n## ", 1)[0]
    (program,) = re.findall(r"```py\n(.*?)```", section, re.DOTALL)
    return program


def test_several_nodes_program_runs_as_printed_in_two_processes(tmp_path):
    """The second process reaches the Spot the first one created, over a link."""
    script = tmp_path / "several.py"
    script.write_text(_several_nodes_program())
    work = tmp_path / "work"
    work.mkdir()
    env = {name: value for name, value in os.environ.items() if name != "ZLINK_SECRET"}
    deadline = time.monotonic() + SEVERAL_NODES_TIMEOUT

    def start(node_id: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, str(script), node_id], cwd=work, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    processes = [start("node-a")]
    reader = ThreadPoolExecutor(max_workers=1)
    try:
        # node-a serves "c-7" for 10 s after its line: node-b starts then, so its call
        # comes while node-a still hosts the Spot.
        stdout = processes[0].stdout
        assert stdout is not None
        first_line = reader.submit(stdout.readline).result(
            timeout=deadline - time.monotonic())
        assert first_line == "node-a: Total(value=1), c-7 lives here\n"
        processes.append(start("node-b"))
        outputs = [process.communicate(timeout=max(deadline - time.monotonic(), 0))
                   for process in reversed(processes)]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.communicate()
        reader.shutdown()
    (b_out, b_err), (a_out, a_err) = outputs
    assert [process.returncode for process in processes] == [0, 0], (a_err, b_err)
    assert a_out == "", a_out
    assert b_out == "node-b: Total(value=2), c-7 lives elsewhere\n", (b_out, b_err)

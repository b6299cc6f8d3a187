"""The chat-rooms sample runs as a newcomer runs it and passes its own self-check.

``python -m zlink_trio.samples.chatrooms`` (three nodes on a SQLite file, HTTP edges,
a drain while users post) must print ``chatrooms=completed`` and exit 0; its runner
prints that line only when every user's inbox holds exactly its room's posts, in order.
The run itself is also checked on a ``memory://`` store, in this process.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import trio

from zlink_trio.samples.chatrooms.runner import run

LIMIT = 180


def test_the_sample_prints_completed_only_after_its_self_check(tmp_path):
    done = subprocess.run([sys.executable, "-m", "zlink_trio.samples.chatrooms"],
                          capture_output=True, text=True, timeout=LIMIT, check=False,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "chatrooms=completed"
    assert any(line.startswith("drain of ") and " 0 not moved" in line for line in lines)
    assert "inboxes complete and in order: 12 of 12" in done.stdout


async def test_the_story_holds_on_a_memory_store(tmp_path):
    said: list[str] = []
    with trio.fail_after(LIMIT):
        assert await run(tmp_path, said.append, store=f"memory://chat-{uuid.uuid4().hex}")
    assert said[-1].startswith("posts: 36 acknowledged")

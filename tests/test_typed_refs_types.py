"""The typed reference's promise to a type checker: ``ref.call.add(Add(2))`` is typed
by the handler's annotations (``Total``), and a message of another class is an error.

Runs mypy (``--strict``) on a small program and reads its ``reveal_type`` notes and
errors, so the promise is checked, not only stated.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from mypy import api

if TYPE_CHECKING:
    from pathlib import Path

PROGRAM = textwrap.dedent('''
    import attrs

    import zlink_trio as zl


    @attrs.frozen
    class Add:
        n: int


    @attrs.frozen
    class Total:
        value: int


    @zl.instance_spot("typed-counter", relocation=zl.RecreateOnRelocation())
    class Counter:
        def __init__(self, ctx: zl.SpotContext) -> None:
            self.total = 0

        @zl.handler
        async def add(self, msg: Add) -> Total:
            self.total += msg.n
            return Total(self.total)


    async def use(node: zl.Node) -> None:
        ref = node.client.ref(Counter, "c-1").instance_spot().timeout(5)
        reveal_type(ref)
        total = await ref.call.add(Add(2))
        reveal_type(total)
        await ref.call.add("two")  # the wrong message: an error
        await ref.send(Add(1))
''')


def test_mypy_infers_the_reply_and_refuses_a_wrong_message(tmp_path: Path) -> None:
    program = tmp_path / "typed_program.py"
    program.write_text(PROGRAM, encoding="utf-8")
    out, err, status = api.run(["--strict", "--no-incremental", "--show-error-codes",
                                "--cache-dir", str(tmp_path / ".mypy_cache"), str(program)])
    lines = out.splitlines()
    revealed = [line.split("Revealed type is ", 1)[1] for line in lines
                if "Revealed type is" in line]
    assert revealed == ['"zlink_trio.runtime.calls.refs.TypedRef[typed_program.Counter]"',
                        '"typed_program.Total"'], out + err
    errors = [line for line in lines if ": error:" in line]
    assert len(errors) == 1, out
    assert 'Argument 1 to "add" of "Counter" has incompatible type "str"; expected "Add"' \
        in errors[0], errors
    assert status == 1

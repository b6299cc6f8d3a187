"""The OrderEventStore and OrderReadModelStore agree with a pure model, on both backends.

Hypothesis draws a program of appends (to two streams, with an expected version
that is right, one behind or one ahead, and a SourceCommandId out of three or
none), projection puts of random versions, and deletes. Each program runs on a
fresh SQLite file and a fresh Redis prefix (``store_backends``); every
outcome -- written, deduplicated (with the earlier events' versions), conflict
(with the current version), refused -- and the final streams and documents
must be the model's. A failure prints the shortest program that breaks it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import attrs
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from store_backends import BACKENDS, TIMEOUT, backend_url

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_store import (
    ExpectedVersionConflict,
    NewEvent,
    open_order_event_store,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (
    open_order_read_model_store,
)

ORDERS = ("o-1", "o-2")
SOURCES = (None, "c-1", "c-2", "c-3")

appends = st.tuples(st.just("append"), st.sampled_from(ORDERS), st.integers(-1, 1),
                    st.integers(1, 3), st.sampled_from(SOURCES))
puts = st.tuples(st.just("put"), st.sampled_from(ORDERS), st.integers(0, 6))
deletes = st.tuples(st.just("delete"), st.sampled_from(ORDERS))
programs = st.lists(st.one_of(appends, puts, deletes), max_size=25)


@attrs.define
class Model:
    """What the stores must hold: streams of (type, source), first:last per source, documents."""

    streams: dict[str, list[tuple[str, str | None]]] = attrs.Factory(dict)
    sources: dict[tuple[str, str], tuple[int, int]] = attrs.Factory(dict)
    documents: dict[str, tuple[int, str]] = attrs.Factory(dict)

    def append(self, order: str, expected: int, count: int, source: str | None,
               tag: str) -> tuple[object, ...]:
        stream = self.streams.setdefault(order, [])
        if expected < 0:
            return ("refused",)
        if source is not None and (order, source) in self.sources:
            first, last = self.sources[order, source]
            return ("dup", tuple(range(first, last + 1)), len(stream))
        if expected != len(stream):
            return ("conflict", len(stream))
        stream.extend((f"{tag}.{i}", source) for i in range(count))
        if source is not None:
            self.sources[order, source] = (expected + 1, len(stream))
        return ("ok", len(stream))

    def put(self, order: str, version: int, document: str) -> tuple[object, ...]:
        stored = self.documents.get(order)
        if stored is not None and stored[0] > version:
            return ("kept", stored)
        self.documents[order] = (version, document)
        return ("written", (version, document))


async def _run(url: str, program: list[tuple[object, ...]]) -> None:
    model = Model()
    async with open_order_event_store(url) as events, open_order_read_model_store(url) as rm:
        for step, op in enumerate(program):
            if op[0] == "append":
                _, order, offset, count, source = op
                assert isinstance(order, str)
                assert isinstance(offset, int)
                assert isinstance(count, int)
                assert source is None or isinstance(source, str)
                expected = len(model.streams.get(order, [])) + offset
                tag = f"E{step}"
                want = model.append(order, expected, count, source, tag)
                try:
                    result = await events.append(
                        order, expected,
                        [NewEvent(event_type=f"{tag}.{i}", payload="{}") for i in range(count)],
                        source_command_id=source)
                except ExpectedVersionConflict as error:
                    got: tuple[object, ...] = ("conflict", error.current)
                except zl.InvalidOperation:
                    got = ("refused",)
                else:
                    got = (("dup", tuple(e.version for e in result.events), result.version)
                           if result.deduplicated else ("ok", result.version))
                assert got == want, (step, op)
            elif op[0] == "put":
                _, order, version = op
                assert isinstance(order, str)
                assert isinstance(version, int)
                document = f'{{"step":{step}}}'
                want = model.put(order, version, document)
                put = await rm.put(order, version, document)
                got = ("written" if put.written else "kept",
                       (put.current.version, put.current.document))
                assert got == want, (step, op)
            else:
                order = str(op[1])
                assert await rm.delete(order) == (model.documents.pop(order, None) is not None)
        for order in ORDERS:
            stored = await events.read(order)
            assert [(e.event_type, e.source_command_id) for e in stored] == \
                model.streams.get(order, [])
            assert [e.version for e in stored] == list(range(1, len(stored) + 1))
            document = await rm.get(order)
            assert (None if document is None else (document.version, document.document)) == \
                model.documents.get(order)


@settings(max_examples=40, deadline=None)
@given(program=programs)
def test_stores_agree_with_the_model(program):
    async def main() -> None:
        with trio.fail_after(TIMEOUT), tempfile.TemporaryDirectory() as directory:
            for kind in BACKENDS:
                async with backend_url(kind, Path(directory)) as url:
                    await _run(url, program)

    trio.run(main)

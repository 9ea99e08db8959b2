"""One OS process of the tracing test: `turn` pauses a run, `resume` answers it; each records
its spans with OpenTelemetry's in-memory exporter and writes them out as JSON.

    python -m tests.support.trace_worker turn|resume DB OBJECTS CARD_FILE SPANS_FILE
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.models import Answer
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.agents import Counter, scripted_factory

URL_TEXT = "please fetch https://data.example.org/table.csv"


def span_doc(s: object) -> dict[str, object]:
    ctx = s.context  # type: ignore[attr-defined]
    parent = s.parent  # type: ignore[attr-defined]
    return {
        "name": s.name,  # type: ignore[attr-defined]
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent": f"{parent.span_id:016x}" if parent else None,
        "links": [
            {"trace_id": f"{link.context.trace_id:032x}", "span_id": f"{link.context.span_id:016x}"}
            for link in s.links  # type: ignore[attr-defined]
        ],
    }


async def main(mode: str, db: str, objects: str, card_file: str, spans_file: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    approvals_root = bootstrap(StoreIO(SqliteRows(db), FileObjects(objects)), agent_factory=scripted_factory(Counter()))
    approvals = approvals_root.approvals
    try:
        if mode == "turn":
            turn = await approvals.run_turn(chat="chat-t", user="alice", text=URL_TEXT, platform="http")
            assert turn.offer is not None, turn
            Path(card_file).write_text(json.dumps({"card_id": turn.offer.card.card_id, "secret": turn.offer.secret}))
        else:
            card = json.loads(Path(card_file).read_text())
            res = await approvals.resume(
                card_id=card["card_id"],
                user="alice",
                secret=card["secret"],
                answer=Answer(approved=True),
                platform="http",
            )
            assert res.outcome == "resumed", res
    finally:
        approvals_root.close()
    provider.force_flush()
    Path(spans_file).write_text(json.dumps([span_doc(s) for s in exporter.get_finished_spans()]))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))

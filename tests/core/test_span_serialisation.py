"""Strands' span text is built only when a span records it (core/agent/strands_compat.py, entry 5;
issue 34): installed in every module that imports it, nothing built without a tracer provider,
the same text as Strands' own with one, and a recorded run's spans still carry the messages."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import chat_approvals.core.agent.strands_compat as compat
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows

ROOT = Path(__file__).resolve().parents[2]
CONTENT = [{"text": "fetch https://data.example.org/täble.csv"}, {"toolUse": {"input": {"n": 1}}}]


def test_bootstrap_installs_it_in_every_strands_module_that_serialises(tmp_path: Path) -> None:
    root = bootstrap(StoreIO(SqliteRows(str(tmp_path / "rows.db")), FileObjects(str(tmp_path / "o"))))
    root.close()
    for name in compat._SERIALIZE_MODULES:  # a module that stopped importing it fails here, loudly
        assert importlib.import_module(name).serialize is compat.serialize_if_recorded, name
    # and no Strands module loaded by a run still holds the original (a new importer is caught here)
    left = [
        n
        for n, m in list(sys.modules.items())
        if n.startswith("strands") and getattr(m, "serialize", None) is compat._STRANDS_SERIALIZE
    ]
    assert left == []
    compat.skip_unrecorded_serialisation()  # twice is once
    assert importlib.import_module("strands.telemetry.tracer").serialize is compat.serialize_if_recorded


def test_nothing_is_built_while_no_tracer_provider_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: trace.ProxyTracerProvider())
    assert compat.serialize_if_recorded(CONTENT) == ""


def test_with_a_tracer_provider_the_text_is_strands_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: TracerProvider())
    text = compat.serialize_if_recorded(CONTENT)
    assert text == compat._STRANDS_SERIALIZE(CONTENT)
    assert json.loads(text) == CONTENT


RECORDED_RUN = textwrap.dedent(
    """
    import asyncio, json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from chat_approvals.core.bootstrap import bootstrap
    from chat_approvals.store.aio import StoreIO
    from chat_approvals.store.file_objects import FileObjects
    from chat_approvals.store.sqlite_rows import SqliteRows

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    root = bootstrap(StoreIO(SqliteRows(sys.argv[1] + "/rows.db"), FileObjects(sys.argv[1] + "/o")))
    turn = asyncio.run(
        root.approvals.run_turn(chat="c", user="u", text="please fetch https://data.example.org/t.csv", platform="http")
    )
    root.close()
    assert turn.offer is not None, turn
    events = [[e.name, dict(e.attributes)] for s in exporter.get_finished_spans() for e in s.events]
    print(json.dumps(events))
    """
)


def test_a_recorded_turn_still_carries_the_messages_in_its_spans(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", RECORDED_RUN, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    events = json.loads(out.stdout.strip().splitlines()[-1])
    user = [json.loads(a["content"]) for name, a in events if name == "gen_ai.user.message"]
    assert user and all(u == [{"text": "please fetch https://data.example.org/t.csv"}] for u in user)
    tool = [json.loads(a["content"]) for name, a in events if name == "gen_ai.tool.message"]
    assert tool and tool[0]["urls"] == ["https://data.example.org/t.csv"]  # the tool call's input

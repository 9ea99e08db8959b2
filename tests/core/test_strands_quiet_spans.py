"""Strands' span attributes are built only when a span records them (core/agent/strands_compat.py,
entry 10; issue 34): installed by bootstrap, the same spans as Strands' own while no tracer provider
is installed (a parent that records, a remote context, none), a span that records still ended by
Strands' own code, Strands' code pinned so an upgrade that changes it fails here first, and a
recorded run's agent, model and tool spans still carry their attributes. No rule of docs/rules.md
is about spans: these check that the patch changes nothing else, on a pause and its resume (R1, R9)."""

from __future__ import annotations

import hashlib
import inspect
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import strands.telemetry.tracer as strands_tracer
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from strands import Agent

import chat_approvals.core.agent.strands_compat as compat
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows

ROOT = Path(__file__).resolve().parents[2]

# Strands 1.62: when one changes, re-read it against entry 10 (does an end method still touch only
# its span? does a start method still get its span from `_start_span`'s parent rule?), then update it.
PINNED = {
    "Tracer.start_agent_span": "051b5bf69d73ff4fe1bac336656b74f04f3a2688039cfa368c80a133711a01db",
    "Tracer.start_model_invoke_span": "8feebd8c6d7c93748b6b0d246bbdc157957c74711e6b43c4c88293bf09176c9a",
    "Tracer.start_tool_call_span": "31d81b5041b328f8fb0cde646a1ed16374cec9047841effe485fa720e091ba40",
    "Tracer.start_event_loop_cycle_span": "3315fa2cea7d84df04b59feba493a32bf6819d9a8d32a939df576cd94d8f513d",
    "Tracer.end_agent_span": "d1e24f9c90a6665f06aac92ee25d54ac025c8a6d72fe11b6f7396188daa074c7",
    "Tracer.end_model_invoke_span": "d7206c9be6eff318e5e52fcd596e2cf87373af94ec7b5563c88dbbd590554f46",
    "Tracer.end_tool_call_span": "93d1f51f16740caaf853621b1d69fcda5ab7d86359c89434a2b556ac4a1323b7",
    "Tracer.end_event_loop_cycle_span": "224bd3132034091387f54d9ad57a9eae8061ffd2d9a7e3e3ca50e3457303744e",
    "Tracer._start_span": "56242449d4b4bad2a768d59d253bc021be794453b8415ad6bb08f1362eed6035",
    "Tracer._end_span": "f6f75ec98b908396ff999de2ac6e8905bc1eb06177bcaf1797ff7d7c5e1bc915",
    "Agent._start_agent_trace_span": "3a9d14b7a29f9e8f9702953e63e7593ea46c0811c3409bc6a5b2a03fa8be3f44",
}


def strands_own(name: str) -> Any:
    kind, method = name.split(".")
    if kind == "Agent":
        return compat._STRANDS_AGENT_SPAN
    return compat._STRANDS_TRACER_METHODS.get(method) or getattr(strands_tracer.Tracer, method)


def test_strands_code_is_the_code_entry_10_was_written_against() -> None:
    for name, sha in PINNED.items():
        assert hashlib.sha256(inspect.getsource(strands_own(name)).encode()).hexdigest() == sha, name


def test_bootstrap_installs_it_and_twice_is_once(tmp_path: Path) -> None:
    root = bootstrap(StoreIO(SqliteRows(str(tmp_path / "rows.db")), FileObjects(str(tmp_path / "o"))))
    root.close()
    for name in (*compat._QUIET_STARTS, *compat._QUIET_ENDS):
        method = getattr(strands_tracer.Tracer, name)
        assert method is not compat._STRANDS_TRACER_METHODS[name] and method._chat_approvals_quiet, name
    assert Agent._start_agent_trace_span is compat.agent_span_if_recorded
    installed = {n: getattr(strands_tracer.Tracer, n) for n in compat._STRANDS_TRACER_METHODS}
    compat.skip_unrecorded_spans()
    assert {n: getattr(strands_tracer.Tracer, n) for n in compat._STRANDS_TRACER_METHODS} == installed


REMOTE = SpanContext(trace_id=0x1F, span_id=0x2E, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))


@contextmanager
def current(span: trace.Span | None) -> Iterator[None]:
    if span is None:
        yield
        return
    with trace.use_span(span, end_on_exit=False):
        yield


def recording_span() -> trace.Span:
    """A span that records, from a provider that is not the installed one (none is installed)."""
    return TracerProvider().get_tracer("test").start_span("user's own")


def start_calls(parent: trace.Span | None) -> dict[str, tuple[tuple[Any, ...], dict[str, Any]]]:
    """Each start method's arguments as Strands' agent, event loop and tool executor pass them."""
    messages = [{"role": "user", "content": [{"text": "fetch https://data.example.org/t.csv"}]}]
    tool = {"toolUseId": "t1", "name": "request_approval", "input": {"reason": "r"}}
    return {
        "start_agent_span": ((), {"messages": messages, "agent_name": "Strands Agents", "tools": ["a"]}),
        "start_model_invoke_span": ((), {"messages": messages, "parent_span": parent, "model_id": "m"}),
        "start_tool_call_span": ((tool, parent), {"custom_trace_attributes": {}}),
        "start_event_loop_cycle_span": ((), {"invocation_state": {}, "messages": messages, "parent_span": parent}),
    }


SITUATIONS = ["nothing current, no parent", "a remote context current, no parent", "a parent that records"]


@pytest.mark.parametrize("situation", SITUATIONS)
def test_without_a_provider_each_start_gives_the_span_strands_own_gives(situation: str) -> None:
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        pytest.skip("a tracer provider is installed in this process")
    tracer = strands_tracer.get_tracer()
    now = None if situation == SITUATIONS[0] else NonRecordingSpan(REMOTE)
    parent = recording_span() if situation == SITUATIONS[2] else None
    with current(now):
        for name, (args, kwargs) in start_calls(parent).items():
            ours = compat._quiet_start(name)(tracer, *args, **kwargs)
            theirs = compat._STRANDS_TRACER_METHODS[name](tracer, *args, **kwargs)
            assert not ours.is_recording() and not theirs.is_recording(), name
            if parent is None or name == "start_agent_span":  # an agent's span is always under the current one
                assert ours is theirs is (now or trace.INVALID_SPAN), name  # OpenTelemetry's no-op hands it back
            else:
                assert ours.get_span_context() == theirs.get_span_context() == parent.get_span_context(), name


def test_an_event_loop_cycle_without_a_parent_takes_the_one_in_its_invocation_state() -> None:
    tracer, parent = strands_tracer.get_tracer(), recording_span()
    state = {"event_loop_parent_span": parent}
    ours = compat._quiet_start("start_event_loop_cycle_span")(tracer, state, [])
    theirs = compat._STRANDS_TRACER_METHODS["start_event_loop_cycle_span"](tracer, state, [])
    assert ours.get_span_context() == theirs.get_span_context() == parent.get_span_context()


def test_a_span_that_records_is_still_ended_by_strands_own_code() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = strands_tracer.get_tracer()
    usage = {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}
    message = {"role": "assistant", "content": [{"text": "done"}]}
    span = provider.get_tracer("test").start_span("chat")
    compat._quiet_end("end_model_invoke_span")(tracer, span, message, usage, {"latencyMs": 0}, "end_turn")
    (ended,) = exporter.get_finished_spans()
    assert ended.attributes is not None and ended.attributes["gen_ai.usage.output_tokens"] == 4
    assert not span.is_recording()
    # and one that does not record is left alone, as Strands' `_end_span` leaves it
    compat._quiet_end("end_model_invoke_span")(tracer, NonRecordingSpan(REMOTE), message, usage, {}, "end_turn")
    assert len(exporter.get_finished_spans()) == 1


RECORDED_RUN = textwrap.dedent(
    """
    import asyncio, json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from chat_approvals.core.bootstrap import bootstrap
    from chat_approvals.core.models import Answer
    from chat_approvals.store.aio import StoreIO
    from chat_approvals.store.file_objects import FileObjects
    from chat_approvals.store.sqlite_rows import SqliteRows

    root = bootstrap(StoreIO(SqliteRows(sys.argv[1] + "/rows.db"), FileObjects(sys.argv[1] + "/o")))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # after start-up: the quiet methods must see it

    async def cycle():
        a = root.approvals
        turn = await a.run_turn(chat="c", user="u", text="please fetch https://data.example.org/t.csv", platform="http")
        assert turn.offer is not None, turn
        res = await a.resume(card_id=turn.offer.card.card_id, user="u", secret=turn.offer.secret,
                             answer=Answer(approved=True))
        assert res.outcome == "resumed", res

    asyncio.run(cycle())
    root.close()
    print(json.dumps([[s.name, dict(s.attributes)] for s in exporter.get_finished_spans()]))
    """
)


def test_a_recorded_cycle_still_carries_strands_attributes(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", RECORDED_RUN, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    spans = json.loads(out.stdout.strip().splitlines()[-1])
    names = [name for name, _ in spans]
    agents = [a for name, a in spans if name.startswith("invoke_agent")]
    assert len(agents) == 2, names  # the turn and the resume
    assert all(json.loads(a["gen_ai.agent.tools"]) == ["request_approval"] for a in agents)  # the tool list
    assert all("gen_ai.usage.total_tokens" in a for a in agents)  # end_agent_span's
    models = [a for name, a in spans if name == "chat"]
    assert models and all("gen_ai.usage.output_tokens" in a for a in models)  # end_model_invoke_span's
    tools = [a for name, a in spans if name == "execute_tool request_approval"]
    assert tools and tools[-1]["gen_ai.tool.status"] == "success"  # end_tool_call_span's, on the resume
    cycles = [a for name, a in spans if name == "execute_event_loop_cycle"]
    assert cycles and all("event_loop.cycle_id" in a for a in cycles)


def test_a_method_another_library_wrapped_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """An instrumentation of Strands' spans installed before start-up keeps its wrapper."""

    def theirs(self: Any, *args: Any, **kwargs: Any) -> Any:
        return compat._STRANDS_TRACER_METHODS["start_tool_call_span"](self, *args, **kwargs)

    monkeypatch.setattr(strands_tracer.Tracer, "start_tool_call_span", theirs)
    monkeypatch.setattr(
        strands_tracer.Tracer, "end_tool_call_span", compat._STRANDS_TRACER_METHODS["end_tool_call_span"]
    )
    compat.skip_unrecorded_spans()
    assert strands_tracer.Tracer.start_tool_call_span is theirs
    assert strands_tracer.Tracer.end_tool_call_span._chat_approvals_quiet  # Strands' own: installed

"""core/observe/tracing.py `span`: while no tracer provider is installed it hands back what
OpenTelemetry's no-op tracer would make current (issue 34), and otherwise is the tracer's own
`start_as_current_span`. A recorded turn and resume keep their spans and the link across the wait
(tests/bots/test_operating_processes.py, a provider installed in another process). No rule covers
tracing; docs/operating.md says what a trace holds."""

from __future__ import annotations

from opentelemetry import context, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from chat_approvals.core.observe import tracing


def _both(name: str) -> tuple[trace.Span, trace.Span, trace.Span]:
    """(the current span, what `span` made current, what the no-op path made current)."""
    with tracing.span(name) as ours:
        inside_ours = trace.get_current_span()
    with tracing.tracer().start_as_current_span(name) as theirs:
        inside_theirs = trace.get_current_span()
    assert ours is inside_ours and theirs is inside_theirs
    return trace.get_current_span(), ours, theirs


def test_without_a_provider_the_span_is_the_one_the_no_op_tracer_makes_current() -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)  # no provider in the tests
    current, ours, theirs = _both("t")
    assert ours is theirs is current is trace.INVALID_SPAN
    assert tracing.current_context() is None
    remote = NonRecordingSpan(SpanContext(0x1F, 0x2F, is_remote=True, trace_flags=TraceFlags(1)))
    token = context.attach(trace.set_span_in_context(remote))
    try:
        current, ours, theirs = _both("t")
        assert ours is theirs is current is remote
    finally:
        context.detach(token)


def test_a_recording_span_without_a_global_provider_takes_the_tracers_own_path() -> None:
    """A span recorded by a tracer nobody installed globally: the no-op tracer gives a non-recording
    child, never the span itself (its attributes stay its own)."""
    parent = TracerProvider().get_tracer("test").start_span("parent")
    token = context.attach(trace.set_span_in_context(parent))
    try:
        with tracing.span("t") as ours:
            ours.set_attribute("chat_approvals.platform", "http")
        assert ours is not parent and not ours.is_recording()
        assert ours.get_span_context() == parent.get_span_context()
        assert "chat_approvals.platform" not in (parent.attributes or {})  # type: ignore[attr-defined]
    finally:
        context.detach(token)
        parent.end()

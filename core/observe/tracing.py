"""Traces across the human wait: the turn that paused writes its W3C trace context into the
pointer; the resume (any process, any time later) starts its span with a link to it. Strands'
own agent spans nest under ours. With no tracer provider configured (no `OTEL_*` exporter set),
every span here is a non-recording no-op and the pointer carries no trace context.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext

from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, Span
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACER_NAME = "chat_approvals"
_W3C = TraceContextTextMapPropagator()

# Any of these asks for export; without one nothing is exported (the OTel SDK's own variables).
EXPORT_ENV = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER")


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def span(name: str) -> AbstractContextManager[Span]:
    """`tracer().start_as_current_span(name)`. While no tracer provider is installed and the current
    span does not record (no span, or a remote context), OpenTelemetry's no-op tracer would make that
    same span current again: it is simply handed back, without the proxy tracer, its context manager
    and a context attach and detach (about 4 us a span; two spans a cycle, issue 34)."""
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        current = trace.get_current_span()
        if isinstance(current, NonRecordingSpan):
            return nullcontext(current)
    return tracer().start_as_current_span(name)


def current_context() -> dict[str, str] | None:
    """The current span as W3C `traceparent` (and `tracestate`), or None when not recording."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier or None


def link_to(carrier: dict[str, str] | None) -> Link | None:
    """A link to the span a stored trace context names; None for none or a malformed one."""
    if not carrier:
        return None
    ctx = trace.get_current_span(_W3C.extract(carrier)).get_span_context()
    return Link(ctx, {"chat_approvals.link": "paused_turn"}) if ctx.is_valid else None


def add_link(span: Span, carrier: dict[str, str] | None) -> None:
    link = link_to(carrier)
    if link is not None and span.is_recording():
        span.add_link(link.context, link.attributes)


def link_current(carrier: dict[str, str] | None) -> None:
    """Link the current span (the facade's resume span) to the span a stored context names."""
    add_link(trace.get_current_span(), carrier)


def setup_export(service_name: str = "chat-approvals") -> bool:
    """Install an SDK tracer provider exporting over OTLP/HTTP when the standard `OTEL_*`
    environment asks for it (endpoint, headers, protocol are read by the exporter itself).
    Returns whether export is on."""
    wanted = [v for v in EXPORT_ENV if os.environ.get(v)]
    if not wanted or os.environ.get("OTEL_TRACES_EXPORTER", "otlp").lower() == "none":
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return True

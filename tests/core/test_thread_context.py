"""OpenTelemetry's wrapper on `ThreadPoolExecutor.submit` (put there by Strands' tracer) is off while
no tracer provider is installed and back, the same object, once a turn starts with one installed, so
a span's context still reaches the threads that R21's off-loop work runs on (core/agent/strands_compat.py,
entry 8; issue 34). Each
case in a fresh process: a tracer provider can be installed only once per process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROLOGUE = textwrap.dedent(
    """
    import asyncio, json, sys
    from concurrent.futures import ThreadPoolExecutor
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    import chat_approvals.core.agent.strands_compat as compat
    from chat_approvals.core.bootstrap import bootstrap
    from chat_approvals.store.aio import StoreIO
    from chat_approvals.store.file_objects import FileObjects
    from chat_approvals.store.sqlite_rows import SqliteRows

    def otel_wrapped():
        return getattr(vars(ThreadPoolExecutor)["submit"], "_self_wrapper", None) is compat._SUBMIT_WRAPPER

    def span_seen_in_a_thread():
        with trace.get_tracer("t").start_as_current_span("outer") as span:
            with ThreadPoolExecutor(1) as pool:
                seen = pool.submit(lambda: trace.get_current_span().get_span_context().span_id).result()
        return seen == span.get_span_context().span_id

    def turn(root, chat):
        return asyncio.run(root.approvals.run_turn(chat=chat, user="u", text="hello", platform="http"))
    """
)

LATER_PROVIDER = PROLOGUE + textwrap.dedent(
    """
    root = bootstrap(StoreIO(SqliteRows(sys.argv[1] + "/rows.db"), FileObjects(sys.argv[1] + "/o")))
    out = {"off": not otel_wrapped()}
    turn(root, "c1")
    out["off after a turn"] = not otel_wrapped()
    wrapper = compat._unwrapped_submit
    trace.set_tracer_provider(TracerProvider())  # installed after start-up, as an embedding host may
    turn(root, "c2")
    out["on after a turn"] = otel_wrapped() and vars(ThreadPoolExecutor)["submit"] is wrapper
    out["span in a thread"] = span_seen_in_a_thread()
    root.close()
    print(json.dumps(out))
    """
)

PROVIDER_FIRST = PROLOGUE + textwrap.dedent(
    """
    trace.set_tracer_provider(TracerProvider())
    root = bootstrap(StoreIO(SqliteRows(sys.argv[1] + "/rows.db"), FileObjects(sys.argv[1] + "/o")))
    turn(root, "c1")
    out = {"on": otel_wrapped(), "span in a thread": span_seen_in_a_thread()}
    root.close()
    print(json.dumps(out))
    """
)

SOMEONE_ELSES_ON_TOP = PROLOGUE + textwrap.dedent(
    """
    import strands.telemetry.tracer as strands_tracer
    import wrapt
    strands_tracer.get_tracer()  # Strands' tracer wraps submit first

    def theirs(wrapped, instance, args, kwargs):
        return wrapped(*args, **kwargs)

    wrapt.wrap_function_wrapper(ThreadPoolExecutor, "submit", theirs)
    ours = vars(ThreadPoolExecutor)["submit"]
    root = bootstrap(StoreIO(SqliteRows(sys.argv[1] + "/rows.db"), FileObjects(sys.argv[1] + "/o")))
    turn(root, "c1")
    root.close()
    print(json.dumps({"left alone": vars(ThreadPoolExecutor)["submit"] is ours}))
    """
)


def run(script: str, tmp_path: Path) -> dict[str, bool]:
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, bool] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_off_without_a_provider_and_back_once_one_is_installed(tmp_path: Path) -> None:
    assert run(LATER_PROVIDER, tmp_path) == {
        "off": True,
        "off after a turn": True,
        "on after a turn": True,
        "span in a thread": True,
    }


def test_kept_when_a_provider_is_installed_before_start_up(tmp_path: Path) -> None:
    assert run(PROVIDER_FIRST, tmp_path) == {"on": True, "span in a thread": True}


def test_a_wrapper_put_on_top_by_someone_else_is_left_alone(tmp_path: Path) -> None:
    assert run(SOMEONE_ELSES_ON_TOP, tmp_path) == {"left alone": True}

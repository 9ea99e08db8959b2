"""StoreIO.run: one hop to the store's thread, its result (or error) handed straight back to the
loop. What run_in_executor promised still holds: errors reach the caller, a call cancelled before
its thread took it never runs, and one cancelled while running ends quietly (R21: the store's work
stays off the event loop)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace

from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.store_conformance import T0


def _io(tmp_path: Path, workers: int = 1) -> StoreIO:
    return StoreIO(
        SqliteRows(tmp_path / "rows.db"), FileObjects(tmp_path / "objects", clock=ManualClock(T0)), workers=workers
    )


async def test_the_result_and_the_error_of_a_call_reach_the_caller(tmp_path: Path) -> None:
    io = _io(tmp_path)
    try:
        assert await io.run(lambda a, b=0: a + b, 2, b=3) == 5
        assert await io.run(threading.get_ident) != threading.get_ident()  # it ran on the store's thread

        def fails() -> None:
            raise LookupError("from the store's thread")

        with pytest.raises(LookupError, match="from the store's thread"):
            await io.run(fails)
    finally:
        io.close()


async def test_a_call_cancelled_before_its_thread_takes_it_never_runs(tmp_path: Path) -> None:
    io = _io(tmp_path, workers=1)
    release, ran = threading.Event(), threading.Event()
    try:
        busy = asyncio.ensure_future(io.run(release.wait, 5))
        queued = asyncio.ensure_future(io.run(ran.set))
        await asyncio.sleep(0.05)  # both submitted; the one thread is held by the first
        queued.cancel()
        await asyncio.sleep(0)
        release.set()
        assert await busy is True
        with pytest.raises(asyncio.CancelledError):
            await queued
        await io.run(lambda: None)  # the thread has taken everything queued before this
        assert not ran.is_set()
    finally:
        release.set()
        io.close()


async def test_a_call_cancelled_while_running_ends_quietly(tmp_path: Path) -> None:
    """The thread finishes and hands over a result nobody awaits: nothing is reported to the
    loop (no InvalidStateError from settling a cancelled future)."""
    io = _io(tmp_path)
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(5)
        return "late"

    try:
        call = asyncio.ensure_future(io.run(slow))
        await asyncio.to_thread(started.wait, 5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        release.set()
        assert await io.run(lambda: "next") == "next"  # the late result was handed over before this
        await asyncio.sleep(0.01)
        assert reported == []
    finally:
        release.set()
        loop.set_exception_handler(None)
        io.close()


async def test_threads_start_as_calls_need_them_up_to_the_bound(tmp_path: Path) -> None:
    """Two calls that block run at once on two threads; with the bound at two, a third waits
    for one of them (R21: more work never runs on the loop instead)."""
    io = _io(tmp_path, workers=2)
    release = threading.Event()
    inside: list[int] = []
    on: set[int] = set()
    guard = threading.Lock()

    def hold(n: int) -> int:
        with guard:
            inside.append(n)
            on.add(threading.get_ident())
        release.wait(5)
        return n

    try:
        assert await io.run(threading.get_ident) == await io.run(threading.get_ident)  # one is enough
        calls = [asyncio.ensure_future(io.run(hold, n)) for n in range(3)]
        for _ in range(200):
            await asyncio.sleep(0.005)
            if len(inside) == 2:
                break
        await asyncio.sleep(0.05)
        assert len(inside) == 2  # two threads, both held; the third call queued
        release.set()
        assert sorted(await asyncio.gather(*calls)) == [0, 1, 2]
        assert len(inside) == 3 and len(on) == 2  # the third on one of the two
    finally:
        release.set()
        io.close()


async def test_close_lets_queued_calls_finish_then_ends_the_threads(tmp_path: Path) -> None:
    io = _io(tmp_path, workers=1)
    release = threading.Event()
    ran: list[str] = []
    thread = await io.run(threading.current_thread)
    first = asyncio.ensure_future(io.run(release.wait, 5))
    second = asyncio.ensure_future(io.run(ran.append, "second"))
    await asyncio.sleep(0.02)
    release.set()
    await asyncio.wait_for(asyncio.to_thread(io.close), 5)  # joins: the queued call ran first
    assert ran == ["second"]
    assert await first is True and await second is None
    assert not thread.is_alive()
    with pytest.raises(RuntimeError, match="shut down"):
        await asyncio.wait_for(io.run(lambda: None), 5)


_CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="none")


async def test_a_call_carries_the_callers_context_into_the_store_thread(tmp_path: Path) -> None:
    """As asyncio.to_thread does: the OpenTelemetry context rides on a context variable, so a
    span an instrumented client starts in the store's thread stays in the caller's trace."""
    io = _io(tmp_path)
    try:
        _CALLER.set("turn-1")
        assert await io.run(_CALLER.get) == "turn-1"
        _CALLER.set("turn-2")
        assert await io.run(_CALLER.get) == "turn-2"

        def sets() -> str:
            _CALLER.set("inside")
            return _CALLER.get()

        assert await io.run(sets) == "inside"
        assert _CALLER.get() == "turn-2"  # what the call set stays in its thread's copy

        outer = trace.NonRecordingSpan(trace.SpanContext(trace_id=7, span_id=11, is_remote=False))
        with trace.use_span(outer):
            seen = await io.run(lambda: trace.get_current_span().get_span_context().span_id)
        assert seen == 11
    finally:
        io.close()

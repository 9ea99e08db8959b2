"""core/protocol/resume_run.py `until_deadline`: the claimed run is awaited until it ends, looked at
every heartbeat period against the resume deadline; past it the run is cancelled (R11's hard stop),
and a caller that goes away takes the run with it (it must not outlive its claim)."""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace
from typing import Any, cast

from chat_approvals.core.clock import ManualClock
from chat_approvals.core.protocol.resume_run import ClaimedRun


def _run(clock: ManualClock, every: float = 0.01) -> ClaimedRun:
    parts = SimpleNamespace(clock=clock, settings=SimpleNamespace(heartbeat_every=every))
    return ClaimedRun(cast(Any, parts), cast(Any, None))


async def test_a_run_that_ends_in_time_is_waited_for_without_being_touched() -> None:
    clock = ManualClock(1000.0)

    async def work() -> int:
        await asyncio.sleep(0.03)  # a few heartbeat periods
        return 7

    run = asyncio.ensure_future(work())
    assert await _run(clock).until_deadline(run, deadline=2000.0) is True
    assert run.result() == 7


async def test_past_the_deadline_the_run_is_cancelled() -> None:
    clock = ManualClock(1000.0)
    run = asyncio.ensure_future(asyncio.sleep(30))

    async def later() -> None:
        await asyncio.sleep(0.02)
        clock.advance(100.0)

    mover = asyncio.ensure_future(later())
    assert await _run(clock).until_deadline(run, deadline=1050.0) is False
    assert run.cancelled()
    await mover


async def test_a_caller_that_goes_away_cancels_the_run() -> None:
    clock = ManualClock(1000.0)
    run = asyncio.ensure_future(asyncio.sleep(30))
    waiting = asyncio.ensure_future(_run(clock, every=5.0).until_deadline(run, deadline=2000.0))
    await asyncio.sleep(0.01)
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    await asyncio.sleep(0)
    assert run.cancelled()

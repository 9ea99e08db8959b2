"""Issue 34 (target 3): acks never queue behind resumes. While acknowledged (Slack) clicks keep
arriving and a queue stands, bots/admission.py starts no new resume; it starts them, in arrival
order, when the arrivals pause, or after `hold_max` of a burst that goes on.

The admission's clock is a manual one here and the jobs are held by events, so what starts when is
read from the order of events, never from timing.
"""

from __future__ import annotations

import asyncio

import pytest

from chat_approvals.bots.admission import Admission
from chat_approvals.core.observe import Metrics

QUIET = 0.003
HOLD_MAX = 1.0


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Burst:
    """Clicks submitted one by one; the first two resumes wait on `first_two` until released; each
    resume and each arrival is written to `events` ("ack i" after its submit, "start i")."""

    def __init__(self, admission: Admission, *, acked: bool = True) -> None:
        self.admission, self.acked = admission, acked
        self.events: list[str] = []
        self.first_two = asyncio.Event()
        self.futures: list[asyncio.Future[int]] = []

    def arrive(self, i: int) -> None:
        async def resume() -> int:
            self.events.append(f"start {i}")
            if i < 2:
                await self.first_two.wait()
            await asyncio.sleep(0)
            return i

        f = self.admission.submit(resume, platform="slack" if self.acked else "teams", acked=self.acked)
        assert f is not None
        self.futures.append(f)
        self.events.append(f"ack {i}")

    def started(self) -> list[int]:
        return [int(e.split()[1]) for e in self.events if e.startswith("start")]


async def spin(turns: int = 10) -> None:
    """Let the loop run what is ready (finished resumes, the admission's pump); no time passes."""
    for _ in range(turns):
        await asyncio.sleep(0)


def admission(clock: Clock, hold_max: float = HOLD_MAX) -> Admission:
    return Admission(Metrics(), workers=2, patience=None, hold_quiet=QUIET, hold_max=hold_max, clock=clock)


async def burst(b: Burst, first: range, rest: range, between: int = 0) -> None:
    """`first` arrive while the first two resumes run; those two are released; `rest` arrive."""
    for i in first:
        b.arrive(i)
        await spin(2)
    b.first_two.set()
    await spin()
    for i in rest:
        b.arrive(i)
        await spin(2)


async def test_acked_clicks_arriving_hold_new_resumes_until_they_pause() -> None:
    """Two resumes run, eight clicks wait; the two finish while ten more clicks arrive: no resume
    starts before the last of them is acknowledged (without the hold, clicks 2 and 3 start at once
    and every later ack shares the loop with them). When the arrivals pause, all start in order."""
    clock = Clock()
    a = admission(clock)
    b = Burst(a)
    await burst(b, range(10), range(10, 20))
    assert b.started() == [0, 1]
    assert a.depth() == 18  # the queue depth: every later click waits, none was dropped
    clock.t += QUIET  # the arrivals paused
    assert await a.drain(5)
    assert b.started() == list(range(20))
    assert [f.result() for f in b.futures] == list(range(20))
    assert b.events.index("start 2") > b.events.index("ack 19")


async def test_a_lone_click_or_a_short_queue_is_never_held() -> None:
    """Clicks that arrive while fewer than two wait start at once: holding is for bursts only."""
    clock = Clock()
    a = admission(clock)
    b = Burst(a)
    b.first_two.set()
    for i in range(6):
        b.arrive(i)
        await spin()
    assert b.started() == list(range(6))
    assert await a.drain(5)


async def test_a_burst_that_goes_on_holds_resumes_for_hold_max_at_most() -> None:
    """Past `hold_max` of continuous arrivals the resumes start although clicks keep coming."""
    clock = Clock()
    a = admission(clock)
    b = Burst(a)
    await burst(b, range(10), range(10, 12))
    assert b.started() == [0, 1]  # held so far
    clock.t += HOLD_MAX  # the burst has held for hold_max; clicks keep arriving (each within QUIET)
    for i in range(12, 14):
        b.arrive(i)
        await spin()
    assert b.events.index("start 2") < b.events.index("ack 13")
    clock.t += QUIET
    assert await a.drain(5)
    assert b.started() == list(range(14))


async def test_teams_invokes_hold_nothing_their_answer_waits_for_the_resume() -> None:
    """Unacknowledged arrivals (a Teams invoke waits for its own resume) never hold resumes."""
    clock = Clock()
    a = admission(clock)
    b = Burst(a, acked=False)
    await burst(b, range(10), range(10, 20))
    assert b.events.index("start 2") < b.events.index("ack 10")
    assert await a.drain(5)
    assert b.started() == list(range(20))


async def test_hold_max_zero_turns_the_hold_off_and_close_ends_a_hold() -> None:
    clock = Clock()
    off = admission(clock, hold_max=0)
    b = Burst(off)
    await burst(b, range(10), range(10, 20))
    assert b.events.index("start 2") < b.events.index("ack 10")
    assert await off.drain(5)

    held = admission(clock)
    b2 = Burst(held)
    await burst(b2, range(10), range(10, 20))
    assert b2.started() == [0, 1]
    await held.close(5)  # shutdown works off the held clicks at once, clock unchanged
    assert b2.started() == list(range(20))


def test_hold_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        Admission(Metrics(), hold_quiet=0)
    with pytest.raises(ValueError):
        Admission(Metrics(), hold_max=-1)

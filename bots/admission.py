"""Bounded, first-in first-out admission of resume work (the part of a click after its ack).

Why: a burst of clicks used to start one resume task each at once. On one event loop they then
interleave round-robin, so every resume finishes near the end of the burst (the median click waits
as long as the last) and each request's ack queues behind that work. Here `workers` resumes run at
once and the rest wait in arrival order, so the k-th click finishes after about k resumes and the
loop stays free to acknowledge new requests.

A resume that is still running after `patience` seconds is waiting on something (a model call, a
slow store), not using the loop: it stops counting against `workers`, so the next click may start.
Slow resumes therefore do not cap throughput at `workers`; only `max_running` bounds them.

The queue is bounded: when it is full a click is refused at once (the front end says "try again";
nothing was changed, the card stays answerable), never silently dropped. At shutdown the queue is
drained (bounded) before the server stops. Clicks wait here in memory only: a process that dies
loses the clicks it had queued, exactly as it loses the resumes it had started; neither changed the
store before its claim, so the card is still answerable and a click on another replica (or again)
resumes it (R9, R10).

Acks first (issue 34): a Slack click is acknowledged before its resume, so during a burst every
resume that starts takes loop time from the acks still to come. While such clicks keep arriving
(the last within `hold_quiet` seconds) and two or more already wait, no new resume starts, for at
most `hold_max` seconds per burst; the queue's order is unchanged and the resumes start the moment
the arrivals pause. A Teams invoke waits for its own resume, so its arrival holds nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from chat_approvals.core.observe import Metrics

log = logging.getLogger("chat_approvals.admission")

T = TypeVar("T")
Job = tuple[Callable[[], Awaitable[Any]], "asyncio.Future[Any]"]

# Two: one resume's store waits (fsync, executor hops) overlap another's CPU. More only interleaves
# CPU-bound resumes on the one loop, so each finishes later: with 4, a 50-click Teams burst's p50 was
# 15-20% slower than with 2 (bench.bench_teams, every mode, 2026-12-03); 1 measured the same as 2.
DEFAULT_WORKERS = 2
DEFAULT_CAPACITY = 1000
DEFAULT_PATIENCE = 0.5  # seconds: a CPU-bound resume is done in milliseconds; a model call takes longer
DEFAULT_MAX_RUNNING = 256
# Holding resumes while acked clicks arrive: a burst's clicks come well within 3 ms of each other, and
# one resume costs about that much of the loop. 1,000 clicks at once: ack p99 1,102 -> 682 ms and
# 1,667 -> 1,061 ms (docs/benchmarks.md, issue 34).
DEFAULT_HOLD_QUIET = 0.003  # seconds without an acked arrival that end the hold
DEFAULT_HOLD_MAX = 1.0  # seconds a burst may hold resumes at most (0: never hold)
HOLD_WHEN_WAITING = 2  # a hold needs this many clicks waiting: a lone click starts at once


class Admission:
    """`submit(job)` queues `job` (a coroutine function) and returns a future of its result, or None
    when the queue is full. Jobs start in submission order."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        workers: int = DEFAULT_WORKERS,
        capacity: int = DEFAULT_CAPACITY,
        patience: float | None = DEFAULT_PATIENCE,
        max_running: int = DEFAULT_MAX_RUNNING,
        hold_quiet: float = DEFAULT_HOLD_QUIET,
        hold_max: float = DEFAULT_HOLD_MAX,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if workers < 1 or capacity < 1 or max_running < workers:
            raise ValueError("admission needs a worker, room for one click, and max_running >= workers")
        if patience is not None and patience < 0:
            raise ValueError("patience must be >= 0 seconds (None: a running resume always counts)")
        if hold_quiet <= 0 or hold_max < 0:
            raise ValueError("hold_quiet must be > 0 seconds and hold_max >= 0 (0: never hold)")
        self.workers, self.capacity, self.patience, self.max_running = workers, capacity, patience, max_running
        self._metrics = metrics
        self._pending: deque[Job] = deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self._counted = 0  # running and not yet past their patience
        self._idle: asyncio.Event | None = None
        self._closed = False
        self.hold_quiet, self.hold_max, self._clock = hold_quiet, hold_max, clock
        self._last_acked_arrival: float | None = None
        self._hold_since: float | None = None  # when the current burst's hold began
        self._recheck: asyncio.TimerHandle | None = None
        metrics.resume_queue_depth.set_function(self.depth)
        metrics.resume_queue_running.set_function(lambda: float(len(self._tasks)))

    def depth(self) -> float:
        """Clicks waiting to start (not counting the ones running)."""
        return float(len(self._pending))

    def submit(
        self, job: Callable[[], Awaitable[T]], *, platform: str, acked: bool = False
    ) -> asyncio.Future[T] | None:
        """`acked`: the click was (or is being) acknowledged before its resume, as Slack's are; such
        arrivals hold new resumes while they keep coming (the module's doc)."""
        if self._closed or len(self._pending) >= self.capacity:
            self._metrics.resume_queue_refused.labels(platform).inc()
            log.warning("resume queue %s: a %s click was refused", "closed" if self._closed else "full", platform)
            return None
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending.append((job, done))
        if acked:
            self._last_acked_arrival = self._clock()
        self._idle_event().clear()
        self._pump()
        return done

    def _idle_event(self) -> asyncio.Event:
        if self._idle is None:  # created inside the running loop (the app may be built before it runs)
            self._idle = asyncio.Event()
            self._idle.set()
        return self._idle

    def _pump(self) -> None:
        """Start waiting jobs, oldest first, while a worker is free."""
        while self._pending and self._counted < self.workers and len(self._tasks) < self.max_running:
            if self._holding():
                break
            job, done = self._pending.popleft()
            if done.done():  # its waiter gave up (cancelled): nothing to run
                continue
            self._counted += 1
            task = asyncio.ensure_future(self._run(job, done))
            self._tasks.add(task)
        if not self._pending and not self._tasks:
            self._idle_event().set()

    def _holding(self) -> bool:
        """True while acked clicks keep arriving and a queue stands: a recheck is then scheduled."""
        if self.hold_max == 0 or self._closed or len(self._pending) < HOLD_WHEN_WAITING:
            self._hold_since = None
            return False
        last = self._last_acked_arrival
        now = self._clock()
        if last is None or now - last >= self.hold_quiet:
            self._hold_since = None  # the arrivals paused: this burst's hold is over
            return False
        if self._hold_since is None:
            self._hold_since = now
        if now - self._hold_since >= self.hold_max:
            return False  # held long enough: start resumes while the arrivals go on
        if self._recheck is None:
            self._recheck = asyncio.get_running_loop().call_later(self.hold_quiet, self._rechecked)
        return True

    def _rechecked(self) -> None:
        self._recheck = None
        self._pump()

    async def _run(self, job: Callable[[], Awaitable[Any]], done: asyncio.Future[Any]) -> None:
        counted = True

        def stop_counting() -> None:
            nonlocal counted
            if counted:
                counted = False
                self._counted -= 1
                self._pump()

        timer = None if self.patience is None else asyncio.get_running_loop().call_later(self.patience, stop_counting)
        try:
            result = await job()
        except asyncio.CancelledError:
            done.cancel()
            raise
        except Exception as e:  # the job's owner reads it from the future
            if not done.done():
                done.set_exception(e)
        else:
            if not done.done():
                done.set_result(result)
        finally:
            if timer is not None:
                timer.cancel()
            if counted:
                self._counted -= 1
            task = asyncio.current_task()
            if task is not None:
                self._tasks.discard(task)
            self._pump()

    async def drain(self, timeout: float = 30.0) -> bool:
        """Wait (bounded) until every click queued so far has been worked off. True when it was."""
        try:
            async with asyncio.timeout(timeout):
                await self._idle_event().wait()
            return True
        except TimeoutError:
            return False

    async def close(self, timeout: float = 30.0) -> None:
        """Refuse new clicks, finish the queued ones (bounded), then cancel what is left."""
        self._closed = True
        if self._recheck is not None:
            self._recheck.cancel()
            self._recheck = None
        self._pump()  # a hold ends at close: work off what waits
        if not await self.drain(timeout):
            log.warning("shutdown: %d queued clicks not worked off within %.0f s", self.depth(), timeout)
        while self._pending:  # left over: whoever waits hears so
            _, done = self._pending.popleft()
            done.cancel()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

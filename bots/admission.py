"""Bounded, first-in first-out admission of resume work (the part of a click after its ack).

Why: a burst of clicks used to start one resume task each at once. On one event loop they then
interleave round-robin, so every resume finishes near the end of the burst (the median click waits
as long as the last) and each request's ack queues behind that work. Here at most `workers` resumes
run at once and the rest wait in arrival order, so the k-th click finishes after about k resumes and
the loop stays free to acknowledge new requests. The queue is bounded: when it is full a click is
refused at once (the front end says "try again"; nothing was changed, the card stays answerable),
never silently dropped. At shutdown the queue is drained (bounded) before the server stops.

Clicks wait here in memory only: a process that dies loses the clicks it had queued, exactly as it
loses the resumes it had started; neither changed the store before its claim, so the card is still
answerable and a click on another replica (or again) resumes it (R9, R10).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from core.metrics import Metrics

log = logging.getLogger("chat_approvals.admission")

T = TypeVar("T")

DEFAULT_WORKERS = 4
DEFAULT_CAPACITY = 1000


class Admission:
    """`submit(job)` queues `job` (a coroutine function) and returns a future of its result, or None
    when the queue is full. Jobs start in submission order, at most `workers` at a time."""

    def __init__(self, metrics: Metrics, *, workers: int = DEFAULT_WORKERS, capacity: int = DEFAULT_CAPACITY) -> None:
        if workers < 1 or capacity < 1:
            raise ValueError("admission needs at least one worker and room for one click")
        self.workers = workers
        self.capacity = capacity
        self._metrics = metrics
        self._queue: asyncio.Queue[tuple[Callable[[], Awaitable[Any]], asyncio.Future[Any]]] | None = None
        self._running: list[asyncio.Task[None]] = []
        self._busy = 0
        self._closed = False
        metrics.resume_queue_depth.set_function(self.depth)
        metrics.resume_queue_running.set_function(lambda: float(self._busy))

    def depth(self) -> float:
        """Clicks waiting for a worker (not counting the ones running)."""
        return float(self._queue.qsize()) if self._queue is not None else 0.0

    def submit(self, job: Callable[[], Awaitable[T]], *, platform: str) -> asyncio.Future[T] | None:
        if self._closed:
            self._metrics.resume_queue_refused.labels(platform).inc()
            return None
        queue = self._start()
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        try:
            queue.put_nowait((job, done))
        except asyncio.QueueFull:
            self._metrics.resume_queue_refused.labels(platform).inc()
            log.warning("resume queue full (%d waiting): a %s click was refused", queue.qsize(), platform)
            return None
        return done

    def _start(self) -> asyncio.Queue[tuple[Callable[[], Awaitable[Any]], asyncio.Future[Any]]]:
        # Created on first use, inside the running loop (the app may be built before the loop runs).
        if self._queue is None:
            self._queue = asyncio.Queue(maxsize=self.capacity)
            self._running = [asyncio.ensure_future(self._work(self._queue)) for _ in range(self.workers)]
        return self._queue

    async def _work(self, queue: asyncio.Queue[tuple[Callable[[], Awaitable[Any]], asyncio.Future[Any]]]) -> None:
        while True:
            job, done = await queue.get()
            self._busy += 1
            try:
                result = await job()
            except asyncio.CancelledError:
                if not done.done():
                    done.cancel()
                raise
            except Exception as e:  # the job's owner reads it from the future
                if not done.done():
                    done.set_exception(e)
            else:
                if not done.done():
                    done.set_result(result)
            finally:
                self._busy -= 1
                queue.task_done()

    async def drain(self, timeout: float = 30.0) -> bool:
        """Wait (bounded) until every click queued so far has been worked off. True when it was."""
        if self._queue is None:
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._queue.join()
            return True
        except TimeoutError:
            return False

    async def close(self, timeout: float = 30.0) -> None:
        """Refuse new clicks, finish the queued ones (bounded), then stop the workers."""
        self._closed = True
        if not await self.drain(timeout):
            log.warning("shutdown: %d queued clicks not worked off within %.0f s", self.depth(), timeout)
        for task in self._running:
            task.cancel()
        for task in self._running:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._running = []
        while self._queue is not None and not self._queue.empty():  # left over: whoever waits hears so
            _, done = self._queue.get_nowait()
            done.cancel()

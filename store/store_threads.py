"""The store's threads: where StoreIO runs its blocking calls (R21: never on the event loop).

What ThreadPoolExecutor does, less what a hop of the store does not need: no Future per call
(the call settles the loop's own future, store/aio.py), and nothing left for the thread to do in
Python once it has handed its result over. That matters here: the loop, woken by the hand-over,
needs the GIL the thread still holds, and every bytecode the thread runs after waking the loop
(an executor's Future settled, its work item dropped) is time the woken loop waits, then a
second wake-up when the GIL is released. A thread here goes back to its queue (which releases
the GIL) right after the hand-over.

Threads start as calls need them, up to `workers`; `shutdown` lets every queued call finish.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

# A job is called with the thread's `ready` callback, which it calls when its own work is done
# and before it hands the result over: the thread counts as idle from then on.
Job = Callable[[Callable[[], None]], None]


class StoreThreads:
    def __init__(self, workers: int, name: str = "store") -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        # One token per thread done with its job, before its next: a SimpleQueue, not a Semaphore
        # (pure Python, a Condition under it: 2.3 us a hop, half of it in the store's thread just
        # before it hands its result to the loop). Only `submit` takes tokens, under its lock.
        self._idle: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._workers = workers
        self._name = name
        self._closed = False
        self._lock = threading.Lock()

    def submit(self, job: Job) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the store's threads are shut down")
            self._jobs.put(job)
            if self._idle.qsize():  # an idle thread takes the job: its token is spent
                self._idle.get()
                return
            if len(self._threads) >= self._workers:
                return
            t = threading.Thread(target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True)
            self._threads.append(t)
        t.start()

    def _work(self) -> None:
        ready = functools.partial(self._idle.put, None)
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job(ready)
            except BaseException:  # a job hands its own errors over; this is a bug in one
                log.exception("a store job failed outside its call")

    def shutdown(self) -> None:
        """Every call queued before this runs; then the threads end (joined)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._jobs.put(None)
        for t in threads:
            if t is not threading.current_thread():
                t.join()

"""`/healthz` polled from a thread of its own while a test loads the server: the server's event loop
is not the poller's, so a stalled loop shows in the poller's p99 (R21)."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request


class HealthPoller:
    """GET /healthz every 10 ms from its own thread. A poll that fails or times out is an error,
    and any error makes p99 infinite, so a stall can never hide as a missing sample.

    Use `with` around a server in another process, and `async with` around a server on the test's
    own event loop (joining the thread there must not block the loop the server answers on)."""

    def __init__(self, base: str) -> None:
        self.url, self.took, self.errors = f"{base}/healthz", list[float](), list[str]()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HealthPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    async def __aenter__(self) -> HealthPoller:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        await asyncio.to_thread(self._thread.join, 10)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as r:
                    if r.status != 200:
                        self.errors.append(f"status {r.status}")
            except OSError as e:
                self.errors.append(repr(e))
            else:
                self.took.append(time.perf_counter() - started)
            self._stop.wait(0.01)

    def p99(self) -> float:
        if self.errors:
            return float("inf")
        took = sorted(self.took)
        return took[min(len(took) - 1, int(len(took) * 0.99))]

"""`/healthz` polled from a thread of its own while a test loads the server: the server's event loop
is not the poller's, so a stalled loop shows in the poller's p99 (R21)."""

from __future__ import annotations

import threading
import time
import urllib.request


class HealthPoller:
    """GET /healthz every 10 ms from its own thread."""

    def __init__(self, base: str) -> None:
        self.url, self.took, self._stop = f"{base}/healthz", list[float](), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HealthPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=10) as r:
                assert r.status == 200
            self.took.append(time.perf_counter() - started)
            self._stop.wait(0.01)

    def p99(self) -> float:
        took = sorted(self.took)
        return took[min(len(took) - 1, int(len(took) * 0.99))]

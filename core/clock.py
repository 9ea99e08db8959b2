"""The only source of time in core/: tests move a ManualClock instead of sleeping."""

from __future__ import annotations

import threading

from chat_approvals.core.models import Clock, SystemClock

__all__ = ["Clock", "ManualClock", "SystemClock"]


class ManualClock:
    """A clock a test sets and advances; safe to read from the heartbeat thread."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._t = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._t

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._t += seconds

    def set(self, t: float) -> None:
        with self._lock:
            self._t = t

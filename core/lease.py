"""R11: the winner's lease heartbeat, on its own thread so a busy event loop cannot starve it.

It renews every `every` seconds and stops for good at the resume deadline, so a stuck worker
cannot hold a lease past it. `tick()` is one renewal, callable directly by tests that move the
clock instead of sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from core.clock import Clock


class Heartbeat:
    def __init__(
        self,
        renew: Callable[[float, float], bool],
        clock: Clock,
        every: float,
        lease: float,
        deadline: float,
    ) -> None:
        self._renew = renew
        self._clock = clock
        self._every = every
        self._lease = lease
        self._deadline = deadline
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost = False
        self.renewals = 0

    def tick(self) -> bool:
        """One renewal; False once the lease is lost or the deadline has passed."""
        now = self._clock.now()
        if self.lost or now >= self._deadline:
            return False
        try:
            ok = self._renew(now, min(now + self._lease, self._deadline))
        except Exception:
            return True  # a store fault: try again next beat while the lease still holds
        if ok:
            self.renewals += 1
        else:
            self.lost = True
        return ok

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            if not self.tick():
                return

    def start(self) -> Heartbeat:
        self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

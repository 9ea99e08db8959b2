"""R11: the winner's lease heartbeat, on its own executor so a busy event loop cannot starve it.

One keeper thread per process renews every lease this process holds, every `every` seconds,
and each heartbeat stops for good at its resume deadline, so a stuck worker cannot hold a lease
past it. `Heartbeat.tick()` is one renewal, callable directly by tests that move the clock
instead of sleeping.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from chat_approvals.core.models import Clock

log = logging.getLogger(__name__)


class Heartbeat:
    def __init__(
        self,
        renew: Callable[[float, float], bool],
        clock: Clock,
        lease: float,
        deadline: float,
    ) -> None:
        self._renew = renew
        self._clock = clock
        self._lease = lease
        self._deadline = deadline
        # A flag, not a threading.Event: nothing waits on it (the keeper sleeps its period and
        # reads it), and an Event is a Condition and a lock built per lease, set with a notify_all
        # (two leases a cycle, issue 34). Set on the loop, read by the keeper's thread.
        self._stopped = False
        self.lost = False

    def tick(self) -> bool:
        """One renewal; False once the lease is lost or the deadline has passed."""
        now = self._clock.now()
        if self.finished or now >= self._deadline:
            return False
        try:
            ok = self._renew(now, min(now + self._lease, self._deadline))
        except Exception as e:  # a store fault: try again next beat while the lease still holds
            log.warning("lease renewal failed, retrying next beat: %s", e)
            return True
        if not ok:
            self.lost = True
        return ok

    def stop(self) -> None:
        self._stopped = True

    @property
    def finished(self) -> bool:
        return self._stopped or self.lost


class LeaseKeeper:
    """The small executor: one daemon thread renewing every registered heartbeat."""

    def __init__(self, every: float) -> None:
        self._every = every
        self._beats: set[Heartbeat] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def hold(self, beat: Heartbeat) -> Heartbeat:
        with self._lock:
            self._beats.add(beat)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
                self._thread.start()
        return beat

    def release(self, beat: Heartbeat) -> None:
        beat.stop()
        with self._lock:
            self._beats.discard(beat)

    def _run(self) -> None:
        while True:
            time.sleep(self._every)
            with self._lock:
                beats = list(self._beats)
                if not beats:  # nothing held: end; the next hold() starts a new thread
                    self._thread = None
                    return
            for beat in beats:
                if not beat.finished and not beat.tick():
                    with self._lock:
                        self._beats.discard(beat)

"""/readyz's write probe (issue 27.4): a store that answers reads but cannot take a write (a held
SQLite write lock: turns waited 8 s) is not ready.

The probe is one conditional write of a fixed event-dedupe key (`Approvals.first_delivery`): after
the first probe it changes nothing, but it still needs the write lock. It is bounded by the
caller's timeout; a probe still waiting on the store is not started again (one in flight per
process), so a stuck store never piles up executor threads however often /readyz is asked.
"""

from __future__ import annotations

import asyncio
import contextlib

from chat_approvals.core.approvals import Approvals

# No front end can name it: event ids are printable, and DEL is not. (Not NUL: PostgreSQL's text
# cannot hold one, and the probe must be a write every backend can take.)
PROBE_KEY = "\x7freadyz-write"


class WriteProbe:
    def __init__(self) -> None:
        self._inflight: asyncio.Task[bool] | None = None

    async def problem(self, approvals: Approvals, timeout: float) -> str | None:
        """Why the store cannot take a write now, or None."""
        task = self._inflight
        if task is None or task.done():
            task = self._inflight = asyncio.ensure_future(approvals.first_delivery(PROBE_KEY))
            task.add_done_callback(_consume)
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=timeout)
        except TimeoutError:
            return f"the store did not take a write within {timeout:g} s (its write lock is held?)"
        except Exception as e:
            return f"the store cannot take a write: {type(e).__name__}: {e}"
        return None


def _consume(task: asyncio.Task[bool]) -> None:
    """A probe that ends after its caller stopped waiting: its error is read, never 'never retrieved'."""
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()

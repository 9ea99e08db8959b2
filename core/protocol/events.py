"""Typed events the protocol emits to whoever subscribed (a front end), so core never calls up
into an adapter by name in the middle of a resume.

A subscriber runs inline, on the emitting task, and must be quick (schedule its work, do not
await a platform round trip): the resume waits for it. A failing subscriber is logged and
skipped: a front end's display fault must never strand a claim.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from chat_approvals.core.models import Answer, ApprovalCard

log = logging.getLogger(__name__)

E = TypeVar("E")
Subscriber = Callable[[E], Awaitable[None]]


@dataclass(frozen=True)
class Claimed:
    """A click won the claim on `card` (R11); its turn resumes now. `location` is where the card
    was posted (never the pointer, with its secret hash, worker and lease); `user` and `answer`
    are the click's, so a front end can tell its own click apart from another process's."""

    card: ApprovalCard
    location: dict[str, str] | None
    user: str
    answer: Answer


class Subscribers(Generic[E]):
    """An ordered list of async subscribers to one kind of event."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber[E]] = []

    def subscribe(self, subscriber: Subscriber[E]) -> Callable[[], None]:
        """Add `subscriber`; the returned function removes it (a front end that closes)."""
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

        return unsubscribe

    async def emit(self, event: E) -> None:
        for subscriber in list(self._subscribers):
            try:
                await subscriber(event)
            except Exception as e:
                log.warning("%s subscriber failed: %s", type(event).__name__, e)

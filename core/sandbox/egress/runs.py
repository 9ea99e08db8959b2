"""One sandbox run at the gate (its identity and what was refused during it): here, apart from
the gate, so the package index can name it without importing the gate (no import cycle)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from chat_approvals.core.models import SubjectKind
from chat_approvals.core.sandbox.egress.backend import GrantsBackend

MAX_REFUSALS_PER_RUN = 50  # recorded ones; a looping script must not flood the store


@dataclass(frozen=True)
class Blocked:
    kind: SubjectKind
    name: str
    port: int | None
    url: str | None

    @property
    def subject(self) -> str:
        return self.name if self.kind == "site" else f"package:{self.name}"


@dataclass
class Run:
    """One sandbox run's identity at the gate and what the gate refused during it."""

    token: str
    user: str
    chat: str
    turn_id: str
    backend: GrantsBackend
    refused: list[Blocked] = field(default_factory=list)  # approvable: recorded for R3
    denied: list[str] = field(default_factory=list)  # operator policy: no approval can change it
    active: int = 0  # connections open through the gate right now
    closed: bool = False
    uid: int | None = None  # set by the sandbox: only a peer with this uid (SO_PEERCRED) may use the token
    tasks: set[asyncio.Task[None]] = field(default_factory=set)  # its open connections, ended with the run
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def username(self) -> str:
        return f"run-{self.token}"

    def usable_by(self, source: object) -> bool:
        """A token bound to a run's uid works only from that uid's connection to the unix socket, so
        a token leaked to another run (or read off by anyone on TCP) carries no grants."""
        if self.uid is None:
            return True
        return isinstance(source, tuple) and len(source) == 2 and source[0] == "unix" and source[1] == self.uid

    def blocked_subjects(self) -> list[str]:
        with self._lock:
            return list(dict.fromkeys(b.subject for b in self.refused))

    def denied_subjects(self) -> list[str]:
        with self._lock:
            return list(dict.fromkeys(self.denied))

    def _note_refused(self, b: Blocked) -> bool:
        """True when this subject is new for the run (so it is recorded once, not per connection)."""
        with self._lock:
            if any(x.kind == b.kind and x.name == b.name for x in self.refused):
                return False
            if len(self.refused) >= MAX_REFUSALS_PER_RUN:
                return False
            self.refused.append(b)
            return True

    def _note_denied(self, subject: str) -> None:
        with self._lock:
            if subject not in self.denied:
                self.denied.append(subject)

"""What the gate needs from the rest of the system: two async calls, as a Protocol.

The gate is tested against an in-memory fake; in the server the grant book (`core.grants.GrantBook`,
handed out as `Approvals.gate_backend`) fits it. `granted_names` is optional (the index lists
approved packages when the backend has it).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from chat_approvals.core.models import Refusal, SubjectKind


@runtime_checkable
class GrantsBackend(Protocol):
    async def is_allowed(
        self, *, user: str, chat: str, kind: SubjectKind, name: str, turn_id: str | None = None
    ) -> bool:
        """The user's live grants for that chat, asked on every connection (so a revoke bites next time)."""
        ...

    async def record_refusal(self, refusal: Refusal) -> bool:
        """Write one refusal for the turn, so the approval tool (R3) can name it."""
        ...


GateBackend = GrantsBackend  # the name the architecture notes use

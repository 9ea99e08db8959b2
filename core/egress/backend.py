"""What the gate needs from the rest of the system: two async calls, as a Protocol.

The gate is tested against an in-memory fake; in the server the facade (`core.approvals.Approvals`)
fits it through `ApprovalsBackend`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from core.models import Refusal, SubjectKind

if TYPE_CHECKING:
    from core.approvals import Approvals


@runtime_checkable
class GrantsBackend(Protocol):
    async def is_allowed(self, *, user: str, chat: str, kind: SubjectKind, name: str) -> bool:
        """The user's live grants for that chat, asked on every connection (so a revoke bites next time)."""
        ...

    async def record_refusal(self, refusal: Refusal) -> bool:
        """Write one refusal for the turn, so the approval tool (R3) can name it."""
        ...


class ApprovalsBackend:
    """Adapter: the facade already has exactly these two methods; this keeps the type narrow."""

    def __init__(self, approvals: Approvals) -> None:
        self._a = approvals

    async def is_allowed(self, *, user: str, chat: str, kind: SubjectKind, name: str) -> bool:
        return await self._a.is_allowed(user=user, chat=chat, kind=kind, name=name)

    async def record_refusal(self, refusal: Refusal) -> bool:
        return await self._a.record_refusal(refusal)

    async def granted_names(self, *, user: str, chat: str, kind: SubjectKind) -> list[str]:
        return sorted({g.name for g in await self._a.grants(user=user, chat=chat) if g.kind == kind})

"""R4: who is asking, in which chat, and whether a person can answer. Set by the server.

The context travels in Strands' `invocation_state` (which the SDK does not persist, so the
server passes it again on every call, including the resume) and is never built from model
arguments. The SDK mutates the dict it is given, so every call gets a fresh one.

Beside it travels a `ToolAccess`: all a model-facing tool may do with the rest of the system
(ask the gate's questions, read this turn's refusals). Never the facade.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from chat_approvals.core.models import ApprovalCard, Refusal, SubjectKind

_KEY = "chat_approvals.request"
_ACCESS = "chat_approvals.tool_access"


@dataclass(frozen=True)
class RequestContext:
    user: str
    chat: str
    platform: str
    turn_id: str
    can_ask_human: bool
    approved_sites: frozenset[str] = frozenset()
    approved_packages: frozenset[str] = frozenset()
    approved_tools: frozenset[str] = frozenset()  # grants of kind tool: gated tools that run without a card
    resume_card: ApprovalCard | None = None
    # On a resume: the claim's fencing token (1 for the first attempt, 2 after a dead worker's
    # lease lapsed and another worker claimed the card...). A worker killed after a side effect
    # and before the resume is marked done may be resumed again; a tool can key its side effect
    # on (resume_card.card_id, resume_attempt) to tell a retry from a first attempt.
    resume_attempt: int | None = None
    user_name: str | None = None  # the platform's display name, shown on the card ("Requested by")


@runtime_checkable
class ToolAccess(Protocol):
    """What a tool may reach: the egress gate's backend calls, and this turn's refusals."""

    async def is_allowed(
        self, *, user: str, chat: str, kind: SubjectKind, name: str, turn_id: str | None = None
    ) -> bool: ...

    async def record_refusal(self, refusal: Refusal) -> bool: ...

    async def granted_names(
        self, *, user: str, chat: str, kind: SubjectKind, turn_id: str | None = None
    ) -> list[str]: ...

    async def refusals(self, chat: str, turn_id: str) -> list[Refusal]: ...


class ScopedAccess:
    """A `ToolAccess` over a wider object (the grant book): exposes the four calls and nothing
    else, so a tool cannot apply or revoke grants."""

    def __init__(self, inner: ToolAccess) -> None:
        self._inner = inner

    async def is_allowed(
        self, *, user: str, chat: str, kind: SubjectKind, name: str, turn_id: str | None = None
    ) -> bool:
        return await self._inner.is_allowed(user=user, chat=chat, kind=kind, name=name, turn_id=turn_id)

    async def record_refusal(self, refusal: Refusal) -> bool:
        return await self._inner.record_refusal(refusal)

    async def granted_names(self, *, user: str, chat: str, kind: SubjectKind, turn_id: str | None = None) -> list[str]:
        return await self._inner.granted_names(user=user, chat=chat, kind=kind, turn_id=turn_id)

    async def refusals(self, chat: str, turn_id: str) -> list[Refusal]:
        return await self._inner.refusals(chat, turn_id)


def invocation_state(ctx: RequestContext, access: object) -> dict[str, Any]:
    return {_KEY: ctx, _ACCESS: access}


def context_of(state: dict[str, Any] | None) -> RequestContext | None:
    ctx = (state or {}).get(_KEY)
    return ctx if isinstance(ctx, RequestContext) else None


def raw_access_of(state: dict[str, Any] | None) -> object:
    """Whatever the server put beside the context (a tool checks the shape it needs)."""
    return (state or {}).get(_ACCESS)


def tool_access_of(state: dict[str, Any] | None) -> ToolAccess | None:
    access = raw_access_of(state)
    if type(access) is ScopedAccess:  # what bootstrap hands every turn: no Protocol check (slow) needed
        return access
    return access if isinstance(access, ToolAccess) else None

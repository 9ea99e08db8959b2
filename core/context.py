"""R4: who is asking, in which chat, and whether a person can answer. Set by the server.

The context travels in Strands' `invocation_state` (which the SDK does not persist, so the
server passes it again on every call, including the resume) and is never built from model
arguments. The SDK mutates the dict it is given, so every call gets a fresh one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.models import ApprovalCard

if TYPE_CHECKING:
    from core.approvals import Approvals

_KEY = "chat_approvals.request"
_SERVICES = "chat_approvals.services"


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


def invocation_state(ctx: RequestContext, services: Approvals) -> dict[str, Any]:
    return {_KEY: ctx, _SERVICES: services}


def context_of(state: dict[str, Any] | None) -> RequestContext | None:
    ctx = (state or {}).get(_KEY)
    return ctx if isinstance(ctx, RequestContext) else None


def services_of(state: dict[str, Any] | None) -> Approvals | None:
    return (state or {}).get(_SERVICES)

"""The durable rows: the pointer (R8), a grant (R14), a refusal (R3), an object's reference."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from chat_approvals.core.models.base import Strict
from chat_approvals.core.models.cards import ApprovalCard, SubjectKind, Vote

PointerState = Literal["pending", "claimed", "done", "expired"]


class ObjectRef(Strict):
    key: str
    size: int
    sha256: str


class Pointer(Strict):
    """R8: the durable record of the one open request of a chat."""

    chat: str
    card_id: str
    secret_hash: str
    owner: str
    state: PointerState
    expires_at: float  # logical expiry: the time shown on the card
    ttl: float  # physical expiry: when the sweep may delete the row
    claim_count: int = 0
    worker: str | None = None
    lease_until: float | None = None
    resume_deadline: float | None = None
    snapshot: ObjectRef
    card: ApprovalCard
    card_location: dict[str, str] | None = None
    answer_key: str | None = None
    votes: list[Vote] = Field(default_factory=list)  # approvals so far when the card needs a quorum
    # Server-side only: the SDK's own ids are deterministic and never reach a client.
    sdk_interrupt_id: str
    tool_use_id: str
    turn_id: str
    created_at: float
    # W3C trace context (traceparent, tracestate) of the turn that paused: the resumed run's span
    # links to it. Empty when tracing is off.
    trace_context: dict[str, str] | None = None
    # Which agent factory paused the turn (`--agent module:function`, or "built-in"): a resume on
    # another one is refused (core/protocol/resume.py). None: a row written before it was recorded.
    agent: str | None = None


class Grant(Strict):
    """R14: one approved site, package or tool for one user in one chat."""

    user: str
    chat: str
    kind: SubjectKind
    name: str
    card_id: str
    created_at: float
    expires_at: float
    turn_id: str | None = None  # a `once` grant: it counts only in this turn

    @property
    def revoke_subject(self) -> str:
        """What a Revoke button or a revoke command names for this grant: `tool:NAME` for a tool
        (a tool name could read as a host), else the host or package."""
        return f"tool:{self.name}" if self.kind == "tool" else self.name


class Refusal(Strict):
    """A download the egress gate refused during one turn (R3 merges these)."""

    chat: str
    turn_id: str
    kind: SubjectKind
    name: str
    port: int | None = None
    url: str | None = None
    at: float

"""What a person is asked to approve: the card, its policy, its subject, its votes, its offer."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import Field

from chat_approvals.core.models.answers import Answer
from chat_approvals.core.models.base import Strict
from chat_approvals.core.models.durations import ApproverMode, duration_seconds

SubjectKind = Literal["site", "package", "tool"]
CardKind = Literal["download", "tool", "question", "batch"]


class CardPolicy(Strict):
    """What the approval policy decided for one card (the strictest rule over its subjects).

    `durations` empty: no choice is offered and a grant lasts `default_seconds`. `once` is a
    grant for this turn only."""

    approvers: ApproverMode = "owner"
    quorum: int = 1
    durations: list[str] = Field(default_factory=list)
    default_duration: str | None = None
    default_seconds: float | None = None  # the grant TTL when no duration is chosen or offered
    rules: list[str] = Field(default_factory=list)  # which rules applied (for the audit trail)
    # Approve with edits (issue 32, tool cards only): False, True (whoever may answer may edit) or
    # "approvers" (only an approver, never the requester).
    edits: bool | Literal["approvers"] = False
    # Who the approvers are, for the card to say ("Needs 2 approvals from Security"): the policy's
    # `[approvers] label`, else the listed ids of the card's own front end (rendered by each). Shown
    # only; who may answer is checked against the lists at click time.
    approvers_label: str | None = Field(default=None, max_length=60)
    approver_ids: list[str] = Field(default_factory=list, max_length=50)
    # Timers (issue 33), in seconds from the card's creation: reminders to those who have not
    # answered, escalation to more approvers (this card's front end's ids) and where they are asked.
    expires_after: float | None = None  # the card's life (capped by the server's maximum)
    remind_after: list[float] = Field(default_factory=list, max_length=10)
    escalate_after: float | None = None
    escalate_to: list[str] = Field(default_factory=list, max_length=50)
    escalate_channel: str | None = None  # Slack: the escalation approvers' channel
    escalate_conversation: str | None = None  # Teams: their conversation

    def grant_seconds(self, chosen: str | None, fallback: float) -> float:
        if chosen is not None:
            return duration_seconds(chosen)
        if self.default_duration is not None:
            return duration_seconds(self.default_duration)
        return self.default_seconds if self.default_seconds is not None else fallback


class Vote(Strict):
    """One approver's approval of a card that needs a quorum (any deny ends the card instead)."""

    user: str
    at: float
    duration: str | None = None
    packages: list[str] | None = None


def call_fingerprint(name: str, tool_input: Any) -> str:
    """SHA-256 of (name, canonical input: sorted keys, no spaces, UTF-8 kept): what binds a `tool`
    card to exactly one call (core/agent/tool_gate.py), here so the renderers can name an edited call."""
    canonical = json.dumps(
        [name, tool_input], sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ToolCall(Strict):
    """The subject of a `tool` card: one gated tool call, bound to the card by its fingerprint
    (SHA-256 of the name and the canonical JSON input, core.tool_gate.fingerprint). `input` is the
    call's input as the model gave it, or a truncated canonical-JSON string when it is too large to
    keep on the card (`truncated`); the fingerprint always covers the whole input."""

    name: str
    input: Any
    fingerprint: str
    truncated: bool = False
    input_schema: dict[str, Any] | None = None  # the tool's own JSON schema, kept when edits are allowed


class Question(Strict):
    """The subject of a `question` card: an interrupt a user's own agent raised (its name and its
    JSON reason, shown as fields), answered with `{"approved": bool, "reason"?: str}`."""

    name: str
    reason: Any


class CardItem(Strict):
    """One interrupt of a step that paused on several at once (a `batch` card, issue 32): a gated
    tool call or a question, answered on the same card as the others. `item_id` is public (the
    card id and the item's number, `c_…:1`: the HTTP `interruptId`); `interrupt_id` and
    `tool_use_id` are the SDK's, kept to resume and to bind the item to its stored call."""

    item_id: str
    kind: Literal["tool", "question"]
    interrupt_id: str
    tool_use_id: str = ""
    tool: ToolCall | None = None
    question: Question | None = None


class ApprovalCard(Strict):
    """What a person is asked to approve. Shown on every front end; never holds the secret.

    `kind` says what: `download` (sites and packages, the approval tool), `tool` (a gated tool
    call, `tool`), or `question` (any other interrupt, `question`)."""

    card_id: str
    chat: str
    owner: str
    platform: str
    reason: str
    sites: list[str]
    urls: list[str]
    packages: list[str]
    created_at: float
    expires_at: float
    policy: CardPolicy | None = None  # None: no policy file, only the owner answers (today's behaviour)
    kind: CardKind = "download"
    tool: ToolCall | None = None
    question: Question | None = None
    owner_name: str | None = None  # the platform's display name of the owner, when it gave one
    grant_seconds: float | None = None  # how long an approval's grant lasts when no duration is chosen
    items: list[CardItem] = Field(default_factory=list)  # a `batch` card: every interrupt of its step

    def subjects(self) -> list[tuple[SubjectKind, str]]:
        """What a grant of this card would cover: sites and packages, or the gated tool's name."""
        if self.tool is not None:
            return [("tool", self.tool.name)]
        if self.items:  # a batch: its tool calls (a question has no subject)
            return [("tool", i.tool.name) for i in self.items if i.tool is not None]
        return [("site", s) for s in self.sites] + [("package", p) for p in self.packages]

    def item_card(self, item: CardItem) -> ApprovalCard:
        """One item of a batch card as a card of its own kind (to show it as a tool or question
        card shows its call); never stored, never answered."""
        return self.model_copy(update={"kind": item.kind, "tool": item.tool, "question": item.question, "items": []})

    def chosen_packages(self, answer: Answer) -> list[str]:
        """The one place the answer's package choice is read: every package on the card when the
        answer names none, else the card's packages the answer names (in the card's order)."""
        return list(self.packages) if answer.packages is None else [p for p in self.packages if p in answer.packages]

    def left_out_packages(self, answer: Answer) -> list[str]:
        chosen = self.chosen_packages(answer)
        return [p for p in self.packages if p not in chosen]


class CardOffer(Strict):
    """A card as handed to a front end to post: the card and its one-time secret."""

    card: ApprovalCard
    secret: str
    votes: list[Vote] = Field(default_factory=list)  # a card shown again: the approvals it has so far
    # A card shown again: where its earlier copy was posted (the pointer's `card_location`, opaque
    # here), so the front end can make that copy read-only; its buttons no longer work (R19).
    replaces: dict[str, str] | None = None

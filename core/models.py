"""Wire and record shapes shared by every layer. Times are float epoch seconds (UTC).

Every model is strict and forbids unknown fields: a shape we did not design is an error,
never a silently dropped key (R15's "nothing else is accepted" applies to all of them).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SubjectKind = Literal["site", "package", "tool"]
CardKind = Literal["download", "tool", "question"]
PointerState = Literal["pending", "claimed", "done", "expired"]
Platform = Literal["http", "cli", "slack", "teams"]


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


MAX_REASON = 500  # a deny reason, as kept and shown (control characters removed first)
ONCE = "once"  # the duration of an approval that makes no grant (this call, or this turn, only)


def clean_reason(text: str) -> str:
    """A deny reason as kept and shown: control characters removed (line breaks become spaces),
    surrounding space trimmed, at most MAX_REASON characters."""
    kept = "".join(" " if c in "\n\r\t" else c for c in text if c in "\n\r\t" or not _is_control(c))
    return " ".join(kept.split()).strip()


def _is_control(c: str) -> bool:
    o = ord(c)
    return o < 32 or 127 <= o < 160 or c in "\u2028\u2029"


class ToolCall(Strict):
    """The subject of a `tool` card: one gated tool call, bound to the card by its fingerprint
    (SHA-256 of the name and the canonical JSON input, core.tool_gate.fingerprint). `input` is the
    call's input as the model gave it, or a truncated canonical-JSON string when it is too large to
    keep on the card (`truncated`); the fingerprint always covers the whole input."""

    name: str
    input: Any
    fingerprint: str
    truncated: bool = False


class Question(Strict):
    """The subject of a `question` card: an interrupt a user's own agent raised (its name and its
    JSON reason, shown as fields), answered with `{"approved": bool, "reason"?: str}`."""

    name: str
    reason: Any


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
    kind: CardKind = "download"
    tool: ToolCall | None = None
    question: Question | None = None

    def subjects(self) -> list[tuple[SubjectKind, str]]:
        """What a grant of this card would cover: sites and packages, or the gated tool's name."""
        if self.tool is not None:
            return [("tool", self.tool.name)]
        return [("site", s) for s in self.sites] + [("package", p) for p in self.packages]


class CardOffer(Strict):
    """A card as handed to a front end to post: the card and its one-time secret."""

    card: ApprovalCard
    secret: str


class Answer(Strict):
    """R15: the only answer shape. `packages`, when given, is a subset of the card's; `duration`
    (with an approval) is one the card offers (`once`: no grant); `reason` (with a deny) is the
    answerer's words, cleaned (clean_reason)."""

    approved: bool
    packages: list[str] | None = None
    duration: str | None = None
    reason: str | None = None


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
    # Server-side only: the SDK's own ids are deterministic and never reach a client.
    sdk_interrupt_id: str
    tool_use_id: str
    turn_id: str
    created_at: float


class Grant(Strict):
    """R14: one approved site, package or tool for one user in one chat."""

    user: str
    chat: str
    kind: SubjectKind
    name: str
    card_id: str
    created_at: float
    expires_at: float

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


AuditKind = Literal[
    "card_created",
    "claim_won",
    "claim_lost",
    "answered",
    "replayed",
    "expired",
    "grant",
    "revoke",
    "refused",
    "turn",
    "reoffered",
    "withdrawn",
]


class AuditEvent(Strict):
    chat: str
    at: float
    kind: AuditKind
    actor: str
    card_id: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class TurnResult(Strict):
    """What one turn (or one resume) ended with.

    answered: the agent replied. awaiting_approval: it paused on a card (`offer`).
    waiting: the chat already has an open request, so no second run was started.
    busy: another turn of this chat is running (on any replica), so this one ran nothing.
    """

    status: Literal["answered", "awaiting_approval", "waiting", "busy"]
    text: str = ""
    offer: CardOffer | None = None


ResumeOutcome = Literal[
    "resumed", "replayed", "in_progress", "expired", "unknown", "forbidden", "invalid", "unauthorized"
]


class ResumeResult(Strict):
    """The outcome of one click.

    `result_json` is the stored result exactly as written when the resume finished, so a
    replay can return it byte for byte. `message` is a plain sentence for a refusal.
    `card` is the card the click was about, when the caller proved it knows the secret.
    """

    outcome: ResumeOutcome
    message: str = ""
    result: TurnResult | None = None
    result_json: str | None = None
    answer: Answer | None = None
    answered_by: str | None = None
    answered_at: float | None = None
    owner: str | None = None
    card: ApprovalCard | None = None
    card_location: dict[str, str] | None = None


class InvalidAnswer(ValueError):
    """Not exactly one well-formed answer: a front end refuses it (`invalid`) and changes nothing."""


ANSWER_STATUSES = ("resolved", "cancelled")
ANSWER_FIELDS = ("approved", "packages", "duration", "reason")


def read_answer(status: object, payload: object) -> Answer:
    """R15 for front ends: accept exactly one well-formed answer, refuse everything else.

    `status` is exactly "resolved" or "cancelled". Resolved: `payload` is an object with exactly
    `approved` (a JSON bool) and, only with `approved: true`, an optional `packages` list of strings
    and an optional `duration` string (whether the card offers it is the resume service's check);
    only with `approved: false`, an optional `reason` string (control characters removed, at most
    MAX_REASON characters; an empty one is no reason). Cancelled (a deny): no payload, or null.
    Anything else raises InvalidAnswer; nothing is guessed.
    """
    if status == "cancelled":
        if payload is not None:
            raise InvalidAnswer("a cancelled answer carries no payload")
        return Answer(approved=False)
    if status != "resolved":
        raise InvalidAnswer(f"status must be one of {', '.join(ANSWER_STATUSES)}")
    if not isinstance(payload, dict):
        raise InvalidAnswer("payload must be an object")
    extra = set(payload) - set(ANSWER_FIELDS)
    if extra:
        raise InvalidAnswer(f"payload has unknown field(s): {', '.join(sorted(map(str, extra)))}")
    approved = payload.get("approved")
    if not isinstance(approved, bool):
        raise InvalidAnswer("payload.approved must be true or false")
    if not approved and "packages" in payload:
        raise InvalidAnswer("payload.packages goes only with an approval")
    if not approved and "duration" in payload:
        raise InvalidAnswer("payload.duration goes only with an approval")
    if approved and "reason" in payload:
        raise InvalidAnswer("payload.reason goes only with a deny")
    fields: dict[str, Any] = {"approved": approved}
    if "packages" in payload:
        packages = payload["packages"]
        if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
            raise InvalidAnswer("payload.packages must be a list of strings")
        fields["packages"] = list(packages)
    if "duration" in payload:
        duration = payload["duration"]
        if not isinstance(duration, str) or not duration or len(duration) > 16:
            raise InvalidAnswer("payload.duration must be a short string")
        fields["duration"] = duration
    if "reason" in payload:
        reason = payload["reason"]
        if not isinstance(reason, str):
            raise InvalidAnswer("payload.reason must be a string")
        cleaned = clean_reason(reason)
        if len(cleaned) > MAX_REASON:
            raise InvalidAnswer(f"payload.reason is longer than {MAX_REASON} characters")
        if cleaned:
            fields["reason"] = cleaned
    return Answer(**fields)


def parse_answer(status: object, payload: object) -> Answer:
    """R15 where an answer must be interpreted (the tool reading the SDK's response), fail closed:
    only `status == "resolved"` with exactly `{"approved": true}` (and, optionally, `"packages"`: a
    list of strings, `"duration"`: a string) approves. Cancelled, unknown status, a missing field,
    an extra field, a non-bool `approved`, or any other shape is a deny (keeping a readable
    `reason`, cleaned and cut to MAX_REASON, so the model hears why)."""
    deny = Answer(approved=False)
    if status != "resolved" or not isinstance(payload, dict):
        return deny
    if payload.get("approved") is False and set(payload) <= {"approved", "reason"}:
        reason = payload.get("reason")
        cleaned = clean_reason(reason)[:MAX_REASON] if isinstance(reason, str) else ""
        return Answer(approved=False, reason=cleaned) if cleaned else deny
    if set(payload) - {"approved", "packages", "duration"} or payload.get("approved") is not True:
        return deny
    duration = payload.get("duration")
    if duration is not None and not isinstance(duration, str):
        return deny
    if "duration" in payload and duration is None:
        return deny
    packages = payload.get("packages")
    if packages is None:
        return Answer(approved=True, duration=duration) if "packages" not in payload else deny
    if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
        return deny
    return Answer(approved=True, packages=list(packages), duration=duration)

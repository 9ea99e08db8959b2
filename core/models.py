"""Wire and record shapes shared by every layer. Times are float epoch seconds (UTC).

Every model is strict and forbids unknown fields: a shape we did not design is an error,
never a silently dropped key (R15's "nothing else is accepted" applies to all of them).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from chat_approvals.core.text import NOT_UNICODE, display_problem, first_invalid, scalar_json

SubjectKind = Literal["site", "package", "tool"]
CardKind = Literal["download", "tool", "question"]
PointerState = Literal["pending", "claimed", "done", "expired"]


# What core.ids.mint_card_id() produces: "c_" + token_urlsafe(16) (22 url-safe base64 characters).
# Here, not in core.ids, so cards/ (which import only core.models) can check ids on the wire.
_CARD_ID = re.compile(r"c_[A-Za-z0-9_-]{22}")


def is_card_id(value: object) -> bool:
    """True only for a string of the minted shape: checked before a card id is used anywhere
    (an object key, a lookup, a log line), so `/`, `..`, NUL or 5,000 characters never get that far."""
    return isinstance(value, str) and _CARD_ID.fullmatch(value) is not None


class Clock(Protocol):
    """The only source of time in core/ and store/ (here so both layers may see it)."""

    def now(self) -> float: ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class StoreFault(Exception):
    """What the store could not do: every front end maps it once (HTTP 503, a Slack ephemeral,
    a Teams card). Its kinds say what happened: `StoreUnavailable` or `BadObject`."""


class StoreUnavailable(StoreFault):
    """The store failed after its retries; nothing was changed by the failed call (an outage:
    trying again may work). Backends raise subclasses."""


class BadObject(StoreFault):
    """A write-once object is not what the protocol expects: its bytes do not match the checksum
    recorded when it was written, or its key was written before. A fact about the data, not an
    outage: trying again reads the same bytes. Backends raise subclasses."""


@dataclass(frozen=True)
class ClaimRead:
    """What a claim was read as (R10): the claim applies only if the row still has this card,
    this secret hash and this claim count."""

    chat: str
    card_id: str
    secret_hash: str
    claim_count: int


@dataclass(frozen=True)
class Fence:
    """Who holds a claimed card (R10-R13): the claim's worker and fencing token. Every write
    made under a claim (renew, finish, chain) applies only while this fence still holds."""

    chat: str
    card_id: str
    worker: str
    token: int


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    @field_validator("*", mode="after")
    @classmethod
    def _valid_text(cls, value: Any) -> Any:
        """R20 by construction: no string a model holds (in lists and dicts too) can fail a later
        write (UTF-8, hashing, JSON); core/text.py."""
        where = first_invalid(value)
        if where is not None:
            raise ValueError(f"{where} {NOT_UNICODE}")
        return value


ApproverMode = Literal["owner", "owner_or_approvers", "approvers"]
APPROVER_MODES: tuple[ApproverMode, ...] = ("owner", "owner_or_approvers", "approvers")  # least to most strict
ONCE = "once"
MAX_REASON = 500
_DURATION = re.compile(r"([1-9][0-9]{0,5})([mhdw])")
_UNIT = {"m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def duration_seconds(text: str) -> float:
    """`once` (0: this turn only) or N followed by m, h, d or w. Raises ValueError otherwise."""
    if text == ONCE:
        return 0.0
    m = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f'{text!r} is not a duration: use "once" or a number with m, h, d or w ("8h", "7d")')
    return int(m.group(1)) * _UNIT[m.group(2)]


def duration_label(d: str) -> str:
    """How a duration reads on a card: `once` is "This turn only"."""
    if d == "once":
        return "This turn only"
    n, unit = int(d[:-1]), {"m": "minute", "h": "hour", "d": "day", "w": "week"}[d[-1]]
    return f"{n} {unit}{'s' if n != 1 else ''}"


def clean_reason(text: str) -> str:
    """A deny reason as kept and shown: control characters removed (line breaks become spaces),
    surrounding space trimmed. Length is checked by the caller, after cleaning."""
    kept = "".join(" " if c in "\n\r\t" else c for c in text if c in "\n\r\t" or not _is_control(c))
    return " ".join(kept.split(" ")).strip()


def _is_control(c: str) -> bool:
    o = ord(c)
    return o < 32 or 127 <= o < 160 or c in "\u2028\u2029"


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
    policy: CardPolicy | None = None  # None: no policy file, only the owner answers (today's behaviour)
    kind: CardKind = "download"
    tool: ToolCall | None = None
    question: Question | None = None

    def subjects(self) -> list[tuple[SubjectKind, str]]:
        """What a grant of this card would cover: sites and packages, or the gated tool's name."""
        if self.tool is not None:
            return [("tool", self.tool.name)]
        return [("site", s) for s in self.sites] + [("package", p) for p in self.packages]

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


class Answer(Strict):
    """R15: the only answer shape. `packages`, when given, is a subset of the card's; `duration`
    (with an approval) is one the card offers; `reason` (with a deny) is the approver's words."""

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
    "vote",
    "refused_answer",
]


class AuditEvent(Strict):
    chat: str
    at: float
    kind: AuditKind
    actor: str
    card_id: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)

    @field_validator("*", mode="before")
    @classmethod
    def _readable(cls, value: Any) -> Any:
        """The trail stays readable (R20): a lone surrogate an older version stored reads as U+FFFD."""
        return scalar_json(value)


class OutboxItem(Strict):
    """One audit event waiting to be delivered to one audit sink (a webhook), written in the same
    write as the event itself. `id` is stable across retries (receivers dedupe by it) and sorts in
    append order; `body` is the exact JSON that is sent (and signed)."""

    sink: str
    id: str
    chat: str
    body: str


@dataclass(frozen=True)
class AuditWrite:
    """An audit event written with the state change it records (store/base.py's compound steps):
    its physical expiry and its outbox items (built in core/protocol/audit.py, one per sink)."""

    event: AuditEvent
    ttl: float
    outbox: tuple[OutboxItem, ...] = ()


@dataclass(frozen=True)
class GrantChange:
    """A grant written (`delete` False) or taken back (`delete` True) with a claim (R14), and its
    audit event: a put's is always written, a delete's only when it removed a row."""

    grant: Grant
    ttl: float
    delete: bool
    audit: AuditWrite


@dataclass(frozen=True)
class SessionWrite:
    """Point the chat's history at object `key` (as RowStore.put_session: never rolled back)."""

    chat: str
    key: str
    seq: float
    ttl: float


@dataclass(frozen=True)
class TurnStart:
    """What a turn starts from, read in the round trip that took the chat's turn lease: nothing
    when the lease was held by someone else (`taken` False)."""

    taken: bool
    pointer: Pointer | None = None
    grants: tuple[Grant, ...] = ()
    session: str | None = None


@dataclass(frozen=True)
class Claimed:
    """A won claim (the pointer as written, its claim_count the fencing token) and the owner's
    live grants in the chat after the claim's grant changes."""

    pointer: Pointer
    grants: tuple[Grant, ...]


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
    "resumed", "vote_recorded", "replayed", "in_progress", "expired", "unknown", "forbidden", "invalid", "unauthorized"
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
    votes: list[Vote] | None = None  # vote_recorded: the approvals so far
    needed: int | None = None  # vote_recorded: the quorum


class AnswerRecord(Strict):
    """The stored answer of a card (an object, write-once). `result_json` is kept as a string so
    a replay returns it byte for byte. R19: a chained card's secret is never stored, only its id."""

    card_id: str
    secret_hash: str
    owner: str
    card: ApprovalCard
    answer: Answer
    answered_by: str
    answered_at: float
    result_json: str
    chained_card_id: str | None = None


class InvalidAnswer(ValueError):
    """Not exactly one well-formed answer: a front end refuses it (`invalid`) and changes nothing."""


ANSWER_STATUSES = ("resolved", "cancelled")
ANSWER_FIELDS = ("approved", "packages", "duration", "reason")


def read_answer(status: object, payload: object) -> Answer:
    """R15 for front ends: accept exactly one well-formed answer, refuse everything else.

    `status` is exactly "resolved" or "cancelled". Resolved: `payload` is an object with exactly
    `approved` (a JSON bool) and, only with `approved: true`, an optional `packages` list of strings
    and an optional `duration` (`once` or N m/h/d/w; whether the card offers it is the resume
    service's check); only with `approved: false`, an optional `reason` string (control characters
    removed, at most 500 characters; an empty one is no reason). Cancelled (a deny): no payload, or
    null. Anything else raises InvalidAnswer; nothing is guessed.
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
    if approved and "reason" in payload:
        raise InvalidAnswer("payload.reason goes only with a deny")
    if not approved and ("packages" in payload or "duration" in payload):
        raise InvalidAnswer("payload.packages and payload.duration go only with an approval")
    fields: dict[str, Any] = {"approved": approved}
    if "packages" in payload:
        packages = payload["packages"]
        if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
            raise InvalidAnswer("payload.packages must be a list of strings")
        fields["packages"] = list(packages)
    if "duration" in payload:
        duration = payload["duration"]
        try:
            duration_seconds(duration)
        except ValueError as e:
            raise InvalidAnswer(f"payload.duration: {e}") from None
        fields["duration"] = duration
    if "reason" in payload:
        fields["reason"] = read_reason(payload["reason"])
    try:
        return Answer(**fields)
    except ValueError as e:  # R20: text that is not valid Unicode (a lone surrogate) is refused too
        raise InvalidAnswer(f"payload: {NOT_UNICODE}") from e


def read_reason(raw: object) -> str | None:
    """A deny reason from the wire: a string, cleaned, at most MAX_REASON characters; empty = none."""
    if not isinstance(raw, str):
        raise InvalidAnswer("payload.reason must be a string")
    reason = clean_reason(raw)
    problem = display_problem(reason, "payload.reason")  # R20: a bidi override would spoof the card's text
    if problem is not None:
        raise InvalidAnswer(problem)
    if len(reason) > MAX_REASON:
        raise InvalidAnswer(f"payload.reason is longer than {MAX_REASON} characters")
    return reason or None


def parse_answer(status: object, payload: object) -> Answer:
    """R15 where an answer must be interpreted (the tool reading the SDK's response), fail closed:
    only `status == "resolved"` with `{"approved": true}` (and, optionally, `"packages"`: a list of
    strings, and `"duration"`) approves. Cancelled, unknown status, a missing field, an extra field,
    a non-bool `approved`, or any other shape is a deny (keeping a deny's readable reason, cleaned
    and cut to MAX_REASON, so the model hears why)."""
    deny = Answer(approved=False)
    if status != "resolved" or not isinstance(payload, dict):
        return deny
    if payload.get("approved") is False and set(payload) <= {"approved", "reason"}:
        reason = payload.get("reason")
        cleaned = clean_reason(reason)[:MAX_REASON].strip() if isinstance(reason, str) else ""
        return Answer(approved=False, reason=cleaned) if cleaned else deny
    try:
        answer = read_answer(status, payload)
    except InvalidAnswer:
        return deny
    return answer if payload.get("approved") is True or not answer.approved else deny

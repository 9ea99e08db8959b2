"""Wire and record shapes shared by every layer. Times are float epoch seconds (UTC).

Every model is strict and forbids unknown fields: a shape we did not design is an error,
never a silently dropped key (R15's "nothing else is accepted" applies to all of them).

The shapes live in small modules by what they describe; every name is re-exported here, so
`chat_approvals.core.models` stays the one face store/ and cards/ import (tests/test_layers.py).
"""

from __future__ import annotations

from chat_approvals.core.models.answers import (
    ANSWER_FIELDS,
    ANSWER_STATUSES,
    Answer,
    InvalidAnswer,
    ItemAnswer,
    parse_answer,
    read_answer,
    read_reason,
)
from chat_approvals.core.models.audit import (
    AuditEvent,
    AuditKind,
    AuditWrite,
    OutboxItem,
)
from chat_approvals.core.models.base import (
    BadObject,
    Clock,
    StoreFault,
    StoreUnavailable,
    Strict,
    SystemClock,
    is_card_id,
)
from chat_approvals.core.models.cards import (
    ApprovalCard,
    CardItem,
    CardKind,
    CardOffer,
    CardPolicy,
    Question,
    SubjectKind,
    ToolCall,
    Vote,
    call_fingerprint,
)
from chat_approvals.core.models.durations import (
    APPROVER_MODES,
    MAX_REASON,
    ONCE,
    ApproverMode,
    clean_reason,
    duration_label,
    duration_seconds,
)
from chat_approvals.core.models.fences import (
    ClaimRead,
    Fence,
)
from chat_approvals.core.models.records import (
    Grant,
    ObjectRef,
    Pointer,
    PointerState,
    Refusal,
)
from chat_approvals.core.models.results import (
    AnswerRecord,
    ResumeOutcome,
    ResumeResult,
    TurnResult,
)
from chat_approvals.core.models.steps import (
    Claimed,
    ClaimWrite,
    GrantChange,
    SessionWrite,
    TurnStart,
)
from chat_approvals.core.models.timers import Timer, TimerKind

__all__ = [
    "ANSWER_FIELDS",
    "ANSWER_STATUSES",
    "APPROVER_MODES",
    "MAX_REASON",
    "ONCE",
    "Answer",
    "AnswerRecord",
    "ApprovalCard",
    "ApproverMode",
    "AuditEvent",
    "AuditKind",
    "AuditWrite",
    "BadObject",
    "CardItem",
    "CardKind",
    "CardOffer",
    "CardPolicy",
    "ClaimRead",
    "ClaimWrite",
    "Claimed",
    "Clock",
    "Fence",
    "Grant",
    "GrantChange",
    "InvalidAnswer",
    "ItemAnswer",
    "ObjectRef",
    "OutboxItem",
    "Pointer",
    "PointerState",
    "Question",
    "Refusal",
    "ResumeOutcome",
    "ResumeResult",
    "SessionWrite",
    "StoreFault",
    "StoreUnavailable",
    "Strict",
    "SubjectKind",
    "SystemClock",
    "Timer",
    "TimerKind",
    "ToolCall",
    "TurnResult",
    "TurnStart",
    "Vote",
    "call_fingerprint",
    "clean_reason",
    "duration_label",
    "duration_seconds",
    "is_card_id",
    "parse_answer",
    "read_answer",
    "read_reason",
]

"""The three kinds of card, in one place: what a paused run is asking (`download`, `tool`,
`question`), which answers each kind takes, what the interrupt is resumed with, and the check
that binds a `tool` card to exactly one call.

- download: our approval tool's interrupt (core/agent/approval_tool.py); sites and packages.
- tool: the tool gate's interrupt (core/agent/tool_gate.py); one gated call, bound by its fingerprint.
  Approve once (`duration: once`, no grant), approve for this chat (a grant of kind `tool`), deny
  (with an optional reason the model is told).
- question: any other interrupt a user's agent raises (its name and JSON reason); resumed with
  `{"approved": bool, "reason"?: str}`.

A step that pauses on several interrupts at once is not offered half-way (`Several`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from strands.interrupt import Interrupt

from chat_approvals.core.agent.approval_tool import INTERRUPT_NAME
from chat_approvals.core.agent.tool_gate import GATE_INTERRUPT, fingerprint, is_gate_reason, tool_call
from chat_approvals.core.models import ONCE, Answer, ApprovalCard, CardKind, Question, ToolCall


@dataclass(frozen=True)
class Draft:
    """What the card will ask, read from the one interrupt of a paused step."""

    kind: CardKind
    interrupt_id: str
    tool_use_id: str
    reason: str = ""
    sites: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    tool: ToolCall | None = None
    question: Question | None = None


@dataclass(frozen=True)
class Several:
    """More than one interrupt in one step: this front end answers one card at a time."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class Unreadable:
    """Our own interrupt with a reason we did not write: never offered."""

    name: str


def _json_safe(value: Any) -> Any:
    """A user's interrupt reason as JSON (the SDK requires it to be JSON already; be sure)."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return str(value)


def draft_of(interrupts: list[Interrupt]) -> Draft | Several | Unreadable:
    if len(interrupts) != 1:
        return Several(tuple(i.name for i in interrupts))
    i = interrupts[0]
    if i.name == INTERRUPT_NAME:
        r = i.reason
        if not isinstance(r, dict):
            return Unreadable(i.name)
        return Draft(
            kind="download",
            interrupt_id=i.id,
            tool_use_id=str(r.get("tool_use_id", "")),
            reason=str(r.get("reason", "")),
            sites=tuple(str(s) for s in r.get("sites", [])),
            urls=tuple(str(u) for u in r.get("urls", [])),
            packages=tuple(str(p) for p in r.get("packages", [])),
        )
    if i.name == GATE_INTERRUPT and is_gate_reason(i.reason):
        r = i.reason
        call = tool_call(str(r["tool"]), r.get("input"))
        if call.fingerprint != r.get("fingerprint"):
            return Unreadable(i.name)
        return Draft(
            kind="tool",
            interrupt_id=i.id,
            tool_use_id=str(r.get("tool_use_id", "")),
            reason=f"run {call.name}",
            tool=call,
        )
    return Draft(
        kind="question",
        interrupt_id=i.id,
        tool_use_id="",
        reason=f"answer {i.name}",
        question=Question(name=str(i.name), reason=_json_safe(i.reason)),
    )


def answer_problem(card: ApprovalCard, answer: Answer) -> str | None:
    """Why this answer does not fit this card (the click is `invalid`, nothing changes), or None.
    Durations: those the card's policy offers; a tool card also takes `once` (no grant)."""
    offered = list(card.policy.durations) if card.policy is not None else []
    if card.kind == "download":
        if answer.packages is not None and not set(answer.packages) <= set(card.packages):
            return "Invalid answer: the packages chosen are not all on the card."
        if answer.duration is not None and answer.duration not in offered:
            return "Invalid answer: that duration is not one this card offers."
        return None
    if answer.packages is not None:
        return "Invalid answer: this card asks about no packages."
    if card.kind == "tool" and answer.duration not in (None, ONCE, *offered):
        return "Invalid answer: that duration is not one this card offers."
    if card.kind == "question" and answer.duration is not None:
        return "Invalid answer: this card offers no duration."
    return None


def interrupt_response(card: ApprovalCard, answer: Answer) -> dict[str, Any]:
    """What the paused interrupt is resumed with; never null (null re-raises the interrupt)."""
    if card.kind == "question":
        out: dict[str, Any] = {"approved": answer.approved}
        if answer.reason:
            out["reason"] = answer.reason
        return out
    return answer.model_dump(exclude_none=True)


def grants_to_write(card: ApprovalCard, answer: Answer) -> list[tuple[str, str]]:
    """(kind, name) of the grants an approval writes: every site and the chosen packages of a
    download card; the tool of a tool card approved for this chat; nothing for a question."""
    if not answer.approved or card.kind == "question":
        return []
    if card.kind == "tool":
        return [("tool", card.tool.name)] if card.tool is not None and answer.duration != ONCE else []
    chosen = set(card.packages if answer.packages is None else answer.packages)
    return [(k, n) for k, n in card.subjects() if k == "site" or n in chosen]


def binds(card: ApprovalCard, tool_use_id: str, interrupt_id: str, snapshot: dict[str, Any]) -> bool:
    """A `tool` card answers only the interrupt whose call it shows: in the stored run, the paused
    interrupt's reason carries the card's fingerprint and tool use, and the assistant message's
    tool use of that id has that very name and input. Other kinds: always true."""
    if card.kind != "tool" or card.tool is None:
        return True
    state = (snapshot.get("data") or {}).get("interrupt_state") or {}
    found = (state.get("interrupts") or {}).get(interrupt_id)
    if not isinstance(found, dict) or found.get("name") != GATE_INTERRUPT:
        return False
    reason = found.get("reason")
    if not isinstance(reason, dict) or not is_gate_reason(reason) or reason.get("fingerprint") != card.tool.fingerprint:
        return False
    if reason.get("tool_use_id") != tool_use_id:
        return False
    pending = (state.get("pending_tool_execution") or {}).get("assistant_message") or {}
    uses = [b["toolUse"] for b in pending.get("content", []) if isinstance(b, dict) and "toolUse" in b]
    use = next((u for u in uses if u.get("toolUseId") == tool_use_id), None)
    return use is not None and fingerprint(str(use.get("name")), use.get("input")) == card.tool.fingerprint

"""The resume service's checks before any claim (R9, R15, R17's approvers, R19's agent), the
refusals it answers with, and the answer a quorum gives. Pure: nothing here writes."""

from __future__ import annotations

from typing import Any

from chat_approvals.core.agent.tool_gate import fingerprint
from chat_approvals.core.models import Answer, ApprovalCard, CardItem, Pointer, ResumeResult, Vote, duration_seconds
from chat_approvals.core.protocol.policy import ApproverCheck, may_answer
from chat_approvals.core.protocol.timers import is_escalated
from chat_approvals.core.settings import BUILT_IN_AGENT, Settings

UNKNOWN = "Unknown approval card: it may have been replaced, or the link is wrong."
IN_PROGRESS = "This approval is already being resumed."
EXPIRED = "This approval card has expired; ask the agent again."
CAP_REACHED = "This approval was denied and expired: resuming it failed too many times."
INVALID = "Invalid answer: send exactly one response entry with a well-formed payload."
INVALID_PACKAGES = "Invalid answer: the packages chosen are not all on the card."
INVALID_DURATION = "Invalid answer: that duration is not one this card offers."
APPROVER_MUST_ANSWER = "An approver must answer this: the person who asked may not approve their own request."
APPROVER_ONLY = "An approver must answer this, and you are not one of the approvers."
OWNER_OR_APPROVER = "Only the person who asked, or an approver, may answer this approval."
EDIT_APPROVERS_ONLY = "Only an approver (not the person who asked) may approve this call with edits."
NOT_BOUND = "This approval no longer matches the call it shows; nothing ran. Ask the agent again."


class NotBound(Exception):
    """A tool card whose stored run does not hold the call the card shows (card_kinds.binds)."""


def answered_detail(card: ApprovalCard, answer: Answer) -> dict[str, Any]:
    """The audit trail's record of an answer: what was answered, and how (with the deny reason)."""
    detail: dict[str, Any] = {"kind": card.kind, "approved": answer.approved, "packages": answer.packages}
    if card.tool is not None:
        detail.update(tool=card.tool.name, fingerprint=card.tool.fingerprint)
    if card.question is not None:
        detail.update(question=card.question.name)
    if answer.duration is not None:
        detail["duration"] = answer.duration
    if answer.reason is not None:
        detail["reason"] = answer.reason
    if answer.edited_input is not None and card.tool is not None:  # approved with edits (issue 32)
        detail.update(
            edited=True,
            proposed_input=card.tool.input,
            approved_input=answer.edited_input,
            approved_fingerprint=fingerprint(card.tool.name, answer.edited_input),
        )
    if card.items:  # a batch card: what each item was answered (issue 32)
        detail["items"] = [item_detail(i, answer) for i in card.items]
    return detail


def item_detail(item: CardItem, answer: Answer) -> dict[str, Any]:
    mine = answer.for_item(item.item_id, takes_duration=item.kind == "tool")
    out: dict[str, Any] = {"item": item.item_id, "kind": item.kind, "approved": mine.approved}
    if item.tool is not None:
        out.update(tool=item.tool.name, fingerprint=item.tool.fingerprint)
    if item.question is not None:
        out["question"] = item.question.name
    if mine.duration is not None:
        out["duration"] = mine.duration
    if mine.reason is not None:
        out["reason"] = mine.reason
    if mine.edited_input is not None and item.tool is not None:
        out.update(
            edited=True,
            proposed_input=item.tool.input,
            approved_input=mine.edited_input,
            approved_fingerprint=fingerprint(item.tool.name, mine.edited_input),
        )
    return out


def forbidden_message(owner: str) -> str:
    return f"Only {owner}, whose turn this is, may answer this approval."


def quorum_answer(card: ApprovalCard, votes: list[Vote], last: Answer) -> Answer:
    """The approval a quorum gives: the packages every voter left chosen, the shortest duration
    any of them chose (a voter who chose none takes the card's default)."""
    chosen: set[str] | None = None
    for v in votes:
        if v.packages is not None:
            chosen = set(v.packages) if chosen is None else chosen & set(v.packages)
    default = card.policy.default_duration if card.policy is not None else None
    durations = [d for d in (v.duration or default for v in votes) if d is not None]
    return Answer(
        approved=True,
        packages=None if chosen is None else [p for p in card.packages if p in chosen],
        duration=min(durations, key=duration_seconds) if durations else last.duration,
    )


def other_agent(p: Pointer, settings: Settings) -> str | None:
    """A turn resumes only on the agent factory that paused it: its snapshot holds that agent's
    conversation and tool calls, and another factory's tools would not match them. Refused before
    any claim, so the card stays answerable by a process with the right `--agent`."""
    if p.agent is None or p.agent == settings.agent_name:  # None: paused before this was recorded
        return None
    return (
        f"this card was paused by {_agent_label(p.agent)}, but this process runs {_agent_label(settings.agent_name)}: "
        "resume it with " + (f"--agent {p.agent}" if p.agent != BUILT_IN_AGENT else "no --agent")
    )


def _agent_label(name: str) -> str:
    return "the built-in agent (no --agent)" if name == BUILT_IN_AGENT else f"--agent {name}"


async def who_may_answer(
    approvers: ApproverCheck, card: ApprovalCard, owner: str, user: str, *, now: float | None = None
) -> ResumeResult | None:
    """None when `user` may answer the card, else the refusal (nothing changes). With `now`: once
    the card is escalated (issue 33), its escalation approvers may answer it too."""
    refused = await _who_may_answer(approvers, card, owner, user)
    if refused is None or now is None or not is_escalated(card, now) or card.policy is None:
        return refused
    check = getattr(approvers, "is_one_of", None)  # bots/approvers.py's directory has it
    if check is not None and user != owner and await check(user, card.policy.escalate_to):
        return None
    return refused


async def _who_may_answer(approvers: ApproverCheck, card: ApprovalCard, owner: str, user: str) -> ResumeResult | None:
    policy = card.policy
    if policy is None or policy.approvers == "owner":
        if user == owner:
            return None
        return ResumeResult(outcome="forbidden", message=forbidden_message(owner), owner=owner, card=card)
    approver = await approvers.is_approver(user)
    if may_answer(policy.approvers, owner=owner, user=user, approver=approver):
        return None
    if policy.approvers == "owner_or_approvers":
        message = OWNER_OR_APPROVER
    else:
        message = APPROVER_MUST_ANSWER if user == owner else APPROVER_ONLY
    return ResumeResult(outcome="forbidden", message=message, owner=owner, card=card)


def in_progress(p: Pointer) -> ResumeResult:
    return ResumeResult(outcome="in_progress", message=IN_PROGRESS, owner=p.owner, card=p.card)


def expired(p: Pointer, message: str, answer: Answer | None = None) -> ResumeResult:
    return ResumeResult(
        outcome="expired", message=message, owner=p.owner, card=p.card, card_location=p.card_location, answer=answer
    )

"""The three kinds of card, in one place: what a paused run is asking (`download`, `tool`,
`question`), which answers each kind takes, what the interrupt is resumed with, and the check
that binds a `tool` card to exactly one call.

- download: our approval tool's interrupt (core/agent/approval_tool.py); sites and packages.
- tool: the tool gate's interrupt (core/agent/tool_gate.py); one gated call, bound by its fingerprint.
  Approve once (`duration: once`, no grant), approve for this chat (a grant of kind `tool`), deny
  (with an optional reason the model is told).
- question: any other interrupt a user's agent raises (its name and JSON reason); resumed with
  `{"approved": bool, "reason"?: str}`.

- batch: a step that paused on several interrupts at once (issue 32): one card lists them all as
  `items` (each a tool call or a question) and one resumed run answers every one of them. A step
  with our download interrupt among several is not offered half-way (`Several`): R5's batch rule
  keeps the approval tool alone in its step, so that only happens with a foreign hook.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, best_match
from strands.interrupt import Interrupt

from chat_approvals.core.agent.approval_tool import INTERRUPT_NAME
from chat_approvals.core.agent.tool_gate import GATE_INTERRUPT, fingerprint, is_gate_reason, tool_call
from chat_approvals.core.models import ONCE, Answer, ApprovalCard, CardItem, CardKind, Question, ToolCall


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
class Batch:
    """Several interrupts in one step, each a tool call or a question: one `batch` card."""

    items: tuple[Draft, ...]


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


def draft_of(interrupts: list[Interrupt]) -> Draft | Batch | Several | Unreadable:
    if not interrupts:
        return Several(())
    if len(interrupts) == 1:
        return _draft_one(interrupts[0])
    drafts = [_draft_one(i) for i in interrupts]
    bad = next((d for d in drafts if isinstance(d, Unreadable)), None)
    if bad is not None:
        return bad
    if any(not isinstance(d, Draft) or d.kind == "download" for d in drafts):
        return Several(tuple(i.name for i in interrupts))
    return Batch(tuple(d for d in drafts if isinstance(d, Draft)))


def batch_items(card_id: str, batch: Batch) -> list[CardItem]:
    """The batch card's items, numbered from 1 in the step's order (`c_…:1`, `c_…:2`, …)."""
    return [
        CardItem(
            item_id=f"{card_id}:{n}",
            kind="tool" if d.kind == "tool" else "question",
            interrupt_id=d.interrupt_id,
            tool_use_id=d.tool_use_id,
            tool=d.tool,
            question=d.question,
        )
        for n, d in enumerate(batch.items, start=1)
    ]


def _draft_one(i: Interrupt) -> Draft | Unreadable:
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
    if answer.edited_input is not None:
        return edit_problem(card, answer)
    if card.kind == "batch":
        return _batch_problem(card, answer, offered)
    if answer.items is not None:
        return "Invalid answer: this card has no items to answer one by one."
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


def _batch_problem(card: ApprovalCard, answer: Answer, offered: list[str]) -> str | None:
    """A batch card: every item answered exactly once (or none, one answer for all); per item, a
    duration only where its kind offers one; no packages. A quorum counts whole-card votes."""
    if answer.packages is not None:
        return "Invalid answer: this card asks about no packages."
    if answer.items is not None:
        ids = [a.item for a in answer.items]
        if len(ids) != len(set(ids)) or set(ids) != {i.item_id for i in card.items}:
            return "Invalid answer: answer every item of this card exactly once (or all of them at once)."
        quorum = card.policy.quorum if card.policy is not None else 1
        if quorum > 1:
            return "Invalid answer: this card needs several approvals; approve or deny all of its items at once."
        by_id = {i.item_id: i for i in card.items}
        for a in answer.items:
            if a.approved and a.reason is not None:
                return "Invalid answer: a reason goes only with a deny."
            if a.edited_input is not None:  # an item approved with edits: as a tool card's
                problem = edit_problem(
                    card.item_card(by_id[a.item]).model_copy(update={"policy": card.policy}),
                    Answer(approved=True, duration=a.duration, edited_input=a.edited_input),
                )
                if problem is not None:
                    return problem
            if not a.approved and a.duration is not None:
                return "Invalid answer: a duration goes only with an approval."
    for item in card.items:
        duration = answer.for_item(item.item_id).duration
        if duration is None or (answer.items is None and item.kind == "question"):
            continue  # approve all with a duration: the questions simply take none
        if item.kind == "question":
            return "Invalid answer: a question on this card offers no duration."
        if duration not in (ONCE, *offered):
            return "Invalid answer: that duration is not one this card offers."
    return None


NO_EDITS = "Invalid answer: this card does not take edits (its policy does not allow them)."
EDIT_ONCE = "Invalid answer: an edited approval approves this one call only (no duration)."


def edit_problem(card: ApprovalCard, answer: Answer) -> str | None:
    """An approval with edits (issue 32): a tool card whose policy allows edits, approved once,
    with an input the tool's own schema accepts. Who may edit is the resume service's check."""
    if card.kind != "tool" or card.tool is None or card.policy is None or not card.policy.edits:
        return NO_EDITS
    if card.tool.input_schema is None:
        return NO_EDITS
    if answer.duration not in (None, ONCE):
        return EDIT_ONCE
    return schema_problem(card.tool.input_schema, answer.edited_input)


def schema_problem(schema: dict[str, Any], value: Any) -> str | None:
    """The schema's first complaint about the value, as a sentence (jsonschema's best match), or None."""
    try:
        validator_class = validators.validator_for(schema, default=Draft202012Validator)
        error = best_match(validator_class(schema).iter_errors(value))
    except (SchemaError, ValueError, TypeError, RecursionError) as e:  # a tool spec we cannot use: no edit
        return f"Invalid edit: the tool's input schema cannot be used ({type(e).__name__})."
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the input"
    return f"Invalid edit: {where}: {error.message}"[:500]


def item_answer(item: CardItem, answer: Answer) -> Answer:
    """What one item of a batch card was answered."""
    return answer.for_item(item.item_id, takes_duration=item.kind == "tool")


def interrupt_responses(card: ApprovalCard, answer: Answer, interrupt_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(SDK interrupt id, response) for every interrupt the card answers: one for a card of one
    interrupt, one per item for a batch. One resumed run answers them all."""
    if card.kind != "batch":
        return [(interrupt_id, interrupt_response(card, answer))]
    out: list[tuple[str, dict[str, Any]]] = []
    for item in card.items:
        mine = item_answer(item, answer)
        if item.kind == "question":
            response: dict[str, Any] = {"approved": mine.approved}
            if mine.reason:
                response["reason"] = mine.reason
        else:
            response = mine.model_dump(exclude_none=True)
        out.append((item.interrupt_id, response))
    return out


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
    if card.kind == "batch":  # each approved tool item not approved once
        out: list[tuple[str, str]] = []
        for item in card.items:
            mine = item_answer(item, answer)
            if (
                item.tool is not None
                and mine.approved
                and mine.duration != ONCE
                and ("tool", item.tool.name) not in out
            ):
                out.append(("tool", item.tool.name))
        return out
    if not answer.approved or card.kind == "question":
        return []
    if card.kind == "tool":
        return [("tool", card.tool.name)] if card.tool is not None and answer.duration != ONCE else []
    chosen = set(card.packages if answer.packages is None else answer.packages)
    return [(k, n) for k, n in card.subjects() if k == "site" or n in chosen]


def grant_plan(card: ApprovalCard, answer: Answer) -> tuple[dict[tuple[str, str], str | None], set[tuple[str, str]]]:
    """What an answer does to the card's grants: the subjects to write (each with the duration
    chosen for it) and those approved once (nothing written, nothing taken back); every other
    subject of the card has its stored row removed."""
    if answer.edited_input is not None:  # an edited approval approves one call: never a grant
        return {}, ({("tool", card.tool.name)} if answer.approved and card.tool is not None else set())
    if card.kind != "batch":
        writes = {s: answer.duration for s in grants_to_write(card, answer)}
        once = {("tool", card.tool.name)} if answer.approved and card.tool is not None else set()
        return writes, once - set(writes)
    plan: dict[tuple[str, str], str | None] = {}
    kept: set[tuple[str, str]] = set()
    for item in card.items:
        mine = item_answer(item, answer)
        if item.tool is None or not mine.approved:
            continue
        subject = ("tool", item.tool.name)
        if mine.duration == ONCE or mine.edited_input is not None:  # an edit approves one call
            kept.add(subject)
        elif subject not in plan:
            plan[subject] = mine.duration
    return plan, kept - set(plan)


def _calls(card: ApprovalCard, tool_use_id: str, interrupt_id: str) -> list[tuple[str, str, str]]:
    """(fingerprint, tool use id, interrupt id) of each call the card shows: a tool card's one, a
    batch's tool items'; none for other kinds."""
    if card.kind == "batch":
        return [(i.tool.fingerprint, i.tool_use_id, i.interrupt_id) for i in card.items if i.tool is not None]
    if card.kind == "tool" and card.tool is not None:
        return [(card.tool.fingerprint, tool_use_id, interrupt_id)]
    return []


def shows_calls(card: ApprovalCard) -> bool:
    """Does `binds` read the stored run for this card? Otherwise it holds whatever the snapshot
    says, and the snapshot need not be read for it."""
    return bool(_calls(card, "", ""))


def binds(card: ApprovalCard, tool_use_id: str, interrupt_id: str, snapshot: dict[str, Any]) -> bool:
    """A `tool` card answers only the interrupt whose call it shows: in the stored run, the paused
    interrupt's reason carries the card's fingerprint and tool use, and the assistant message's
    tool use of that id has that very name and input; a batch card, each of its tool items' own
    call. Other kinds: always true."""
    return all(_binds_call(fp, use, intr, snapshot) for fp, use, intr in _calls(card, tool_use_id, interrupt_id))


def _binds_call(fp: str, tool_use_id: str, interrupt_id: str, snapshot: dict[str, Any]) -> bool:
    state = (snapshot.get("data") or {}).get("interrupt_state") or {}
    found = (state.get("interrupts") or {}).get(interrupt_id)
    if not isinstance(found, dict) or found.get("name") != GATE_INTERRUPT:
        return False
    reason = found.get("reason")
    if not isinstance(reason, dict) or not is_gate_reason(reason) or reason.get("fingerprint") != fp:
        return False
    if reason.get("tool_use_id") != tool_use_id:
        return False
    pending = (state.get("pending_tool_execution") or {}).get("assistant_message") or {}
    uses = [b["toolUse"] for b in pending.get("content", []) if isinstance(b, dict) and "toolUse" in b]
    use = next((u for u in uses if u.get("toolUseId") == tool_use_id), None)
    return use is not None and fingerprint(str(use.get("name")), use.get("input")) == fp

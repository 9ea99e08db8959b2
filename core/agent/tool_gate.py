"""Tool-name approvals: Strands' `HumanInTheLoop` intervention, deciding by tool name, with the
approval kept as a durable card and a revocable grant of kind `tool` (not the intervention's
in-memory trust).

`--confirm-tools NAMES` uses the intervention's own syntax, read as "these need a person":
comma-separated names, `*` for every tool, `!name` to leave one out (`*,!read_file`), and, beyond
the intervention, shell-style globs (`delete_*`). The names are resolved against the agent's
tools once, at start-up (a name that matches no tool stops the server), and the intervention is
given the matching tools as `!name` entries after `*`: every other tool runs freely, and a gated
tool is never "trusted" by the intervention, so our grants decide instead.

The gate runs as a before-tool-call hook, BEFORE the tool body, so an approved body runs once.
It pauses with one interrupt per gated call whose reason carries the call (name, input,
fingerprint); the turn runner turns that into a `tool` card. On the resume the SDK runs the hook
again and `interrupt()` returns the answer: the call proceeds only when the answer approves AND the
card being answered is this call's (same fingerprint); a deny cancels the call with a text the
model can act on, quoting the answerer's reason.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable
from typing import Any

from strands import Agent
from strands.hooks import AfterToolCallEvent, BeforeToolCallEvent
from strands.interventions import Deny, InterventionAction, Proceed, Transform
from strands.vended_interventions.hitl import HumanInTheLoop

import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.agent.batch_rule import APPROVAL_TOOL
from chat_approvals.core.agent.context import context_of
from chat_approvals.core.agent.strands_compat import add_interventions, added_interventions, own_interventions
from chat_approvals.core.models import ApprovalCard, ToolCall, call_fingerprint, parse_answer

GATE_INTERRUPT = HumanInTheLoop.name  # "strands:human-in-the-loop": the intervention's own name
REASON_KIND = "chat-approvals:tool"  # marks the reason our gate writes (a user's own HITL writes a string)
MAX_CARD_INPUT = 16 * 1024  # canonical JSON characters kept on the card; the fingerprint covers all
_ENTRY = re.compile(r"^!?[A-Za-z0-9_.*?\[\]-]{1,128}$")


class ConfirmToolsError(ValueError):
    """`--confirm-tools` names something no tool of the agent is: the server does not start."""


def parse_names(spec: str | Iterable[str] | None) -> list[str]:
    """`write_table,delete_*` or `*,!read_file` (or a list of entries) -> entries, in order."""
    if spec is None:
        return []
    raw = spec.split(",") if isinstance(spec, str) else [p for s in spec for p in str(s).split(",")]
    entries = [e.strip() for e in raw if e.strip()]
    for e in entries:
        if not _ENTRY.match(e) or e == "!":
            raise ConfirmToolsError(f"--confirm-tools: {e!r} is not a tool name, a glob or !name")
    return entries


def resolve(entries: list[str], tool_names: Iterable[str]) -> frozenset[str]:
    """The agent's tools that need a person. Every entry must match at least one of its tools
    (`*` included); `!entries` are taken out after. The approval tool is never gated (asking to ask
    would loop), and naming it is an error."""
    names = sorted(set(tool_names) - {APPROVAL_TOOL})
    gated: set[str] = set()
    left_out: set[str] = set()
    for entry in entries:
        negated = entry.startswith("!")
        pattern = entry[1:] if negated else entry
        if pattern == APPROVAL_TOOL:
            raise ConfirmToolsError(f"--confirm-tools: {APPROVAL_TOOL} asks the user itself and cannot be gated")
        matched = {n for n in names if fnmatch.fnmatchcase(n, pattern)}
        if not matched:
            have = ", ".join(names) or "none"
            raise ConfirmToolsError(f"--confirm-tools: {entry!r} matches no tool of the agent (its tools: {have})")
        (left_out if negated else gated).update(matched)
    return frozenset(gated - left_out)


def canonical_json(value: Any) -> str:
    """One spelling per JSON value: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def fingerprint(name: str, tool_input: Any) -> str:
    """SHA-256 of (name, canonical input): what binds a `tool` card to exactly one call."""
    return call_fingerprint(name, tool_input)


def tool_call(name: str, tool_input: Any) -> ToolCall:
    """The card's subject: the input kept as given when small, else cut (the fingerprint is whole)."""
    text = canonical_json(tool_input)
    if len(text) <= MAX_CARD_INPUT:
        return ToolCall(name=name, input=tool_input, fingerprint=fingerprint(name, tool_input))
    return ToolCall(
        name=name, input=text[: MAX_CARD_INPUT - 1] + "…", fingerprint=fingerprint(name, tool_input), truncated=True
    )


def draft_reason(name: str, tool_input: Any, tool_use_id: str) -> dict[str, Any]:
    """The interrupt's reason: JSON only (it goes into the snapshot)."""
    return {
        "kind": REASON_KIND,
        "tool": name,
        "input": tool_input,
        "fingerprint": fingerprint(name, tool_input),
        "tool_use_id": tool_use_id,
    }


def is_gate_reason(reason: Any) -> bool:
    return isinstance(reason, dict) and reason.get("kind") == REASON_KIND and isinstance(reason.get("tool"), str)


def card_holds_call(card: ApprovalCard | None, fp: str, tool_use_id: str) -> bool:
    """The card being answered shows this very call: a tool card of this fingerprint, or a batch
    card with an item of this fingerprint and tool use (issue 32)."""
    if card is None:
        return False
    if card.kind == "batch":
        return any(i.tool is not None and i.tool.fingerprint == fp and i.tool_use_id == tool_use_id for i in card.items)
    return card.tool is not None and card.tool.fingerprint == fp


class ToolGate(HumanInTheLoop):
    """Strands' HumanInTheLoop, configured from `--confirm-tools`, with the answer read from a
    durable card (see the module docstring)."""

    def __init__(self, gated: frozenset[str]) -> None:
        # The intervention's own syntax: everything runs freely except the `!` entries, which
        # always ask and can never be trusted in memory (grants are consulted instead).
        super().__init__(allowed_tools=["*", *(f"!{n}" for n in sorted(gated))])
        self.gated = gated
        self.edited: dict[str, str] = {}  # toolUseId -> what the model is told with that call's result

    async def before_tool_call(self, event: BeforeToolCallEvent, **kwargs: Any) -> InterventionAction:
        name = event.tool_use["name"]
        if name not in self.gated or event.cancel_tool:
            return Proceed()  # not gated, or already cancelled (R5's batch rule): nothing to ask
        ctx = context_of(event.invocation_state)
        if ctx is None:
            return Deny(reason=wording.tool_no_context(name))  # R4: no server context, no approval
        tool_input = event.tool_use.get("input", {})
        reason = draft_reason(name, tool_input, event.tool_use["toolUseId"])
        answered_here = card_holds_call(ctx.resume_card, reason["fingerprint"], reason["tool_use_id"])
        # The card being answered decides its own calls: a batch item approved for the chat writes
        # a grant that must not run the item of the same tool that was denied (issue 32).
        if name in ctx.approved_tools and not answered_here:
            return Proceed(reason="a grant of kind tool in this chat")
        if not ctx.can_ask_human:
            return Deny(reason=wording.tool_unattended(name))  # R6
        response = event.interrupt(self.name, reason=reason)  # raises until answered (R1)
        if not answered_here:
            # An answer that is not for this very call (R2's safe mistake): never run on it.
            return Deny(reason=wording.tool_denied(name, None))
        answer = parse_answer("resolved", response)
        if answer.approved and answer.edited_input is not None:
            # Approved with edits (issue 32): exactly the edited input runs, and the model is told.
            edited = dict(answer.edited_input)
            self.edited[event.tool_use["toolUseId"]] = wording.tool_edited(name, tool_input, edited)
            return Transform(apply=lambda e: _run_with(e, edited), reason="approved with edits on its card")
        if answer.approved:
            return Proceed(reason="approved on its card")
        return Deny(reason=wording.tool_denied(name, answer.reason))

    def after_tool_call(self, event: AfterToolCallEvent, **kwargs: Any) -> Proceed | Transform:
        note = self.edited.pop(event.tool_use["toolUseId"], None)
        if note is None:
            return Proceed()
        return Transform(apply=lambda e: _tell(e, note), reason="the call ran with edits")


def _run_with(event: Any, edited: dict[str, Any]) -> None:
    event.tool_use = {**event.tool_use, "input": edited}


def _tell(event: Any, note: str) -> None:
    result = dict(event.result)
    result["content"] = [{"text": note}, *list(result.get("content") or [])]
    event.result = result


def attach(agent: Agent, gated: frozenset[str]) -> Agent:
    """Give an agent the gate (once). An agent that brings its own HumanInTheLoop cannot get a
    second one: both would raise the same interrupt id for the same call."""
    if gate_of(agent) is not None:
        return agent
    if any(h.name == GATE_INTERRUPT for h in own_interventions(agent)):
        raise ConfirmToolsError(
            "--confirm-tools: the agent already has a HumanInTheLoop intervention; use one or the other"
        )
    # The documented way is Agent(interventions=[...]), which a user's factory did not know
    # about: a second registry on the same hooks (core/agent/strands_compat.py, 3).
    add_interventions(agent, [ToolGate(gated)])
    return agent


def gate_of(agent: Agent) -> ToolGate | None:
    return next((h for h in added_interventions(agent) if isinstance(h, ToolGate)), None)

"""R5: the approval call runs alone in its batch, enforced by a hook rather than by a prompt.

The decision is a pure function of the assistant message, so it comes out the same on the first
pass and on the resume (when the SDK fires the hook again for calls without a stored result).
"""

from __future__ import annotations

from typing import Any

from strands.hooks import BeforeToolCallEvent

APPROVAL_TOOL = "request_approval"
MERGED = "Cancelled: merged into the first approval request of this step."
ALONE = (
    "Cancelled: an approval request is in this step; call the approval tool on its own, "
    "then call this tool again after the answer."
)


def tool_uses(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [b["toolUse"] for b in message.get("content", []) if isinstance(b, dict) and "toolUse" in b]


def decide_batch(message: dict[str, Any]) -> dict[str, str]:
    """toolUseId -> the cancel text, for every call of the message that must not run."""
    uses = tool_uses(message)
    first = next((u for u in uses if u.get("name") == APPROVAL_TOOL), None)
    if first is None:
        return {}
    return {u["toolUseId"]: MERGED if u.get("name") == APPROVAL_TOOL else ALONE for u in uses if u is not first}


def enforce_batch_rule(event: BeforeToolCallEvent) -> None:
    messages = event.agent.messages
    if not messages or messages[-1].get("role") != "assistant":
        return
    text = decide_batch(dict(messages[-1])).get(event.tool_use["toolUseId"])
    if text:
        event.cancel_tool = text

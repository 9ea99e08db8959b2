"""`save_note(text)`: the default agent's demo tool with an effect worth gating.

It appends one line to `notes.txt` in the chat's own folder under the notes root (one folder per
chat, named by a hash of the chat key, so no chat key reaches a path). Which chat comes from the
request context the server set (R4), never from the model. `scripts/run` serves with
`--confirm-tools save_note`, so each call asks first (core/agent/tool_gate.py).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from strands import ToolContext, tool

from chat_approvals.core.agent.context import context_of
from chat_approvals.core.agent.scripted_model import SAVE_NOTE

MAX_NOTE = 2000


def chat_folder(root: Path, chat: str) -> Path:
    return root / hashlib.sha256(chat.encode("utf-8")).hexdigest()[:32]


def notes_file(root: Path, chat: str) -> Path:
    return chat_folder(root, chat) / "notes.txt"


def make_save_note(root: Path) -> Any:
    @tool(name=SAVE_NOTE, context=True)
    def save_note(text: str, tool_context: ToolContext) -> dict[str, Any]:
        """Save a note for the user: appends one line to the notes file of this chat.

        Args:
            text: The note, one line.
        """
        tool_use_id = tool_context.tool_use["toolUseId"]
        ctx = context_of(tool_context.invocation_state)
        if ctx is None:
            return {"toolUseId": tool_use_id, "status": "error", "content": [{"text": "No chat to save the note in."}]}
        line = " ".join(str(text).split())[:MAX_NOTE]
        if not line:
            return {"toolUseId": tool_use_id, "status": "error", "content": [{"text": "The note is empty."}]}
        path = notes_file(root, ctx.chat)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
        return {"toolUseId": tool_use_id, "status": "success", "content": [{"text": f"Saved the note: {line}"}]}

    return save_note

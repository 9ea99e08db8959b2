"""`save_note(text)`: the default agent's demo tool with an effect worth gating.

It appends one line to `notes.txt` in the chat's own folder under the notes root (one folder per
chat, named by a hash of the chat key, so no chat key reaches a path). Which chat comes from the
request context the server set (R4), never from the model. `scripts/run` serves with
`--confirm-tools save_note`, so each call asks first (core/agent/tool_gate.py).

It also shows the pattern docs/http-api.md recommends for side effects under R11 (issue 27.5): a
worker killed after the write and before the resume is marked done leaves a lease that lapses,
and the next claim (`resume_attempt` 2, 3, ...) runs the same approved call again, from the same
snapshot, with the same tool use id. The note is keyed by the card and that id: before the line
is appended, a marker records where it goes; a later attempt that finds the marker and the line
there writes nothing. The first attempt (`resume_attempt` 1, or no card at all) cannot be a
repeat, so it skips the check.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
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
        done = {"toolUseId": tool_use_id, "status": "success", "content": [{"text": f"Saved the note: {line}"}]}
        card = ctx.resume_card.card_id if ctx.resume_card is not None else None
        marker = _marker(path, card, tool_use_id) if card is not None else None
        # Locked: calls of one step run in parallel (issue 32), and a marker must name where THIS
        # line went, not where another call's line was being written at the same moment.
        with path.open("a", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes
            if marker is not None and (ctx.resume_attempt or 1) > 1 and _already_written(marker, path, line):
                return done  # an earlier attempt of this same approved call wrote it
            f.seek(0, os.SEEK_END)
            if marker is not None:  # where this call's line goes, before it is written
                marker.parent.mkdir(exist_ok=True)
                marker.write_text(str(f.tell()), encoding="ascii")
            f.write(line + "\n")
        return done

    return save_note


def _marker(notes: Path, card_id: str, tool_use_id: str) -> Path:
    key = hashlib.sha256(f"{card_id}\0{tool_use_id}".encode()).hexdigest()[:32]  # no id reaches a path
    return notes.parent / "applied" / key


def _already_written(marker: Path, notes: Path, line: str) -> bool:
    """The marker's offset holds this line: the earlier attempt's write landed (a marker without
    it means that attempt died between the two: write now)."""
    try:
        offset = int(marker.read_text(encoding="ascii"))
        with notes.open("rb") as f:
            f.seek(offset)
            return f.read(len(line.encode("utf-8")) + 1) == (line + "\n").encode("utf-8")
    except (OSError, ValueError):
        return False

"""Bring your own Strands agent: `chat-approvals serve --agent examples.my_agent:build`.

Runs offline as it stands (the project's scripted model). From the repository's root:

    python -m chat_approvals serve --agent examples.my_agent:build --confirm-tools save_note --api-token T

(`python -m` puts the current folder on the import path; with the `chat-approvals` command, set
`PYTHONPATH=.` or install your package, or `--agent` cannot import it.)

The factory's contract:
- `build()` takes no arguments and returns a `strands.Agent`.
- It is called for every turn, and for every resume that continues from the store (another
  replica, a restart, a paused agent no longer held in this process's memory): build a fresh Agent
  each call (keep no state between calls: the store keeps the conversation), with the same tools
  under the same names every time. A resume whose agent lacks a tool the paused turn was calling
  cannot continue it.
- chat-approvals adds its approval tool (`request_approval`) and a hook to what you return; do not
  register them yourself.

How it meets the serve flags:
- `--model` names the model of the built-in agent only; with `--agent` your factory chooses. This
  one reads `CHAT_APPROVALS_MODEL` (`scripted`, or `provider:model_id` such as
  `anthropic:claude-sonnet-4-5` with that provider's extra installed) through the same
  `build_model` the built-in agent uses.
- `--confirm-tools save_note`: every call of a tool so named asks a person first (a tool card) and
  runs only once approved. The names are checked against the tools of an agent built at start-up:
  a name that matches none stops the server.
- `--sandbox` starts the egress gate, but `run_script` is given to the built-in agent only: with
  `--agent`, your agent has the tools you register here and no others.
"""

from __future__ import annotations

import os
from pathlib import Path

from strands import Agent, tool

from chat_approvals import build_model

NOTES_ENV = "MY_AGENT_NOTES"  # the file save_note appends to
SYSTEM_PROMPT = (
    "You help with data tasks. Ask with request_approval before downloading anything, and save notes "
    "with save_note when the user asks for one."
)


@tool
def save_note(text: str) -> str:
    """Save a note for the user: appends one line to the notes file.

    Args:
        text: The note, one line.
    """
    line = " ".join(text.split())[:2000]  # one line, bounded: the model writes this argument
    path = Path(os.environ.get(NOTES_ENV, "var/my_agent/notes.txt"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(line + "\n")
    return f"Saved the note: {line}"


def build() -> Agent:
    """A fresh agent for one turn or one resume (see the module's docstring)."""
    return Agent(
        model=build_model(os.environ.get("CHAT_APPROVALS_MODEL", "scripted")),
        tools=[save_note],
        system_prompt=SYSTEM_PROMPT,
        callback_handler=None,  # the server answers in Slack/Teams/HTTP; nothing to print
    )

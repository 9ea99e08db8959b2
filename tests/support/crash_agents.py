"""An agent for the crash tests (issue 27.5), importable as `--agent tests.support.crash_agents:note_hold_agent`:
it calls the real demo `save_note` (gated with `--confirm-tools save_note`, so the card is that
call), and after the note is written it holds the resumed run while a file exists, so a test can
SIGKILL the server between the side effect and the resume being marked done."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from strands import Agent

from chat_approvals.core.agent.demo_tools import make_save_note
from tests.support.agents import PolicyModel, results_of, text_of

NOTES_ENV = "CHAT_APPROVALS_TEST_CRASH_NOTES"
HOLD_ENV = "CHAT_APPROVALS_TEST_CRASH_HOLD"  # the run after the note waits while this file exists


def _policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    results = results_of(messages)
    if not results:
        return "", [{"name": "save_note", "input": {"text": "remember the milk"}}]
    hold = os.environ.get(HOLD_ENV)
    deadline = time.monotonic() + 60
    while hold and os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.05)
    return "done: " + text_of(results[-1]), []


def note_hold_agent() -> Agent:
    notes = Path(os.environ.get(NOTES_ENV, "var/notes"))
    return Agent(model=PolicyModel(_policy), tools=[make_save_note(notes)], callback_handler=None)


def _pair_policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Two gated calls in one step (issue 32's batch card), then the same hold as above."""
    results = results_of(messages)
    if not results:
        return "", [{"name": "save_note", "input": {"text": t}} for t in ("first note", "second note")]
    hold = os.environ.get(HOLD_ENV)
    deadline = time.monotonic() + 60
    while hold and os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.05)
    return "done: " + "; ".join(text_of(r) for r in results), []


def note_pair_hold_agent() -> Agent:
    notes = Path(os.environ.get(NOTES_ENV, "var/notes"))
    return Agent(model=PolicyModel(_pair_policy), tools=[make_save_note(notes)], callback_handler=None)

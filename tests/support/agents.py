"""Test agents: deterministic models that drive the approval tool in ways the scripted model does not.

`work_agent` is importable as `--agent tests.support.agents:work_agent`, so server processes in the
multi-process tests use it too: after an approval it calls `do_work`, which appends a line to
the file named by CHAT_APPROVALS_TEST_WORK_LOG, so a test can count post-approval work across
processes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from strands import Agent, ToolContext, tool

from chat_approvals.core.agent.approval_tool import request_approval
from chat_approvals.core.agent.demo_tools import notes_file
from chat_approvals.core.agent.factory import AgentFactory, default_factory, gated_factory, prepare
from chat_approvals.core.agent.scripted_model import ScriptedModel

WORK_LOG_ENV = "CHAT_APPROVALS_TEST_WORK_LOG"
BLOCK_ENV = "CHAT_APPROVALS_TEST_BLOCK_FILE"
TURN_LOG_ENV = "CHAT_APPROVALS_TEST_TURN_LOG"  # a line per turn started (the model's first call)
TURN_BLOCK_ENV = "CHAT_APPROVALS_TEST_TURN_BLOCK_FILE"  # the first call waits while this file exists

Policy = Callable[[list[dict[str, Any]]], tuple[str, list[dict[str, Any]]]]


class PolicyModel(ScriptedModel):
    """A model whose next message is `policy(messages)`: (text, [{"name", "input"}, ...])."""

    def __init__(self, policy: Policy) -> None:
        super().__init__()
        self.policy = policy

    def decide(self, messages: list[dict[str, Any]], tool_names: set[str]) -> tuple[str, list[dict[str, Any]]]:
        return self.policy(messages)


def results_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool results of the current turn: after the last user text (earlier turns are history)."""
    start = max(
        (i for i, m in enumerate(messages) if m["role"] == "user" and any("text" in b for b in m["content"])), default=0
    )
    return [b["toolResult"] for m in messages[start:] for b in m["content"] if "toolResult" in b]


def text_of(result: dict[str, Any]) -> str:
    return " ".join(c.get("text", "") for c in result.get("content", []))


class Counter:
    """Counts model calls across every agent a factory builds (in one process)."""

    def __init__(self) -> None:
        self.models: list[ScriptedModel] = []

    def calls(self) -> int:
        return sum(m.calls for m in self.models)


def policy_factory(policy: Policy, counter: Counter | None = None, tools: list[Any] | None = None) -> AgentFactory:
    def make() -> Agent:
        model = PolicyModel(policy)
        if counter is not None:
            counter.models.append(model)
        return prepare(Agent(model=model, tools=[request_approval, *(tools or [])], callback_handler=None))

    return make


def held_resume_factory(step: Callable[[], object], url: str) -> AgentFactory:
    """Asks to download `url`; once approved, its resumed turn calls `slow_step`, which runs
    `step` (a test blocks there to hold the resumed turn), then it answers "finished"."""

    @tool
    def slow_step() -> str:
        """Wait until the test lets the resumed turn go on."""
        step()
        return "stepped"

    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        results = results_of(messages)
        if not results:
            return "", [{"name": "request_approval", "input": {"reason": "data", "urls": [url]}}]
        if len(results) == 1:
            return "", [{"name": "slow_step", "input": {}}]
        return "finished", []

    return policy_factory(policy, tools=[slow_step])


def scripted_factory(counter: Counter) -> AgentFactory:
    def make() -> Agent:
        model = ScriptedModel()
        counter.models.append(model)
        return prepare(Agent(model=model, tools=[request_approval], callback_handler=None))

    return make


@tool
def do_work(label: str) -> str:
    """Record one unit of post-approval work.

    Args:
        label: what was done
    """
    path = os.environ.get(WORK_LOG_ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"label": label, "pid": os.getpid()}) + "\n")
    _hold_while(BLOCK_ENV)  # hold the resume open until the test removes the file
    return f"did {label}"


def _hold_while(env: str) -> None:
    block = os.environ.get(env)
    if block:  # hold until the test removes the file (bounded)
        import time

        for _ in range(600):
            if not os.path.exists(block):
                break
            time.sleep(0.05)


def work_policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    results = results_of(messages)
    if not results:
        path = os.environ.get(TURN_LOG_ENV)
        if path:
            with open(path, "a") as f:
                f.write(json.dumps({"pid": os.getpid()}) + "\n")
        _hold_while(TURN_BLOCK_ENV)
        return "", [{"name": "request_approval", "input": {"reason": "fetch data", "urls": ["https://data.example/x"]}}]
    if len(results) == 1:
        if results[0]["status"] != "success":
            return "continued without the data", []
        return "", [{"name": "do_work", "input": {"label": "download"}}]
    return "work done: " + text_of(results[-1]), []


def work_agent() -> Agent:
    return Agent(model=PolicyModel(work_policy), tools=[do_work], callback_handler=None)


# --- issue 14: gated tools and a user's own interrupting tool -------------------------------
NOTES_ENV = "CHAT_APPROVALS_TEST_NOTES"  # where the test agents' save_note writes
QUESTION_LOG_ENV = "CHAT_APPROVALS_TEST_QUESTION_LOG"  # a line per answer delete_repo received


def notes_agent(notes: Path) -> AgentFactory:
    """The built-in scripted agent with `save_note` writing under `notes`, gated (a card per call)."""
    return gated_factory(default_factory("scripted", notes_dir=notes), "save_note")


def saved_notes(notes: Path) -> list[str]:
    """Every line `save_note` wrote under `notes`, in any chat."""
    files = list(notes.rglob("notes.txt")) if notes.exists() else []
    return [line for f in files for line in f.read_text().splitlines()]


def chat_notes(notes: Path, chat: str) -> list[str]:
    """The lines `save_note` wrote under `notes` for one chat."""
    path = notes_file(notes, chat)
    return path.read_text().splitlines() if path.exists() else []


def _save_note() -> Any:
    from pathlib import Path

    from chat_approvals.core.agent.demo_tools import make_save_note

    return make_save_note(Path(os.environ.get(NOTES_ENV, "var/notes")))


def note_twice_policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Two gated calls in ONE step (two interrupts at once), then a summary."""
    results = results_of(messages)
    if not results:
        return "", [{"name": "save_note", "input": {"text": "one"}}, {"name": "save_note", "input": {"text": "two"}}]
    return "notes: " + "; ".join(text_of(r) for r in results), []


def note_chain_policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Two gated calls one after the other in one turn: the second is a new (chained) card."""
    results = results_of(messages)
    if len(results) < 2:
        return "", [{"name": "save_note", "input": {"text": ["one", "two"][len(results)]}}]
    return "notes: " + "; ".join(text_of(r) for r in results), []


def note_twice_agent() -> Agent:
    return Agent(model=PolicyModel(note_twice_policy), tools=[_save_note()], callback_handler=None)


def note_chain_agent() -> Agent:
    return Agent(model=PolicyModel(note_chain_policy), tools=[_save_note()], callback_handler=None)


@tool(context=True)
def delete_repo(repo: str, tool_context: ToolContext) -> str:
    """Delete a repository, after asking a person (the user's own interrupt, not ours).

    Args:
        repo: owner/name
    """
    answer = tool_context.interrupt("approval", reason={"action": "delete_repo", "repo": repo, "risk": "high"})
    path = os.environ.get(QUESTION_LOG_ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(answer) + "\n")
    if isinstance(answer, dict) and answer.get("approved") is True:
        return f"deleted {repo}"
    why = answer.get("reason") if isinstance(answer, dict) else None
    return f"NOT deleted {repo}" + (f": {why}" if why else "")


def question_policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    results = results_of(messages)
    if not results:
        return "", [{"name": "delete_repo", "input": {"repo": "acme/legacy"}}]
    return "repo: " + text_of(results[-1]), []


def question_agent() -> Agent:
    """`--agent tests.support.agents:question_agent`: a user's own tool that raises its own interrupt."""
    return Agent(model=PolicyModel(question_policy), tools=[delete_repo], callback_handler=None)


def mixed_batch_policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """A gated call and a question (the user's own interrupt) in ONE step (issue 32), then both results."""
    results = results_of(messages)
    if not results:
        return "", [
            {"name": "save_note", "input": {"text": "mixed"}},
            {"name": "delete_repo", "input": {"repo": "acme/old"}},
        ]
    return "done: " + "; ".join(text_of(r) for r in results), []


def mixed_batch_agent() -> Agent:
    return Agent(model=PolicyModel(mixed_batch_policy), tools=[_save_note(), delete_repo], callback_handler=None)

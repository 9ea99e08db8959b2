"""The cheap checks on every turn's Agent and tool access (issue 34): the approval tool must be
registered (core/agent/hooks.checked; R1: without it nothing pauses), and a tool reaches only a
`ToolAccess` (core/agent/context; R4: identity never comes from the model)."""

from __future__ import annotations

import pytest
from strands import Agent

from chat_approvals.core.agent.context import ScopedAccess, invocation_state, tool_access_of
from chat_approvals.core.agent.factory import default_factory, prepare
from chat_approvals.core.agent.hooks import checked, has_approval_tool
from chat_approvals.core.agent.scripted_model import ScriptedModel
from chat_approvals.core.models import Refusal


def test_an_agent_without_the_approval_tool_is_refused() -> None:
    bare = Agent(model=ScriptedModel(), tools=[], callback_handler=None)
    assert not has_approval_tool(bare)
    with pytest.raises(RuntimeError, match="approval tool"):
        checked(bare)
    assert has_approval_tool(default_factory("scripted")())
    assert has_approval_tool(prepare(bare))  # a user's agent gets it added, then passes


class Access:
    """A ToolAccess of another class than ScopedAccess."""

    async def is_allowed(self, *, user: str, chat: str, kind: str, name: str, turn_id: str | None = None) -> bool:
        return False

    async def record_refusal(self, refusal: Refusal) -> bool:
        return False

    async def granted_names(self, *, user: str, chat: str, kind: str, turn_id: str | None = None) -> list[str]:
        return []

    async def refusals(self, chat: str, turn_id: str) -> list[Refusal]:
        return []


class NotAccess:
    async def refusals(self, chat: str, turn_id: str) -> list[Refusal]:
        return []


def test_tool_access_is_a_scoped_access_or_any_tool_access_and_nothing_else() -> None:
    scoped = ScopedAccess(Access())
    ctx = object()
    assert tool_access_of(invocation_state(ctx, scoped)) is scoped  # type: ignore[arg-type]
    other = Access()
    assert tool_access_of(invocation_state(ctx, other)) is other  # type: ignore[arg-type]
    assert tool_access_of(invocation_state(ctx, NotAccess())) is None  # type: ignore[arg-type]
    assert tool_access_of(invocation_state(ctx, "grants")) is None  # type: ignore[arg-type]
    assert tool_access_of(None) is None

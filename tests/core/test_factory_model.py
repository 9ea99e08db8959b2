"""The default agent's model is built once per factory, not per turn and per resume (issue 34: a
provider's client, boto3's Bedrock one, costs about 70 ms of CPU to build, on the event loop: R21), and
the Agents sharing it keep their conversations apart: Strands holds each one's messages and model
state on the Agent. Real Strands Agents, the offline scripted model and Strands' Bedrock model
(built offline: no call is made)."""

from __future__ import annotations

import asyncio

import pytest
from strands.models.bedrock import BedrockModel

from chat_approvals.core.agent.factory import default_factory

TEXT = "please fetch https://data.example.org/{}.csv"


def test_every_agent_of_a_factory_shares_one_model() -> None:
    make = default_factory("scripted")
    first, second = make(), make()
    assert first is not second and first.model is second.model


def test_a_provider_model_is_built_once_at_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    built: list[BedrockModel] = []
    real_init = BedrockModel.__init__

    def counting_init(self: BedrockModel, *args: object, **kwargs: object) -> None:
        built.append(self)
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(BedrockModel, "__init__", counting_init)
    make = default_factory("bedrock:anthropic.claude-example")
    agents = [make() for _ in range(3)]
    assert len(built) == 1  # at start-up; no turn builds another
    assert all(a.model is built[0] for a in agents)


async def test_agents_sharing_the_model_keep_their_conversations_apart() -> None:
    """Two turns at once on one model: each Agent pauses on its own site, with its own messages."""
    make = default_factory("scripted")
    one, two = make(), make()
    results = await asyncio.gather(one.invoke_async(TEXT.format("one")), two.invoke_async(TEXT.format("two")))
    # without the request context the approval tool refuses; each conversation holds only its own text
    assert [r.stop_reason for r in results] == ["end_turn", "end_turn"]
    assert one.messages[0]["content"] == [{"text": TEXT.format("one")}]
    assert two.messages[0]["content"] == [{"text": TEXT.format("two")}]
    assert not any("two" in str(m) for m in one.messages) and not any("one.csv" in str(m) for m in two.messages)
    assert one.model is two.model

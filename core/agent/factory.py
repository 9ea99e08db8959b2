"""Builds the agent each turn and each resume runs on.

Every process must register the same tools under the same names: a snapshot carries no tools,
and a resume that misses one fails silently as "Unknown tool". `prepare` therefore adds the
approval tool and the batch hook to whatever agent a factory returns, and checks the result;
the default agent gets them at construction (core/agent/hooks.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from strands import Agent
from strands.models.model import Model

from chat_approvals.core.agent.batch_rule import APPROVAL_TOOL
from chat_approvals.core.agent.demo_tools import make_save_note
from chat_approvals.core.agent.hooks import ApprovalHooks, approval_tools, checked, equip
from chat_approvals.core.agent.scripted_model import ScriptedModel
from chat_approvals.core.agent.strands_compat import DelegationIfDelegating, LoneCallInPlace
from chat_approvals.core.agent.tool_gate import attach, parse_names, resolve

AgentFactory = Callable[[], Agent]

SYSTEM_PROMPT = (
    "You help with data tasks. Downloads need the user's approval: when a site or package you need is "
    f"blocked or not yet approved, call {APPROVAL_TOOL} on its own, with the URLs or packages and a short "
    "reason. If the user does not approve, continue without that data and say so."
)

_PROVIDERS = {
    "bedrock": ("strands.models.bedrock", "BedrockModel"),
    "anthropic": ("strands.models.anthropic", "AnthropicModel"),
    "openai": ("strands.models.openai", "OpenAIModel"),
    "ollama": ("strands.models.ollama", "OllamaModel"),
    "litellm": ("strands.models.litellm", "LiteLLMModel"),
}


def build_model(spec: str) -> Model:
    """`scripted`, or `provider:model_id` through Strands' own model classes."""
    if spec == "scripted":
        return ScriptedModel()
    provider, sep, model_id = spec.partition(":")
    if not sep or not model_id or provider not in _PROVIDERS:
        raise ValueError(f"bad --model {spec!r}: use scripted or one of {', '.join(_PROVIDERS)} as provider:model_id")
    module, cls = _PROVIDERS[provider]
    try:
        model_cls = getattr(importlib.import_module(module), cls)
    except ImportError as e:  # the provider's SDK is an extra of strands-agents, not installed by default
        raise ValueError(
            f"--model {spec!r} needs the {provider} provider, which is not installed ({e}): "
            f"pip install 'strands-agents[{provider}]'"
        ) from None
    kwargs: dict[str, Any] = {"model_id": model_id}
    if provider == "anthropic":
        kwargs["max_tokens"] = 4096
    if provider == "ollama":
        return model_cls(None, model_id=model_id)
    return model_cls(**kwargs)


def prepare(agent: Agent) -> Agent:
    """An agent from a user's factory: the approval tool and the batch hook (core/agent/hooks.py)."""
    return equip(agent)


def default_factory(
    model: str = "scripted", extra_tools: Sequence[Any] = (), notes_dir: str | Path | None = None
) -> AgentFactory:
    """The default agent: the approval tool, `save_note` (when a notes folder is given) and any
    extra tools (the sandbox's `run_script`). Every Agent it builds shares one model: a provider's
    client is made once, at start-up (boto3's Bedrock client costs about 70 ms of CPU on the event
    loop), not per turn and per resume; Strands keeps a conversation's model state on its Agent."""
    shared = build_model(model)  # and a bad spec fails at start-up, not at the first turn
    demo = [make_save_note(Path(notes_dir))] if notes_dir is not None else []
    executor = LoneCallInPlace()  # holds no state: one for every Agent
    delegation = DelegationIfDelegating()  # holds no state either (strands_compat.py entry 15)

    def make() -> Agent:  # the approval tool and hooks at construction (core/agent/hooks.py)
        return checked(
            Agent(
                model=shared,
                tools=[*approval_tools(), *demo, *extra_tools],
                hooks=[ApprovalHooks()],
                system_prompt=SYSTEM_PROMPT,
                callback_handler=None,
                tool_executor=executor,  # a step's lone call (an approval's, usually) run without a task
                plugins=[delegation],  # Strands' delegation hooks only for a tool that delegates
            )
        )

    return make


def user_factory(target: str) -> AgentFactory:
    """`module:function`: the function returns a Strands Agent; we add the approval tool and hook."""
    fn = load_callable(target)

    def make() -> Agent:
        agent = fn()
        if not isinstance(agent, Agent):
            raise TypeError(f"--agent {target!r} returned {type(agent).__name__}, not a strands Agent")
        return prepare(agent)

    return make


def load_callable(target: str) -> Callable[[], Any]:
    """`module:function` imported, or a ValueError that says in one line what is wrong with it."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr or not all(p.isidentifier() for p in [*module_name.split("."), attr]):
        raise ValueError(f"bad --agent {target!r}: use module:function, e.g. myagents.support:build")
    where = "is the folder that holds it on PYTHONPATH?"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise ValueError(f"--agent {target!r}: no module named {module_name!r}; {where}") from None
        raise ValueError(f"--agent {target!r}: importing {module_name!r} failed: {e} (a module it needs)") from None
    except Exception as e:  # the user's module raised while it was imported: say which, in one line
        raise ValueError(f"--agent {target!r}: importing {module_name!r} failed: {type(e).__name__}: {e}") from None
    fn = getattr(module, attr, None)
    if fn is None:
        raise ValueError(f"--agent {target!r}: module {module_name!r} ({module.__file__}) has no {attr!r}")
    if not callable(fn):
        raise ValueError(f"--agent {target!r} is not callable (it is a {type(fn).__name__})")
    return fn


def gated_factory(factory: AgentFactory, confirm_tools: str | Sequence[str] | None) -> AgentFactory:
    """`--confirm-tools`: every agent the factory builds gets the tool gate (core/agent/tool_gate.py).
    The names are checked against the agent's tools here, at start-up: a name that matches no
    tool raises ConfirmToolsError and the server does not start."""
    entries = parse_names(confirm_tools)
    if not entries:
        return factory
    gated = resolve(entries, factory().tool_names)

    def make() -> Agent:
        return attach(factory(), gated)

    return make

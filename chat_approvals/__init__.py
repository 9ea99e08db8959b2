"""chat-approvals: approve a paused Strands agent's turn from Slack, Microsoft Teams or HTTP, and
resume that same turn exactly once from a durable store.

The public API, for mounting the front ends into your own aiohttp service (docs/embedding.md)::

    from aiohttp import web
    from chat_approvals import ServerConfig, build_app

    host = web.Application()
    host.add_subapp("/approvals", build_app(ServerConfig(api_token="..."), agent_factory=my_agent))
    web.run_app(host)

- `build_app(config, agent_factory)`: the aiohttp application (Slack, Teams, `/v1`, health,
  metrics) with its start-up and clean-up; `approvals_of(app)`: the facade behind it.
- `ServerConfig`: the settings (`CHAT_APPROVALS_*` variables, the CLI's flags).
- `AgentFactory`: what `agent_factory` is, a no-argument callable returning a `strands.Agent`,
  called for every turn and every resume (examples/my_agent.py).
- `Approvals`: the facade (run a turn, resume a card, grants, audit).
- `build_model(spec)`: the model `--model` names (`scripted` or `provider:model_id`).

Everything else (`chat_approvals.core`, `.cards`, `.store`, `.bots`, installed from the folders
`core/ cards/ store/ bots/` of the source tree) is internal and may change without notice.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("chat-approvals")
except PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from chat_approvals.bots.config import ServerConfig
    from chat_approvals.core.agent.factory import AgentFactory, build_model
    from chat_approvals.core.approvals import Approvals
    from chat_approvals.embedding import approvals_of, build_app

__all__ = ["AgentFactory", "Approvals", "ServerConfig", "__version__", "approvals_of", "build_app", "build_model"]

# Loaded on first use: `import chat_approvals.core.models` (every worker, every test) runs this
# file first, and must not pull in aiohttp, Bolt and botbuilder for it.
_LAZY = {
    "ServerConfig": "chat_approvals.bots.config",
    "AgentFactory": "chat_approvals.core.agent.factory",
    "build_model": "chat_approvals.core.agent.factory",
    "Approvals": "chat_approvals.core.approvals",
    "approvals_of": "chat_approvals.embedding",
    "build_app": "chat_approvals.embedding",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'chat_approvals' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups do not come back here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})

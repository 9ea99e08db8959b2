"""chat-approvals: approve a paused Strands agent's turn from Slack, Microsoft Teams or HTTP, and
resume that same turn exactly once from a durable store.

The folders `core/`, `cards/`, `store/` and `bots/` of the source tree install as
`chat_approvals.core`, `chat_approvals.cards`, `chat_approvals.store` and `chat_approvals.bots`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("chat-approvals")
except PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]

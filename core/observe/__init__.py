"""What an operator sees: metrics, the store's timing wrapper, traces.

The names below are this room's public face, for `bots/` and embedders; they load on first use, so
importing one module of the room does not import the rest (and no import cycle runs through here).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chat_approvals.core.observe.metrics import Metrics
    from chat_approvals.core.observe.observed import observe

_WHERE = {
    "Metrics": "chat_approvals.core.observe.metrics",
    "observe": "chat_approvals.core.observe.observed",
}
__all__ = ["Metrics", "observe"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)

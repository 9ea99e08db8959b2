"""The sandbox a script runs in (bubblewrap, limits, seccomp, cgroups) and its egress gate (`egress/`).

The names below are this room's public face, for `bots/` and embedders; they load on first use, so
importing one module of the room does not import the rest (and no import cycle runs through here).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chat_approvals.core.sandbox.runner import LIMIT_MARK, GatedLocalSandbox, Limits, detect_confinement
    from chat_approvals.core.sandbox.tools import NotConfined, make_run_script, sweep_kept

_WHERE = {
    "LIMIT_MARK": "chat_approvals.core.sandbox.runner",
    "GatedLocalSandbox": "chat_approvals.core.sandbox.runner",
    "Limits": "chat_approvals.core.sandbox.runner",
    "detect_confinement": "chat_approvals.core.sandbox.runner",
    "NotConfined": "chat_approvals.core.sandbox.tools",
    "make_run_script": "chat_approvals.core.sandbox.tools",
    "sweep_kept": "chat_approvals.core.sandbox.tools",
}
__all__ = [
    "LIMIT_MARK",
    "GatedLocalSandbox",
    "Limits",
    "NotConfined",
    "detect_confinement",
    "make_run_script",
    "sweep_kept",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)

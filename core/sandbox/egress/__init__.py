"""The egress gate: the sandbox's only way out. See docs/egress-gate.md."""

from chat_approvals.core.sandbox.egress.backend import GateBackend, GrantsBackend
from chat_approvals.core.sandbox.egress.gate import Blocked, Gate, GateConfig, Run

__all__ = ["Blocked", "Gate", "GateBackend", "GateConfig", "GrantsBackend", "Run"]

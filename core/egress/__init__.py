"""The egress gate: the sandbox's only way out. See docs/egress-gate.md."""

from core.egress.backend import ApprovalsBackend, GrantsBackend
from core.egress.gate import Blocked, Gate, GateConfig, Run, start_gate

__all__ = ["ApprovalsBackend", "Blocked", "Gate", "GateConfig", "GrantsBackend", "Run", "start_gate"]

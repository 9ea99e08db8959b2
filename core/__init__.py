"""The core: the protocol and everything it needs, with no chat platform in it.

Its rooms, each with a curated face in its `__init__`:
- `protocol/`: turns, pauses, claims and resumes, grants, the approval policy, the audit trail;
- `agent/`: the Strands side (agent factory, approval tool, batch rule, tool gate, offline model);
- `sandbox/`: the sandbox a script runs in, and its egress gate (`sandbox/egress/`);
- `observe/`: metrics, the store's timing wrapper, traces.
At the top: the shared types (`models`, `identity`, `ids`, `clock`, `settings`), the ports the store
implements (`ports`), the composition root (`bootstrap`) and the facade the front ends call
(`approvals`). See docs/architecture.md.
"""

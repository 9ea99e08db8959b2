"""The composition root (core/bootstrap.py, bots/server.open_root) and Strands through its public
surface (core/agent/hooks.py, core/agent/strands_compat.py): issue 26, parts 2 and 6."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import open_root
from chat_approvals.core.agent.batch_rule import APPROVAL_TOOL
from chat_approvals.core.agent.factory import default_factory
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows

ROOT = Path(__file__).resolve().parents[2]


def _closed(store: StoreIO) -> bool:
    try:
        asyncio.run(store.run(lambda: None))
    except RuntimeError:  # its worker pool takes no more work
        return True
    return False


def test_the_root_builds_the_gate_on_the_grant_book_and_closes_the_store(tmp_path: Path) -> None:
    cfg = ServerConfig(
        store=f"sqlite:///{tmp_path}/rows.db", objects=str(tmp_path / "o"), sandbox=True, sandbox_unconfined=True
    )
    root = open_root(cfg, factory=default_factory("scripted"))
    try:
        assert root.gate is not None
        assert root.gate.backend is root.approvals.gate_backend  # given when built, never wired late
        assert not hasattr(root.approvals, "store")  # the facade holds services, not the store
    finally:
        root.close()
    assert _closed(root.store)


def test_a_root_that_fails_to_build_closes_the_store_it_was_handed(tmp_path: Path) -> None:
    clock = ManualClock()
    store = StoreIO(SqliteRows(tmp_path / "r.db"), FileObjects(tmp_path / "o", clock=clock))

    def broken(_gate: object) -> object:
        raise ValueError("no such tool")

    with pytest.raises(ValueError, match="no such tool"):
        bootstrap(store, clock=clock, factory_on_gate=broken)  # type: ignore[arg-type]
    assert _closed(store)


def test_the_default_agent_gets_the_approval_tool_and_hooks_at_construction() -> None:
    agent = default_factory("scripted")()
    assert APPROVAL_TOOL in agent.tool_names


def _private_accesses(path: Path) -> list[str]:
    """`x._name` where x is not self/cls: a private attribute of someone else's object."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr"):
            name = node.args[1] if len(node.args) > 1 else None
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.startswith("_"):
                found.append(f"{path.name}:{node.lineno} {node.func.id}({name.value!r})")
    return found


def test_only_strands_compat_reaches_into_strands_private_parts() -> None:
    """Every core module that imports strands uses its public surface; the one exception is
    core/agent/strands_compat.py, whose accesses are numbered with their reasons."""
    offenders = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        if path.name == "strands_compat.py":
            continue
        tree = ast.parse(path.read_text())
        uses_strands = any(
            (isinstance(n, ast.ImportFrom) and (n.module or "").startswith("strands"))
            or (isinstance(n, ast.Import) and any(a.name.startswith("strands") for a in n.names))
            for n in ast.walk(tree)
        )
        if uses_strands:
            offenders += _private_accesses(path)
    assert offenders == []
    assert len(_private_accesses(ROOT / "core" / "agent" / "strands_compat.py")) >= 1  # the scan sees what it looks for

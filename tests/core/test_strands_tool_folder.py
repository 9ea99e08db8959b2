"""Strands' look for a `./tools/` folder per Agent is skipped when nothing is loaded from it
(core/agent/strands_compat.py, entry 13; issue 34): installed by bootstrap; with loading off the
registry comes out as Strands' own leaves it, in a working directory that holds a tools folder with
a tool in it; with loading on, Strands' own runs and loads that tool. No rule covers Strands' tool
folder: these check the behaviour the entry keeps."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from strands.tools.registry import ToolRegistry

import chat_approvals.core.agent.strands_compat as compat
from chat_approvals.core.agent.factory import default_factory
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows

TOOL_FILE = '''
from strands import tool


@tool
def folder_tool(x: str) -> str:
    """A tool found in ./tools.

    Args:
        x: anything
    """
    return x
'''


@pytest.fixture
def in_a_folder_with_tools(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "folder_tool.py").write_text(TOOL_FILE)
    before = os.getcwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(before)


def registry_state(registry: ToolRegistry) -> dict[str, Any]:
    """What a registry holds, but its own id (one per registry)."""
    return {k: (sorted(v) if isinstance(v, dict) else v) for k, v in vars(registry).items() if k != "_registry_id"}


def test_bootstrap_installs_it_and_twice_is_once(tmp_path: Path) -> None:
    root = bootstrap(StoreIO(SqliteRows(str(tmp_path / "rows.db")), FileObjects(str(tmp_path / "o"))))
    root.close()
    assert ToolRegistry.initialize_tools is compat.initialize_tools_unless_off
    compat.skip_unloaded_tool_folder()
    assert ToolRegistry.initialize_tools is compat.initialize_tools_unless_off
    assert compat._STRANDS_INITIALIZE_TOOLS is not compat.initialize_tools_unless_off


def test_with_loading_off_the_registry_is_what_strands_own_leaves(
    in_a_folder_with_tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compat.skip_unloaded_tool_folder()
    ours, theirs = ToolRegistry(), ToolRegistry()
    for r in (ours, theirs):
        r.process_tools(default_factory("scripted")().tool_registry.registry.values())
        r.get_all_tools_config()
        r.tool_config = {"stale": {}}  # type: ignore[assignment]  # both set it back to None
    looked: list[str] = []
    monkeypatch.setattr(ToolRegistry, "get_tools_dirs", lambda self: looked.append("dirs") or [])
    compat.initialize_tools_unless_off(ours, False)
    assert looked == []  # ours does not look for the folder
    monkeypatch.undo()
    assert "folder_tool" in theirs.discover_tool_modules()  # Strands' own would find the tool file
    compat._STRANDS_INITIALIZE_TOOLS(theirs, False)  # Strands' own finds folder_tool.py and skips it
    assert registry_state(ours) == registry_state(theirs)
    assert ours.tool_config is None and "folder_tool" not in ours.registry


def test_with_loading_on_strands_own_loads_the_folder(in_a_folder_with_tools: Path) -> None:
    compat.skip_unloaded_tool_folder()
    registry = ToolRegistry()
    registry.initialize_tools(True)  # the installed method: Strands' own when loading is on
    assert "folder_tool" in registry.registry


def test_an_agent_built_in_that_folder_has_only_its_own_tools(in_a_folder_with_tools: Path) -> None:
    compat.skip_unloaded_tool_folder()
    agent = default_factory("scripted")()
    assert agent.tool_names == ["request_approval"]

"""Strands' scan of its own two plugins per Agent is skipped when their classes hold no hook or
tool (core/agent/strands_compat.py, entry 9; issue 34): installed by bootstrap, the same result as
Strands' own scan on the plugins a real Agent makes (built for every turn and every resume from the
stored snapshot, R9), and any other plugin scanned as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import strands.plugins.plugin as strands_plugin
from strands import Agent
from strands.hooks import BeforeModelCallEvent
from strands.plugins import Plugin, hook

import chat_approvals.core.agent.strands_compat as compat
from chat_approvals.core.agent.factory import default_factory
from chat_approvals.core.agent.scripted_model import ScriptedModel
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows


class Counting(Plugin):
    """A user's plugin with one hook: still found."""

    @property
    def name(self) -> str:
        return "counting"

    @hook
    def before_model(self, event: BeforeModelCallEvent) -> None:
        pass


def test_bootstrap_installs_it_and_twice_is_once(tmp_path: Path) -> None:
    root = bootstrap(StoreIO(SqliteRows(str(tmp_path / "rows.db")), FileObjects(str(tmp_path / "o"))))
    root.close()
    assert strands_plugin.discover_hooks is compat.discover_hooks_unless_plain
    assert strands_plugin.discover_tools is compat.discover_tools_unless_plain
    compat.skip_empty_plugin_scans()
    assert strands_plugin.discover_hooks is compat.discover_hooks_unless_plain
    names = {f"{c.__module__}.{c.__qualname__}" for c in compat._PLAIN_PLUGINS}
    assert names == {f"{m}.{c}" for m, c in compat._BUILT_IN_PLUGINS}  # both skipped in Strands 1.62


def test_the_same_as_strands_own_scan_on_a_real_agents_plugins() -> None:
    compat.skip_empty_plugin_scans()
    agent = Agent(model=ScriptedModel(), callback_handler=None)  # the built-in agent has one (entry 15)
    plugins: list[Any] = list(agent._plugin_registry._plugins.values())
    plain = [p for p in plugins if type(p) in compat._PLAIN_PLUGINS]
    assert len(plain) == 2  # the two a Strands Agent makes for itself
    plugins += default_factory("scripted")()._plugin_registry._plugins.values()
    for p in plugins:  # what Strands' scan finds on each, ours finds too
        assert compat.discover_hooks_unless_plain(p, p.name) == compat._STRANDS_DISCOVER_HOOKS(p, p.name)
        assert compat.discover_tools_unless_plain(p, p.name) == compat._STRANDS_DISCOVER_TOOLS(p, p.name)


def test_any_other_plugin_is_scanned_as_before() -> None:
    compat.skip_empty_plugin_scans()
    plugin = Counting()  # scanned at construction, through the installed functions
    assert [h.__name__ for h in plugin.hooks] == ["before_model"]
    assert compat._declares_hooks_or_tools(Counting)  # such a class is never skipped
    assert not any(compat._declares_hooks_or_tools(c) for c in compat._PLAIN_PLUGINS)

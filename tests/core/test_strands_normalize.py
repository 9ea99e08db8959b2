"""Strands' second copy of the messages per model call, skipped when it would change nothing
(core/agent/strands_compat.py, entry 6; issue 34): the same result as Strands' own for every kind
of message its rules touch, the messages as given only when nothing changes, installed by the
composition root, and Strands' function pinned so an upgrade that changes it fails here first."""

from __future__ import annotations

import copy
import hashlib
import inspect
from pathlib import Path
from typing import Any

import pytest
import strands.event_loop.streaming as streaming

import chat_approvals.core.agent.strands_compat as compat
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows

# Strands 1.62's `_normalize_messages`: when this changes, re-read it against
# `_unchanged_by_normalizing` (entry 6) and update the cases below, then this hash.
STRANDS_SOURCE_SHA256 = "075c5d2131950e8a340cf8694bb1695b6226cbc4933dc2afc1dca041755a4a1e"


def tool_use(name: Any) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": "t1", "name": name, "input": {"urls": ["https://a.example/x"]}}}


def said(role: str, *content: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "content": list(content)}


HISTORY = [
    said("user", {"text": "please fetch https://data.example.org/t.csv"}),
    said("assistant", tool_use("request_approval")),
    said("user", {"toolResult": {"toolUseId": "t1", "status": "success", "content": [{"text": "ok"}]}}),
    said("assistant", {"text": "Approved: fetched."}),
]

UNCHANGED = {
    "a history": HISTORY,
    "a user's blank text (only assistant messages are touched)": [said("user", {"text": "  "})],
    "a tool name with a trailing newline (Strands' pattern takes it)": [said("assistant", tool_use("ask\n"))],
    "a tool name of 64 characters": [said("assistant", tool_use("a" * 64))],
    "no content key": [{"role": "assistant"}],
    "an image beside text": [said("assistant", {"text": "see"}, {"image": {"format": "png"}})],
}

CHANGED = {
    "an assistant's empty content": [said("assistant")],
    "an assistant's blank text": [said("assistant", {"text": " \n"})],
    "an assistant's None text": [said("assistant", {"text": None})],
    "a blank text beside a tool use": [said("assistant", {"text": ""}, tool_use("request_approval"))],
    "an invalid tool name": [said("assistant", tool_use("bad name!"))],
    "a tool name of 65 characters": [said("assistant", tool_use("a" * 65))],
    "a message without a role (treated as the assistant's)": [{"content": [{"text": ""}]}],
    "a blank text after a good history": [*HISTORY, said("assistant", {"text": ""})],
}


def test_strands_function_is_the_one_entry_6_was_written_against() -> None:
    source = inspect.getsource(compat._STRANDS_NORMALIZE)
    assert hashlib.sha256(source.encode()).hexdigest() == STRANDS_SOURCE_SHA256


@pytest.mark.parametrize("messages", list(UNCHANGED.values()), ids=list(UNCHANGED))
def test_nothing_to_change_returns_the_messages_as_given_equal_to_strands_copy(messages: list[Any]) -> None:
    given = copy.deepcopy(messages)
    assert compat.normalize_if_needed(given) is given
    assert given == compat._STRANDS_NORMALIZE(copy.deepcopy(messages)) == messages


@pytest.mark.parametrize("messages", list(CHANGED.values()), ids=list(CHANGED))
def test_anything_to_change_is_strands_own_result_on_its_own_copy(messages: list[Any]) -> None:
    given = copy.deepcopy(messages)
    out = compat.normalize_if_needed(given)
    assert out is not given and given == messages  # Strands' copy changed, the caller's list not
    assert out == compat._STRANDS_NORMALIZE(copy.deepcopy(messages)) != messages


def test_what_strands_refuses_is_refused_the_same_way() -> None:
    for bad in ([said("assistant", {"text": 5})], [said("assistant", tool_use(7))]):
        with pytest.raises(Exception) as strands_error:
            compat._STRANDS_NORMALIZE(copy.deepcopy(bad))
        with pytest.raises(type(strands_error.value)):
            compat.normalize_if_needed(copy.deepcopy(bad))


def test_bootstrap_installs_it(tmp_path: Path) -> None:
    bootstrap(StoreIO(SqliteRows(str(tmp_path / "rows.db")), FileObjects(str(tmp_path / "o")))).close()
    assert streaming._normalize_messages is compat.normalize_if_needed
    compat.skip_needless_message_copies()  # twice is once
    assert streaming._normalize_messages is compat.normalize_if_needed

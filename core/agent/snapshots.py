"""Snapshot bytes in one place, through Strands' public `strands.types.Snapshot`: the paused
turn (pause/resume) and the chat's history use the same encoding.

The bytes are Strands' own session encoding (`encode_bytes_values` / `decode_bytes_values`: bytes
as {"__bytes_encoded__": true, "data": base64}), made by the JSON encoder's hooks in the same pass
that writes the JSON instead of by a copy of the whole tree first (issue 34: a snapshot is
encoded twice per approval cycle). tests/core/test_snapshot_encoding.py checks both ways agree.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from strands import Agent
from strands.types import Snapshot

from chat_approvals.core.agent.strands_compat import interrupt_state_doc

if TYPE_CHECKING:
    from strands.types._snapshot import SnapshotField, SnapshotPreset

BYTES_MARK = "__bytes_encoded__"


def _bytes_out(value: object) -> dict[str, Any]:
    if isinstance(value, bytes):
        return {BYTES_MARK: True, "data": base64.b64encode(value).decode()}
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _bytes_in(d: dict[str, Any]) -> Any:
    if d.get(BYTES_MARK) is True and "data" in d:
        return base64.b64decode(d["data"])
    return d


_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_bytes_out)


def encode(snap: Snapshot) -> bytes:
    return _ENCODER.encode(snap.to_dict()).encode()


def decode(raw: bytes) -> Snapshot:
    return Snapshot.from_dict(decode_doc(raw))


def decode_doc(raw: bytes) -> dict[str, Any]:
    """The snapshot's dict, bytes restored in the same pass (as `decode_bytes_values(json.loads(raw))`)."""
    doc: dict[str, Any] = json.loads(raw, object_hook=_bytes_in)
    return doc


def agent_bytes(
    agent: Agent,
    *,
    preset: SnapshotPreset | None = None,
    include: list[SnapshotField] | None = None,
    app_data: dict[str, Any] | None = None,
) -> bytes:
    """`encode(agent.take_snapshot(preset=..., include=..., app_data=...))` for a snapshot that holds
    the messages, with the messages read in place: `take_snapshot` deep-copies them so that its
    Snapshot outlives later turns, and these bytes are made before the agent runs again (issue 34:
    one copy per pause and one per finished turn). tests/core/test_snapshot_encoding.py checks both
    give the same JSON."""
    interrupts = preset == "session" or "interrupt_state" in (include or [])
    skipped: list[SnapshotField] = ["messages", "interrupt_state"] if interrupts else ["messages"]
    doc = agent.take_snapshot(preset=preset, include=include, exclude=skipped, app_data=app_data).to_dict()
    data = {"messages": agent.messages, **doc["data"]}  # the messages first, as in Strands' own
    if interrupts:  # without asdict's copies (core/agent/strands_compat.py, entry 7)
        data["interrupt_state"] = interrupt_state_doc(agent)
    doc["data"] = data
    try:
        return _ENCODER.encode(doc).encode()
    except TypeError:
        if not interrupts:
            raise
    # a value that is not plain JSON (asdict converts a dataclass): Strands' own snapshot
    return encode(agent.take_snapshot(preset=preset, include=include, app_data=app_data))


def load_owned(agent: Agent, snap: Snapshot) -> None:
    """`agent.load_snapshot(snap)` for a snapshot nothing else holds (just decoded from its bytes):
    the messages are handed to the agent instead of deep-copied first (issue 34: the copy grows
    with a restored history). The rest goes through `load_snapshot` as before."""
    data = dict(snap.data)
    messages = data.pop("messages", None)
    rest = Snapshot(
        scope=snap.scope,
        schema_version=snap.schema_version,
        created_at=snap.created_at,
        data=data,
        app_data=snap.app_data,
    )
    agent.load_snapshot(rest)
    if messages is not None:
        agent.messages = messages

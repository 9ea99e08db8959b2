"""Snapshot bytes in one place, through Strands' public `strands.types.Snapshot`: the paused
turn (pause/resume) and the chat's history use the same encoding."""

from __future__ import annotations

import json

from strands.types import Snapshot
from strands.types.session import decode_bytes_values, encode_bytes_values


def encode(snap: Snapshot) -> bytes:
    return json.dumps(encode_bytes_values(snap.to_dict()), separators=(",", ":")).encode()


def decode(raw: bytes) -> Snapshot:
    return Snapshot.from_dict(decode_bytes_values(json.loads(raw)))

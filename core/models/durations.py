"""Grant durations (`once`, 8h, 7d) and deny reasons as people write them."""

from __future__ import annotations

import re
from typing import Literal

ApproverMode = Literal["owner", "owner_or_approvers", "approvers"]
APPROVER_MODES: tuple[ApproverMode, ...] = ("owner", "owner_or_approvers", "approvers")  # least to most strict
ONCE = "once"
MAX_REASON = 500
_DURATION = re.compile(r"([1-9][0-9]{0,5})([mhdw])")
_UNIT = {"m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def duration_seconds(text: str) -> float:
    """`once` (0: this turn only) or N followed by m, h, d or w. Raises ValueError otherwise."""
    if text == ONCE:
        return 0.0
    m = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f'{text!r} is not a duration: use "once" or a number with m, h, d or w ("8h", "7d")')
    return int(m.group(1)) * _UNIT[m.group(2)]


def duration_label(d: str) -> str:
    """How a duration reads on a card: `once` is "This turn only"."""
    if d == "once":
        return "This turn only"
    n, unit = int(d[:-1]), {"m": "minute", "h": "hour", "d": "day", "w": "week"}[d[-1]]
    return f"{n} {unit}{'s' if n != 1 else ''}"


def clean_reason(text: str) -> str:
    """A deny reason as kept and shown: control characters removed (line breaks become spaces),
    surrounding space trimmed. Length is checked by the caller, after cleaning."""
    kept = "".join(" " if c in "\n\r\t" else c for c in text if c in "\n\r\t" or not _is_control(c))
    return " ".join(kept.split(" ")).strip()


def _is_control(c: str) -> bool:
    o = ord(c)
    return o < 32 or 127 <= o < 160 or c in "\u2028\u2029"

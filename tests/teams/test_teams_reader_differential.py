"""Workaround 17 reads an activity from the network as msrest reads it, for values of every JSON type.

Differential: the real Teams activities in tests/data/teams, each with one to three values replaced
by another JSON value (a string, number, bool, null, list or object where the schema expects another
type, a malformed date), read by `teams_deserializer.read_activity` (the plans) and by botbuilder's
own `Activity().deserialize`: the same model, attribute for attribute and type for type, or the same
error. No rule covers the equality itself; it keeps the edge's refusals (R20 and the 400s of
bots/teams_compat.py) exactly where msrest would put them.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from botbuilder.schema import Activity

from chat_approvals.bots import teams_deserializer

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "teams"
BODIES = 2_000
VALUES: list[Any] = [
    None, 0, 1, -5, 3.5, True, False, "", "x", "2024-01-01T00:00:00Z", "not a date", "1.5", 10**30, 1e308,
    [], [1], ["a"], [{}], [{"id": 3}], {}, {"id": 1}, {"id": "a", "name": 2}, {"a": {"b": [1, {"c": None}]}},
]  # fmt: skip


def activities() -> list[dict[str, Any]]:
    found = []
    for path in sorted(FIXTURES.glob("*.json")):
        record = json.loads(path.read_text())
        activity = record.get("activity") if isinstance(record, dict) else None
        if isinstance(activity, dict) and "type" in activity:
            found.append(activity)
    return found


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if prefix:
        yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        yield from paths(inner, (*prefix, key))


def replaced(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    holder: Any = body
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = copy.deepcopy(value)


def outcome(read: Any, body: dict[str, Any]) -> tuple[str, str, dict[str, str] | None]:
    try:
        activity = read(copy.deepcopy(body))
    except Exception as exc:  # the error's type is part of what must match
        return ("error", type(exc).__name__, None)
    shown = json.dumps(activity.serialize(keep_readonly=True), sort_keys=True, default=str)
    return ("read", shown, {k: type(v).__name__ for k, v in vars(activity).items()})


def test_the_plans_read_every_mutated_activity_as_msrest_does() -> None:
    teams_deserializer.apply()
    sources = activities()
    assert len(sources) >= 4, "the Teams fixtures are missing"
    rng = random.Random(17)
    differ = []
    for _ in range(BODIES):
        body = copy.deepcopy(rng.choice(sources))
        for _ in range(rng.randint(1, 3)):
            replaced(body, rng.choice(list(paths(body))), rng.choice(VALUES))
        own = outcome(lambda b: Activity().deserialize(b), body)
        if outcome(teams_deserializer.read_activity, body) != own:
            differ.append(body)
    assert not differ, f"{len(differ)} of {BODIES} read differently, the first: {json.dumps(differ[0])[:500]}"

"""Workaround 16's plans write an outgoing activity as msrest's own walk writes it, whatever it holds.

Differential: activities with one to six attributes set to values of every kind a caller could put
there (a str subclass, a str enum, a date, JSON with a non-string key or a tuple inside, models and
lists of them, None), serialised by `PresentOnlySerializer` with its plans and by the same
serialiser with the plans turned off (msrest's walk): the same body, or the same error. No rule
covers the equality itself; the Bot Connector must receive what msrest would have sent.
"""

from __future__ import annotations

import datetime
import json
import random
from collections.abc import Callable
from typing import Any

from botbuilder.schema import Activity, ActivityTypes, Attachment, ChannelAccount
from msrest.serialization import Model

from chat_approvals.bots import teams_serializer

ACTIVITIES = 3_000


class Sub(str):
    """A str subclass: msrest's walk, not the plan's copy, decides how it is written."""


VALUES: list[Callable[[], Any]] = [
    lambda: None, lambda: "text", lambda: Sub("sub"), lambda: 5, lambda: 2.5, lambda: True,
    lambda: ActivityTypes.message, lambda: datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
    lambda: {"a": 1, "b": [1, "x", None]}, lambda: {1: "a key that is not a string"},
    lambda: {"nested": {"deep": {"x": (1, 2)}}}, lambda: ["a", "b"], lambda: [None, "a"],
    lambda: ChannelAccount(id="u", name="n"), lambda: ChannelAccount(id="u", name=Sub("n")),
    lambda: [ChannelAccount(id="u", name="n")], lambda: [Attachment(content_type="x", content={"k": [1, 2]})],
]  # fmt: skip


class WalkOnly(teams_serializer.PresentOnlySerializer):
    """The same serialiser with workaround 16 off: every model goes down msrest's own walk."""

    def _fast(self, obj: Model) -> dict[str, Any]:
        raise teams_serializer._Unplain


def written(serializer: teams_serializer.PresentOnlySerializer, activity: Activity) -> tuple[str, str]:
    try:
        return ("body", json.dumps(serializer.body(activity, "Activity"), default=str))
    except Exception as exc:  # the error's type is part of what must match
        return ("error", type(exc).__name__)


def test_the_plans_write_every_activity_as_msrests_walk_does() -> None:
    classes = Activity._infer_class_models()
    planned, walked = teams_serializer.PresentOnlySerializer(classes), WalkOnly(classes)
    for serializer in (planned, walked):
        serializer.client_side_validation = False  # as the pooled connector clients run it
    rng = random.Random(16)
    attributes = list(Activity._attribute_map)
    differ = []
    for _ in range(ACTIVITIES):
        activity = Activity(type="message", text="hi")
        for name in rng.sample(attributes, rng.randint(1, 6)):
            setattr(activity, name, rng.choice(VALUES)())
        if written(planned, activity) != written(walked, activity):
            differ.append(activity)
    assert not differ, f"{len(differ)} of {ACTIVITIES} written differently, the first: {vars(differ[0])}"

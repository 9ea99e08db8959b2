"""Workaround 14 (bots/teams_compat.py): msrest's keys of a model, worked out once per model.

Reading a model (every incoming activity, each model nested in it, every connector response),
msrest finds its "additional properties", the keys it does not map, by first building the set of
the keys it maps: a regex split and a decode for each of the model's attributes (60 for an
Activity), every time. That set depends only on the model's attribute map, which is a class
constant, so here it is built once per map and kept: the same keys, the same additional
properties (tests/teams/test_teams_compat.py compares them). Everything else is msrest's own code.

Workaround 15 (`read_activity`): an incoming activity is read by one msrest Deserializer kept for
the process, where `Activity().deserialize(body)` built one per activity (a dict of every class in
botbuilder.schema, made again each time), and without msrest's XML key extractor, which answers
None for a dict: for a body parsed from JSON, at every level, always. The same models.
"""

from __future__ import annotations

from typing import Any

import msrest.serialization as _msrest
from botbuilder.schema import Activity
from msrest.serialization import Deserializer, rest_key_extractor

MAX_MAPS = 1024  # botbuilder's schema has a few hundred models; more means maps made on the fly

MSREST_OWN = Deserializer._build_additional_properties  # before `apply()`: what the tests compare with

# id(map) -> (the map, its keys). The map is held, so its id cannot be another map's while kept.
_known: dict[int, tuple[dict[str, Any], frozenset[str]]] = {}


def mapped_keys(attribute_map: dict[str, Any]) -> frozenset[str]:
    """The keys a model maps, as msrest's `_build_additional_properties` works them out."""
    entry = _known.get(id(attribute_map))
    if entry is not None and entry[0] is attribute_map:
        return entry[1]
    keys = frozenset(
        _msrest._decode_attribute_map_key(_msrest._FLATTEN.split(desc["key"])[0])
        for desc in attribute_map.values()
        if desc["key"] != ""
    )
    if len(_known) >= MAX_MAPS:
        _known.clear()
    _known[id(attribute_map)] = (attribute_map, keys)
    return keys


def build_additional_properties(self: Deserializer, attribute_map: dict[str, Any], data: Any) -> Any:
    """msrest 0.7.1's `Deserializer._build_additional_properties`, its known keys from `mapped_keys`."""
    if not self.additional_properties_detection:
        return None
    if "additional_properties" in attribute_map and attribute_map.get("additional_properties", {}).get("key") != "":
        # Check empty string. If it's not empty, someone has a real "additionalProperties"
        return None
    if isinstance(data, _msrest.ET.Element):
        data = {el.tag: el.text for el in data}
    missing_keys = set(data.keys()) - mapped_keys(attribute_map)
    return {key: data[key] for key in missing_keys}


def apply() -> None:
    """msrest's deserializer works out a model's keys once (idempotent; bots/teams_compat.py `apply`
    and the bench's bare Teams handler run it)."""
    Deserializer._build_additional_properties = build_additional_properties  # type: ignore[method-assign]


_reader: Deserializer | None = None


def activity_reader() -> Deserializer:
    """Workaround 15: the Deserializer `Activity.deserialize` builds, made once, for JSON only."""
    global _reader
    if _reader is None:
        reader = Deserializer(Activity._infer_class_models())
        reader.key_extractors = [rest_key_extractor]  # xml_key_extractor: None for every dict
        _reader = reader
    return _reader


def read_activity(body: Any) -> Activity:
    """An activity from its JSON body (parsed), as `Activity().deserialize(body)` reads it."""
    activity: Activity = activity_reader()("Activity", body)
    return activity

"""Workaround 14 (bots/teams_compat.py): msrest's keys of a model, worked out once per model.

Reading a model (every incoming activity, each model nested in it, every connector response),
msrest finds its "additional properties", the keys it does not map, by first building the set of
the keys it maps: a regex split and a decode for each of the model's attributes (60 for an
Activity), every time. That set depends only on the model's attribute map, which is a class
constant, so here it is built once per map and kept: the same keys, the same additional
properties (tests/teams/test_teams_compat.py compares them). Everything else is msrest's own code.
"""

from __future__ import annotations

from typing import Any

import msrest.serialization as _msrest
from msrest.serialization import Deserializer

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

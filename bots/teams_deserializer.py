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

Workaround 17 (`PlainDeserializer`): reading a model from a JSON object, msrest copies each
attribute's description, runs its key extractors and dispatches the value by a type lookup in a
list, raising and catching a NameError for every string. Here a plan made once per class reads the
values msrest keeps as they are (a `str` for a str attribute, a bool, an int, a float, JSON for an
`object`, a nested object or list of them for a model) and hands every other value (a date, an
enum, a number where a string is mapped) to msrest's `deserialize_data`, as msrest does for each
attribute; msrest's own code finds the additional properties and builds the model. The same
models, attribute for attribute and type for type (tests/teams/test_teams_compat.py).
"""

from __future__ import annotations

from typing import Any

import msrest.serialization as _msrest
from botbuilder.schema import Activity
from msrest.exceptions import DeserializationError, raise_with_traceback
from msrest.serialization import Deserializer, Model, rest_key_extractor, xml_key_extractor

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


class _Unplain(Exception):
    """A value the plan does not read as msrest would: msrest's `deserialize_data` reads it."""


def _json_read(value: Any) -> Any:
    """msrest's `deserialize_object` on JSON values (a new dict or list, the same scalars)."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is dict:
        return {k: _json_read(v) for k, v in value.items()}
    if kind is list:
        return [_json_read(v) for v in value]
    raise _Unplain


# How a plan reads an attribute (workaround 17): the kinds msrest keeps as they are
_STR, _BOOL, _INT, _FLOAT, _OBJECT, _MODEL, _MODEL_LIST, _OTHER = range(8)
_BASIC = {"str": _STR, "bool": _BOOL, "int": _INT, "float": _FLOAT, "object": _OBJECT}
_EXACT = {_STR: str, _BOOL: bool, _INT: int, _FLOAT: float}
_MODEL_CLASSIFY = Model._classify.__func__  # type: ignore[attr-defined]  # msrest's: the class itself, unless polymorphic
_JSON_EXTRACTORS = ([rest_key_extractor], [rest_key_extractor, xml_key_extractor])  # for a dict: the same keys

Plan = tuple[tuple[str, str, int, str, Any], ...]  # (attribute, JSON key, kind, type, model class)


def _plan(cls: type, dependencies: dict[str, Any]) -> Plan | None:
    """How to read `cls` from a JSON object, or None when msrest does more than look each key up
    (a flattened or escaped key, a polymorphic class, a class that classifies itself)."""
    if cls.__dict__.get("_subtype_map") or cls._classify.__func__ is not _MODEL_CLASSIFY:  # type: ignore[attr-defined]
        return None
    plan = []
    for attr, desc in cls._attribute_map.items():  # type: ignore[attr-defined]
        key, data_type = desc["key"], desc["type"]
        if attr == "additional_properties" and key == "":
            continue  # msrest skips it too
        if not key or "." in key or "\\" in key:
            return None
        kind, model = _BASIC.get(data_type, _OTHER), dependencies.get(data_type.strip("[]"))
        if kind == _OTHER and isinstance(model, type) and issubclass(model, Model):
            kind = _MODEL if data_type[0] != "[" else _MODEL_LIST
        plan.append((attr, key, kind, data_type, model))
    return tuple(plan)


class PlainDeserializer(Deserializer):
    """msrest's Deserializer with workaround 17's plans for JSON objects."""

    def __init__(self, classes: dict[str, type] | None = None) -> None:
        super().__init__(classes)
        self._plans: dict[type, Plan | None] = {}  # per reader: its dependencies name the models

    def _deserialize(self, target_obj: Any, data: Any) -> Any:
        if type(data) is dict and self.key_extractors in _JSON_EXTRACTORS:
            cls = self.dependencies.get(target_obj) if isinstance(target_obj, str) else target_obj
            if isinstance(cls, type) and issubclass(cls, Model):
                if cls not in self._plans:
                    self._plans[cls] = _plan(cls, self.dependencies)
                plan = self._plans[cls]
                if plan is not None:
                    return self._read(cls, plan, data)
        return super()._deserialize(target_obj, data)

    def _read(self, cls: type, plan: Plan, data: dict[str, Any]) -> Any:
        attrs: dict[str, Any] = {}
        for attr, key, kind, data_type, model in plan:
            raw = data.get(key)
            if raw is None:
                attrs[attr] = None
            elif kind in _EXACT and type(raw) is _EXACT[kind]:
                attrs[attr] = raw
            elif (
                (kind == _MODEL and type(raw) is dict) or (kind == _MODEL_LIST and type(raw) is list) or kind == _OBJECT
            ):
                try:
                    attrs[attr] = self._nested(kind, model, raw)
                except Exception:  # msrest's reading again, for its own error (a list wraps its items')
                    attrs[attr] = self._own(cls, raw, data_type)
            else:
                attrs[attr] = self._own(cls, raw, data_type)
        additional = self._build_additional_properties(cls._attribute_map, data)  # type: ignore[attr-defined]
        return self._instantiate_model(cls, attrs, additional)

    def _nested(self, kind: int, model: Any, raw: Any) -> Any:
        if kind == _MODEL:
            return self._deserialize(model, raw)
        if kind == _OBJECT:
            return _json_read(raw)
        if not all(type(x) is dict for x in raw):
            raise _Unplain
        return [self._deserialize(model, x) for x in raw]

    def _own(self, cls: type, raw: Any, data_type: str) -> Any:
        """msrest's reading of one value, and its error when that fails, as its `_deserialize` raises it."""
        try:
            return self.deserialize_data(raw, data_type)
        except (AttributeError, TypeError, KeyError) as err:
            raise_with_traceback(DeserializationError, "Unable to deserialize to object: " + type(cls).__name__, err)
            raise  # not reached: raise_with_traceback raises


_reader: Deserializer | None = None


def activity_reader() -> Deserializer:
    """Workaround 15: the Deserializer `Activity.deserialize` builds, made once, for JSON only
    (workaround 17: with plans)."""
    global _reader
    if _reader is None:
        reader = PlainDeserializer(Activity._infer_class_models())
        reader.key_extractors = [rest_key_extractor]  # xml_key_extractor: None for every dict
        _reader = reader
    return _reader


def read_activity(body: Any) -> Activity:
    """An activity from its JSON body (parsed), as `Activity().deserialize(body)` reads it."""
    activity: Activity = activity_reader()("Activity", body)
    return activity


def read_plainly(client: Any) -> None:
    """Give a connector client, and its operation groups (each holds the client's deserialiser), a
    `PlainDeserializer` with the same models and settings (workaround 17, for its responses)."""
    old = client._deserialize
    new = PlainDeserializer(old.dependencies)
    new.key_extractors = list(old.key_extractors)
    new.additional_properties_detection = old.additional_properties_detection
    for holder in (client, *vars(client).values()):
        if getattr(holder, "_deserialize", None) is old:
            holder._deserialize = new

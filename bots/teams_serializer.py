"""Workaround 12 (bots/teams_compat.py): msrest's serialiser, visiting only the attributes that are set.

msrest serialises a model by walking its whole attribute map: for each attribute it copies the
attribute's description, runs the key transformer (a regex split) and asks `serialize_data`, which
raises a ValueError for a None value that `_serialize` then catches and skips. An Activity maps 60
attributes and a reply sets about ten, so most of each reply's serialisation (about 40 us of
120 us) was spent raising and catching. Here msrest's own `_serialize` runs on a view of the model
whose map holds only the attributes that are not None, in the map's order: the same body, key
for key and in the same order (tests/teams/test_teams_compat.py compares them), for every model
nested inside too.

Its key transformer is msrest's `full_restapi_key_transformer` with its answer kept per attribute
key: msrest split each attribute's key with a regex and decoded the parts on every serialisation
(about 12 us of a reply's 99), and the parts depend on that key string alone.

Workaround 16 (`_plan`, `_fast`): what msrest's walk does for a model whose values are all of the
plain kinds a reply holds (a `str` in a str attribute, a model in a model attribute, JSON values
in an `object` one: msrest copies those as they are) is done from a plan made once per class,
without msrest's per-attribute dispatch (a type lookup in a list, an AttributeError raised and
caught for every string, the key merge). Any other value (an enum, a date, a dict where a model
is mapped, a subclass of str) sends the whole model down msrest's own path, as does `body()`'s
"just in case this is a dict" pass: with every model-typed value already a model that pass only
walks. The same bodies, key for key and in order (tests/teams/test_teams_compat.py).
"""

from __future__ import annotations

import functools
from enum import Enum
from typing import Any

from msrest.serialization import _FLATTEN as _MSREST_FLATTEN
from msrest.serialization import Model, Serializer, full_restapi_key_transformer

MAX_KEYS = 4096  # attribute keys remembered: botbuilder's schema maps a few hundred


class _SetAttributes:
    """A model as msrest's `_serialize` reads it, its attribute map cut to the attributes that are set.
    Everything else (the validation rules, `additional_properties`, `is_xml_model`) is the model's."""

    __slots__ = ("_attribute_map", "_model")

    def __init__(self, model: Model, attribute_map: dict[str, Any]) -> None:
        self._model = model
        self._attribute_map = attribute_map

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def __str__(self) -> str:  # msrest names the model in its error messages
        return str(self._model)


@functools.lru_cache(maxsize=MAX_KEYS)
def _rest_keys(key: str) -> tuple[str, ...]:
    return tuple(full_restapi_key_transformer(key, {"key": key}, None)[0])


def remembered_rest_keys(key: str, attr_desc: dict[str, Any], value: Any) -> tuple[list[str], Any]:
    """msrest's `full_restapi_key_transformer`, its keys worked out once per attribute key (a new
    list each time, as msrest's is)."""
    return list(_rest_keys(attr_desc["key"])), value


class _Unplain(Exception):
    """A value workaround 16's plan does not copy as msrest would: msrest's own path serialises it."""


# How a plan copies an attribute's value (workaround 16): the kinds msrest copies as they are
_STR, _BOOL, _INT, _FLOAT, _OBJECT, _OBJECT_DICT, _STR_LIST, _MODEL, _MODEL_LIST, _OTHER = range(10)
_BASIC = {"str": _STR, "bool": _BOOL, "int": _INT, "float": _FLOAT, "object": _OBJECT}
_BASIC.update({"{object}": _OBJECT_DICT, "[str]": _STR_LIST})
_EXACT = {_STR: str, _BOOL: bool, _INT: int, _FLOAT: float}

Plan = tuple[tuple[str, str, int], ...]  # (attribute, JSON key, kind), in the attribute map's order


def _plan(cls: type, dependencies: dict[str, Any]) -> Plan | None:
    """The plan of a model class, or None when msrest's walk does more than copy for it (XML, a
    read-only or flattened attribute, two attributes on one key, a polymorphic class). An
    attribute of another type (a date, a dict of models) is serialised by msrest when it is set."""
    plan: list[tuple[str, str, int]] = []
    ok = not cls.is_xml_model() and not getattr(cls, "_subtype_map", None)  # type: ignore[attr-defined]
    validation: dict[str, Any] = getattr(cls, "_validation", {})
    for attr, desc in getattr(cls, "_attribute_map", {}).items():
        key, kind = desc["key"], _BASIC.get(desc["type"], _OTHER)
        model = dependencies.get(desc["type"].strip("[]"))
        if kind == _OTHER and isinstance(model, type) and issubclass(model, Model):
            kind = _MODEL if desc["type"][0] != "[" else _MODEL_LIST
        if not key or len(_MSREST_FLATTEN.split(key)) > 1 or "\\" in key:
            ok = False
        if validation.get(attr, {}).get("readonly") or any(key == k for _, k, _ in plan):
            ok = False
        plan.append((attr, key, kind))
    return tuple(plan) if ok else None


def _json_copy(value: Any) -> Any:
    """msrest's `serialize_object` on JSON values (a new dict or list, the same scalars)."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise _Unplain
            out[k] = _json_copy(v)
        return out
    if kind is list:
        return [_json_copy(v) for v in value]
    raise _Unplain


class PresentOnlySerializer(Serializer):
    def __init__(self, classes: dict[str, type] | None = None) -> None:
        super().__init__(classes)
        if self.key_transformer is full_restapi_key_transformer:  # msrest's default
            self.key_transformer = remembered_rest_keys
        self._plans: dict[type, Plan | None] = {}  # per serialiser: its dependencies name the models

    def _fast(self, obj: Model) -> dict[str, Any]:
        """Workaround 16: `obj` serialised by its class's plan; _Unplain for anything else."""
        cls = type(obj)
        if cls not in self._plans:
            self._plans[cls] = _plan(cls, self.dependencies)
        plan = self._plans[cls]
        if plan is None:
            raise _Unplain
        out: dict[str, Any] = {}
        for attr, key, kind in plan:
            value = getattr(obj, attr, None)
            if value is None:
                continue
            if kind in _EXACT:
                if type(value) is _EXACT[kind]:
                    out[key] = value
                elif kind == _STR and isinstance(value, Enum):  # botbuilder's str enums
                    out[key] = value.value  # what msrest's serialize_unicode answers
                else:
                    raise _Unplain
            elif kind == _MODEL:
                if not isinstance(value, Model):
                    raise _Unplain
                out[key] = self._fast(value)
            elif kind == _OBJECT:
                out[key] = _json_copy(value)
            elif kind in (_MODEL_LIST, _STR_LIST):
                if type(value) is not list:
                    raise _Unplain
                items: list[Any] = []
                for item in value:
                    if item is None:
                        items.append(None)
                    elif kind == _STR_LIST and type(item) is str:
                        items.append(item)
                    elif kind == _MODEL_LIST and isinstance(item, Model):
                        items.append(self._fast(item))
                    else:
                        raise _Unplain
                out[key] = items
            elif kind == _OBJECT_DICT:
                if type(value) is not dict:
                    raise _Unplain
                out[key] = _json_copy(value)
            else:
                raise _Unplain
        return out

    def _plain(self, kwargs: dict[str, Any]) -> bool:
        """Nothing asked of msrest's walk that the plan does not do (XML, another key transformer)."""
        return self.key_transformer is remembered_rest_keys and not kwargs.get("is_xml") and kwargs.keys() <= _CONTEXT

    def body(self, data: Any, data_type: str, **kwargs: Any) -> Any:
        if isinstance(data, Model) and not self.client_side_validation and not kwargs and self._plain(kwargs):
            model = self.dependencies.get(data_type)
            if isinstance(model, type) and issubclass(model, Model) and not model.is_xml_model():
                try:
                    return self._fast(data)
                except _Unplain:
                    pass
        return super().body(data, data_type, **kwargs)

    def _serialize(self, target_obj: Any, data_type: str | None = None, **kwargs: Any) -> Any:
        if not data_type and isinstance(target_obj, Model) and self._plain(kwargs):
            try:
                return self._fast(target_obj)
            except _Unplain:
                pass
        if not data_type and isinstance(target_obj, Model):
            full: dict[str, Any] = type(target_obj)._attribute_map
            target_obj = _SetAttributes(
                target_obj, {k: d for k, d in full.items() if getattr(target_obj, k, None) is not None}
            )
        return super()._serialize(target_obj, data_type, **kwargs)


# What msrest's own walk passes down, and Model.serialize's keep_readonly (a plan is made only for
# a class without read-only attributes)
_CONTEXT = frozenset({"is_xml", "serialization_ctxt", "keep_readonly"})


def serialize_set_attributes_only(client: Any) -> None:
    """Give a connector client, and its operation groups (each holds the client's serialiser), a
    `PresentOnlySerializer` with the same models and settings."""
    old = client._serialize
    new = PresentOnlySerializer(old.dependencies)
    new.client_side_validation = old.client_side_validation
    if old.key_transformer is not full_restapi_key_transformer:  # msrest's own: kept per key (above)
        new.key_transformer = old.key_transformer
    for holder in (client, *vars(client).values()):
        if getattr(holder, "_serialize", None) is old:
            holder._serialize = new

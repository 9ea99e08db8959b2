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
"""

from __future__ import annotations

import functools
from typing import Any

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


class PresentOnlySerializer(Serializer):
    def __init__(self, classes: dict[str, type] | None = None) -> None:
        super().__init__(classes)
        if self.key_transformer is full_restapi_key_transformer:  # msrest's default
            self.key_transformer = remembered_rest_keys

    def _serialize(self, target_obj: Any, data_type: str | None = None, **kwargs: Any) -> Any:
        if not data_type and isinstance(target_obj, Model):
            full: dict[str, Any] = type(target_obj)._attribute_map
            target_obj = _SetAttributes(
                target_obj, {k: d for k, d in full.items() if getattr(target_obj, k, None) is not None}
            )
        return super()._serialize(target_obj, data_type, **kwargs)


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

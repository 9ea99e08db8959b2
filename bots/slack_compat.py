"""slack_sdk 3.48 workarounds the Slack front end needs (the URL one is `slack_config.remember_urls`).

1. Block Kit's `to_dict()` (every message the front end sends: `cards/slack_blocks.py`
   `block_dicts`) validates each model, then copies its set attributes, generically: for each model
   it looks up every instance attribute again to see whether it is a validator, sorts the union of
   those names with the class's validator names each time, and walks a list of exceptions for
   every attribute it copies. `apply()` replaces `JsonObject.validate_json` and
   `JsonObject.get_non_null_attributes` with the same steps done once per class where they
   depend on the class alone: the same validators run in the same order (so the same
   SlackObjectFormationError for an invalid model), the same dicts. A model whose instance
   attributes shadow a validator or a class descriptor, or hold a validator themselves, and a class
   with its own `get_object_attribute`, go through slack_sdk's own code.
   tests/bots/test_slack_compat.py compares both on every message the renderers make.
2. Each Web API call first asks whether its method is deprecated: an environment read and three
   scans of slack_sdk's prefix lists, every call, for the few methods a process calls. `apply()`
   has the async client ask slack_sdk's own function only for a method that starts with one of
   those prefixes (worked out once per method name); for any other it would warn of nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from slack_sdk.models import basic_objects as _sdk
from slack_sdk.models.basic_objects import JsonObject
from slack_sdk.web import async_base_client as _sdk_client
from slack_sdk.web import deprecation as _sdk_deprecation

log = logging.getLogger(__name__)

SDK_VALIDATE = JsonObject.validate_json  # slack_sdk's own, before `apply()`: what the tests compare with
SDK_NON_NULL = JsonObject.get_non_null_attributes
_SDK_GET_ATTRIBUTE = JsonObject.get_object_attribute

# class -> (its validator names in slack_sdk's order, the names an instance attribute must not take)
_plans: dict[type, tuple[tuple[str, ...], frozenset[str]]] = {}


def _plan(cls: type) -> tuple[tuple[str, ...], frozenset[str]]:
    plan = _plans.get(cls)
    if plan is None:
        names = _sdk._class_validator_names(cls)
        # a data descriptor (a property) would be read by getattr instead of the instance's value
        descriptors = {n for n in dir(cls) if hasattr(getattr(cls, n, None), "__set__")}
        plan = _plans[cls] = (tuple(sorted(names)), frozenset(names | descriptors))
    return plan


def validate_json(self: JsonObject) -> None:
    """slack_sdk's `validate_json`: every validator of the model, in name order."""
    names, reserved = _plan(type(self))
    for name, value in vars(self).items():
        if name.startswith("__"):
            continue  # slack_sdk leaves these out too
        if name in reserved or _sdk._is_validator(value):
            SDK_VALIDATE(self)  # an instance attribute takes part: slack_sdk's own walk
            return
    for name in names:
        getattr(self, name)()


def _compatible(value: Any) -> Any:
    """slack_sdk's `to_dict_compatible`: lists (and tuples) as lists, models as their dicts."""
    if isinstance(value, (list, tuple)):
        return [_compatible(v) for v in value]
    to_dict = getattr(value, "to_dict", None)
    if to_dict and callable(to_dict):
        return {k: _compatible(v) for k, v in value.to_dict().items()}
    return value


def get_non_null_attributes(self: JsonObject) -> dict[str, Any]:
    """slack_sdk's `get_non_null_attributes`: the set attributes, sorted, an empty one only where
    slack_sdk allows it (its exceptions are looked at for an empty value only)."""
    if type(self).get_object_attribute is not _SDK_GET_ATTRIBUTE:
        return SDK_NON_NULL(self)
    out: dict[str, Any] = {}
    for key in sorted(self.attributes):
        value = getattr(self, key, None)
        if value is None:
            continue
        if getattr(value, "__len__", None) is not None and not len(value) > 0:
            kind = getattr(self, "type", None)
            allowed = _sdk.EMPTY_ALLOWED_TYPE_AND_PROPERTY_LIST
            if not any(kind == e["type"] and key == e["property"] for e in allowed):
                continue
        out[key] = _compatible(value)
    return out


SDK_DEPRECATION: Callable[[str], None] | None = getattr(_sdk_deprecation, "show_deprecation_warning_if_any", None)
MAX_METHODS = 256  # method names remembered: a process calls a handful

_deprecated: dict[str, bool] = {}  # method name -> it starts with a deprecated prefix


def _is_deprecated(method: str) -> bool:
    known = _deprecated.get(method)
    if known is None:
        prefixes = (
            *_sdk_deprecation.deprecated_method_prefixes_2020_01,
            *_sdk_deprecation.deprecated_method_prefixes_2023_07,
            *_sdk_deprecation.deprecated_method_prefixes_2024_09,
        )
        known = bool(method) and method.startswith(prefixes)
        if len(_deprecated) >= MAX_METHODS:
            _deprecated.clear()
        _deprecated[method] = known
    return known


def show_deprecation_warning_if_any(method_name: str) -> None:
    """slack_sdk's own check (its environment switch, its warning) for a deprecated method only."""
    if _is_deprecated(method_name) and SDK_DEPRECATION is not None:
        SDK_DEPRECATION(method_name)


# slack_sdk's private names the workarounds read or replace. The dependency is a range (>=3.33,<4):
# a slack_sdk without one of them keeps its own code, slower, never broken.
NEEDED = (
    (_sdk, "_class_validator_names"),
    (_sdk, "_is_validator"),
    (_sdk, "EMPTY_ALLOWED_TYPE_AND_PROPERTY_LIST"),
    (_sdk_client, "show_deprecation_warning_if_any"),
    (_sdk_deprecation, "show_deprecation_warning_if_any"),
    (_sdk_deprecation, "deprecated_method_prefixes_2020_01"),
    (_sdk_deprecation, "deprecated_method_prefixes_2023_07"),
    (_sdk_deprecation, "deprecated_method_prefixes_2024_09"),
)


def fits() -> bool:
    """The installed slack_sdk has every name the workarounds rely on."""
    return all(hasattr(module, name) for module, name in NEEDED)


def apply() -> None:
    """Workarounds 1 and 2. Idempotent; run when a Web API client is made (`slack_config.web_client`).
    Nothing is replaced on a slack_sdk that lacks a name they rely on (`NEEDED`)."""
    if not fits():
        if not is_applied():
            log.info("slack_sdk's own to_dict and deprecation check kept: a name bots/slack_compat.py needs is missing")
        return
    JsonObject.validate_json = validate_json  # type: ignore[method-assign]
    JsonObject.get_non_null_attributes = get_non_null_attributes  # type: ignore[method-assign]
    _sdk_client.show_deprecation_warning_if_any = show_deprecation_warning_if_any


def is_applied() -> bool:
    return JsonObject.validate_json is validate_json

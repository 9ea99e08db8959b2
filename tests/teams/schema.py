"""The official Adaptive Card 1.5 schema (shipped in shared/schemas) as a validator for tests."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
_CANDIDATES = [ROOT / "tests" / "data" / "schemas", ROOT.parent / "shared" / "schemas"]


def schema_path(name: str) -> Path:
    for folder in _CANDIDATES:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(name)


@cache
def _card_validator() -> jsonschema.Draft6Validator:
    schema = json.loads(schema_path("adaptive-card-1.5.json").read_text())
    return jsonschema.Draft6Validator(schema)


def assert_valid_card(card: dict[str, Any]) -> None:
    """Every card the project emits must pass the official schema (strict: no unknown keys)."""
    errors = sorted(_card_validator().iter_errors(card), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.5"

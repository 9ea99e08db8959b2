"""core/text.py's fast paths (issue 34) give what the full walk gives: valid text passes as it
is, and a lone surrogate anywhere (a key, a nested value, past ASCII) is still found or replaced
(R20: only valid text crosses an edge)."""

from __future__ import annotations

from chat_approvals.core.text import first_invalid, scalar_json

BAD = "x\ud800y"


def test_scalar_json_returns_valid_text_as_it_is_and_replaces_a_lone_surrogate_anywhere() -> None:
    fine = {"sites": ["a.example", "ü.example"], "n": 1, "ok": True, "none": None, "f": 1.5}
    assert scalar_json(fine) is fine
    assert scalar_json("ü") == "ü" and scalar_json(3) == 3
    assert scalar_json({"why": BAD}) == {"why": "x\ufffdy"}
    assert scalar_json({BAD: [1, {"deep": [BAD]}]}) == {"x\ufffdy": [1, {"deep": ["x\ufffdy"]}]}
    assert scalar_json([BAD, "ok"]) == ["x\ufffdy", "ok"]


def test_first_invalid_finds_a_lone_surrogate_past_the_ascii_and_number_shortcuts() -> None:
    assert first_invalid({"a": [1, 2.0, True, None, "plain", "ü"]}) is None
    assert first_invalid({"a": [1, 2.0, {"b": BAD}]}) == "a[2].b"
    assert first_invalid({BAD: 1}) == "a key"
    assert first_invalid(("ok", BAD)) == "[1]"
    assert first_invalid(BAD) == "the value"


def test_a_model_held_in_a_field_was_checked_when_it_was_built() -> None:
    """Strict's field check passes a model of ours as it is (it checked its own text when built);
    the same model given as data is built there, and a lone surrogate in it is refused (R20)."""
    import pytest
    from pydantic import ValidationError

    from chat_approvals.core.models import ApprovalCard, CardOffer

    fields = dict(card_id="c_" + "a" * 22, chat="c1", owner="alice", platform="http", reason="why")
    card = ApprovalCard(**fields, sites=["a.example"], urls=[], packages=[], created_at=1.0, expires_at=2.0)
    assert CardOffer(card=card, secret="s").card is card
    with pytest.raises(ValidationError, match="not valid Unicode"):
        CardOffer(card={**card.model_dump(), "reason": BAD}, secret="s")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="not valid Unicode"):
        CardOffer.model_validate({"card": {**card.model_dump(), "sites": ["ok", BAD]}, "secret": "s"})
    with pytest.raises(ValidationError, match="not valid Unicode"):
        ApprovalCard(**{**fields, "owner": BAD}, sites=[], urls=[], packages=[], created_at=1.0, expires_at=2.0)

"""R15 as a property: no input but an explicit, well-formed approval ever approves."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from chat_approvals.core.models import parse_answer

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
payloads = st.one_of(
    json_values,
    st.dictionaries(st.sampled_from(["approved", "packages", "Approved", "extra"]), json_values, max_size=3),
    st.fixed_dictionaries({"approved": json_values}),
    st.fixed_dictionaries({"approved": st.just(True), "packages": json_values}),
)
statuses = st.one_of(st.sampled_from(["resolved", "cancelled", "RESOLVED", "", "approved"]), json_values)


def well_formed_approval(status: Any, payload: Any) -> bool:
    if status != "resolved" or not isinstance(payload, dict) or payload.get("approved") is not True:
        return False
    if set(payload) == {"approved"}:
        return True
    return (
        set(payload) == {"approved", "packages"}
        and isinstance(payload["packages"], list)
        and all(isinstance(p, str) for p in payload["packages"])
    )


@given(statuses, payloads)
def test_r15_only_an_explicit_well_formed_approval_approves(status: Any, payload: Any) -> None:
    answer = parse_answer(status, payload)
    assert answer.approved == well_formed_approval(status, payload)
    if not answer.approved:
        assert answer.packages is None


def test_r15_examples() -> None:
    assert parse_answer("resolved", {"approved": True}).approved
    assert parse_answer("resolved", {"approved": True, "packages": ["a"]}).packages == ["a"]
    for status, payload in [
        ("cancelled", {"approved": True}),
        ("resolved", {"approved": 1}),
        ("resolved", {"approved": "true"}),
        ("resolved", {}),
        ("resolved", None),
        ("resolved", {"approved": True, "packages": None}),
        ("resolved", {"approved": True, "packages": [1]}),
        ("resolved", {"approved": True, "by": "me"}),
        (None, {"approved": True}),
    ]:
        assert parse_answer(status, payload).approved is False, (status, payload)

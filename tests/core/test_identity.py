"""core/identity.py is the one home of every platform id shape (R17): the policy's approver lists
(core/protocol/policy.py) accept exactly the ids a signed-in person's identity is built from."""

from __future__ import annotations

import pytest

from chat_approvals.core.identity import SlackUser, TeamsUser, stated_http_user
from chat_approvals.core.protocol.policy import PolicyError, parse_policy

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
SLACK_USERS = [
    "U0123ABC",
    "W9",
    "U" + "A" * 31,
    "U" + "A" * 32,
    "u0123abc",
    "U",
    "U0-12",
    "T0123",
]  # S…: user groups, see tests/core/test_policy.py
GUIDS = [TENANT, "00000000-0000-0000-0000-0000000000001", "00000000-0000-0000-0000-00000000000", "not-a-guid"]
HTTP_USERS = ["sec-alice", "", "slack:T0:U0", "TEAMS:x", "bob\n", "ok user"]


def policy_accepts(platform: str, value: str) -> bool:
    try:
        parse_policy(f'[approvers]\n{platform} = ["{value.encode("unicode_escape").decode()}"]\n')
    except PolicyError:
        return False
    return True


@pytest.mark.parametrize("user", SLACK_USERS)
def test_a_slack_user_id_is_one_shape_in_the_policy_and_in_identities(user: str) -> None:
    as_identity = SlackUser.of(None, "T0TEAM", user) is not None and user[0] in "UW"  # B: bots are never listed
    assert policy_accepts("slack", f"T0TEAM:{user}") == as_identity
    assert policy_accepts("slack", user) == as_identity


@pytest.mark.parametrize("guid", GUIDS)
def test_an_entra_id_is_one_shape_in_the_policy_and_in_identities(guid: str) -> None:
    assert policy_accepts("teams", f"{TENANT}:{guid}") == (TeamsUser.of(TENANT, guid) is not None)


@pytest.mark.parametrize("user", HTTP_USERS)
def test_an_http_user_is_one_rule_in_the_policy_and_at_the_api(user: str) -> None:
    assert policy_accepts("http", user) == (stated_http_user(user) is not None)

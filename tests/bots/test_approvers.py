"""Who counts as an approver (issue 13), matched against whole identities (R17); Slack user
groups resolved through the stand-in Web API, cached by the injected clock."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from chat_approvals.bots.approvers import ApproverDirectory, SlackGroups, SlackLookup
from chat_approvals.cards.approvers import ApproverLists, is_listed
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.identity import SlackUser, TeamsUser
from chat_approvals.core.protocol.policy import may_answer, parse_policy
from tests.support.slack_standin import TEAM, SlackStandIn

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
OTHER_TENANT = "11111111-2222-3333-4444-555555555555"
OID = "0d5b6f3e-1c2a-4b7e-9f00-123456789abc"
OID2 = "9e5b6f3e-1c2a-4b7e-9f00-123456789abc"

LISTS = ApproverLists.parse(
    http=["sec-alice"],
    slack=["U0ALICE", "T0OTHER:U0BOB", "E0ORG:T0ORGA:U0CAROL", "S0SEC"],
    teams=[OID, f"{TENANT}:{OID2}"],
)


def slack(team: str, user: str, enterprise: str | None = None) -> str:
    who = SlackUser.of(enterprise, team, user)
    assert who is not None
    return who.key


def listed(identity: str, *, team: str | None = TEAM, tenant: str | None = None, groups: dict | None = None) -> bool:
    return is_listed(LISTS, identity, slack_team=team, group_members=groups or {}, teams_tenant=tenant)


def test_r17_http_approvers_are_the_stated_user_verbatim() -> None:
    assert listed("sec-alice")
    assert not listed("Sec-Alice") and not listed("sec-alice ") and not listed("sec-bob")


def test_r17_a_bare_slack_id_is_that_user_in_the_installed_workspace_only() -> None:
    assert listed(slack(TEAM, "U0ALICE"))
    assert not listed(slack("T0ELSEWHERE", "U0ALICE"))  # the same id elsewhere is a stranger
    assert not listed(slack(TEAM, "U0ALICE"), team=None)  # workspace unknown: nobody


def test_r17_slack_entries_with_a_workspace_or_org_name_it() -> None:
    assert listed(slack("T0OTHER", "U0BOB"))
    assert not listed(slack(TEAM, "U0BOB"))
    assert listed(slack("T0ORGA", "U0CAROL", "E0ORG"))
    assert not listed(slack("T0ORGA", "U0CAROL"))  # not in that org
    assert not listed(slack("T0ORGA", "U0CAROL", "E0OTHER"))


def test_r17_slack_group_members_count_in_the_installed_workspace() -> None:
    groups = {"S0SEC": frozenset({"U0DAVE"})}
    assert listed(slack(TEAM, "U0DAVE"), groups=groups)
    assert not listed(slack("T0ELSEWHERE", "U0DAVE"), groups=groups)
    assert not listed(slack(TEAM, "U0DAVE"))  # not resolved: nobody


def test_r17_teams_object_ids() -> None:
    key = TeamsUser(TENANT, OID).key
    assert listed(key) and listed(TeamsUser(OTHER_TENANT, OID).key)  # bare id, no app tenant: any tenant
    assert listed(key, tenant=TENANT)
    assert not listed(TeamsUser(OTHER_TENANT, OID).key, tenant=TENANT)  # SingleTenant: only its own
    assert listed(TeamsUser(TENANT, OID2.upper()).key)
    assert not listed(TeamsUser(OTHER_TENANT, OID2).key)  # TENANT:OID names its tenant
    assert not listed(f"teams:{TENANT}")  # not an identity


def test_no_identity_crosses_front_ends() -> None:
    assert not listed("U0ALICE") and not listed(OID)  # an HTTP user named like a Slack or Teams id
    assert not listed(slack(TEAM, "U0SEC"))


@pytest.mark.parametrize(
    ("mode", "owner_ok", "approver_ok", "approver_owner_ok", "stranger_ok"),
    [
        ("owner", True, False, True, False),
        ("owner_or_approvers", True, True, True, False),
        ("approvers", False, True, False, False),  # the requester may not approve, even when listed
    ],
)
def test_who_may_answer(
    mode: str, owner_ok: bool, approver_ok: bool, approver_owner_ok: bool, stranger_ok: bool
) -> None:
    assert may_answer(mode, owner="o", user="o", approver=False) is owner_ok
    assert may_answer(mode, owner="o", user="a", approver=True) is approver_ok
    assert may_answer(mode, owner="o", user="o", approver=True) is approver_owner_ok
    assert may_answer(mode, owner="o", user="s", approver=False) is stranger_ok


@pytest.fixture
async def standin() -> AsyncIterator[SlackStandIn]:
    s = await SlackStandIn().start()
    yield s
    await s.stop()


def client(standin: SlackStandIn) -> AsyncWebClient:
    return AsyncWebClient(token="xoxb-test", base_url=standin.api_url)


async def test_slack_user_groups_resolve_through_the_web_api_and_are_cached(standin: SlackStandIn) -> None:
    standin.usergroups["S0SEC"] = ["U0DAVE", "U0ERIN"]
    clock = ManualClock()
    groups = SlackGroups(client(standin), clock, ttl=300)
    assert await groups.members("S0SEC") == {"U0DAVE", "U0ERIN"}
    standin.usergroups["S0SEC"] = ["U0ERIN"]  # Dave leaves the group
    assert await groups.members("S0SEC") == {"U0DAVE", "U0ERIN"}  # cached
    assert len(standin.of("usergroups.users.list")) == 1
    clock.advance(301)
    assert await groups.members("S0SEC") == {"U0ERIN"}
    assert [c.args["usergroup"] for c in standin.of("usergroups.users.list")] == ["S0SEC", "S0SEC"]


async def test_a_group_that_cannot_be_resolved_counts_nobody_and_is_asked_again(standin: SlackStandIn) -> None:
    clock = ManualClock()
    groups = SlackGroups(client(standin), clock)
    assert await groups.members("S0GONE") == frozenset()
    standin.usergroups["S0GONE"] = ["U0DAVE"]
    assert await groups.members("S0GONE") == {"U0DAVE"}  # the failure was not cached


async def test_the_directory_asks_groups_only_for_slack_users_not_listed_by_id(standin: SlackStandIn) -> None:
    standin.usergroups["S0456DEF"] = ["U0DAVE"]
    policy = parse_policy('[approvers]\nhttp = ["sec-alice"]\nslack = ["U0123ABC", "S0456DEF"]\n')
    directory = ApproverDirectory(policy, slack=SlackLookup(client(standin), ManualClock()))
    assert await directory.is_approver("sec-alice")
    assert await directory.is_approver(slack(TEAM, "U0123ABC"))
    assert not standin.of("usergroups.users.list")  # listed by id: no lookup
    assert await directory.is_approver(slack(TEAM, "U0DAVE"))
    assert not await directory.is_approver(slack(TEAM, "U0EVE"))
    assert not await directory.is_approver(slack("T0ELSEWHERE", "U0DAVE"))
    assert len(standin.of("usergroups.users.list")) == 1

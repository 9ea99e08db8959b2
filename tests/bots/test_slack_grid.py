"""Issue 31: Enterprise Grid. Installed org-wide, the app serves every workspace of the enterprise with
the org's one token, and a person there is the enterprise and the user (R17): a DM card in one
workspace and a channel card in another, approved by an approver from a third, clicks with
`team: null` accepted. Installed in one workspace only, `team: null` is refused as before, and a
user of another enterprise is a stranger."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from chat_approvals.bots.slack_install import record_key
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards import wording as cw
from chat_approvals.core.identity import SlackUser
from tests.support import slack_payloads as P
from tests.support.slack_rig import SlackRig, buttons, running
from tests.support.slack_standin import Call

GRID = "E0GRID01"
ONE, TWO, THREE = "T0GRIDONE", "T0GRIDTWO", "T0GRIDTRE"
OWNER, COLLEAGUE, APPROVER, STRANGER = "W0OWNER01", "W0COLLEAG", "W0APPROVR", "W0RANDOM1"
GROUPIE, GROUP = "W0GROUPIE", "S0GRIDSEC"
DM_ONE, CHANNEL_TWO = "D0GRIDDM1", "C0GRIDCH2"
POLICY = f"""\
[approvers]
slack = ["{APPROVER}", "{GROUP}"]

[[rule]]
match = "example.org"
approvers = "owner_or_approvers"
"""
ORG = "download <https://example.org/data.csv>"


@pytest.fixture
async def rig() -> AsyncIterator[SlackRig]:
    async with running(SlackRig(oauth=True, policy=POLICY)) as r:
        r.standin.usergroups[GROUP] = [GROUPIE]
        yield r


def card_id(card: Call) -> str:
    return str(json.loads(buttons(card.args["blocks"])[0]["value"])["card"])


async def posted(rig: SlackRig, payload: dict[str, Any]) -> Call:
    before = len(rig.card_calls())
    assert await rig.send(*P.json_body(payload)) == (200, "")
    await rig.standin.wait_for(lambda s: len(rig.card_calls()) > before)
    await rig.settle()
    (card,) = rig.card_calls()[before:]
    return card


def dm(rig: SlackRig, *, team: str, user: str, org_wide: bool) -> dict[str, Any]:
    ts = rig.next_ts()
    return P.message_im(
        text=ORG, user=user, channel=DM_ONE, event_id=f"Ev{ts}", ts=ts, team=team, enterprise=GRID, org_wide=org_wide
    )


def mention(rig: SlackRig, *, team: str, user: str) -> dict[str, Any]:
    ts = rig.next_ts()
    p = P.app_mention(text=f"<@U0BOTUSER> {ORG}", user=user, channel=CHANNEL_TWO, event_id=f"Ev{ts}", ts=ts, team=team)
    p["enterprise_id"] = GRID
    p["authorizations"][0].update(team_id=None, enterprise_id=GRID, is_enterprise_install=True)
    return p


def click(
    rig: SlackRig, card: Call, *, user: str, team: str, enterprise: str = GRID, org_wide: bool = True
) -> dict[str, Any]:
    value = next(b["value"] for b in buttons(card.args["blocks"]) if b["action_id"] == sb.ACTION_APPROVE)
    ts = card.result["ts"]
    return P.block_actions(
        action_id=sb.ACTION_APPROVE, value=value, user=user, channel=card.args["channel"], message_ts=ts,
        message=rig.standin.messages[(card.args["channel"], ts)], thread_ts=card.args.get("thread_ts"),
        response_url=rig.standin.response_url(f"click-{user}"), team=team, enterprise=enterprise, org_wide=org_wide,
    )  # fmt: skip


async def test_org_wide_cards_in_two_workspaces_approved_from_a_third(rig: SlackRig) -> None:
    org_token = await rig.install(None, enterprise=GRID)
    dm_card = await posted(rig, dm(rig, team=ONE, user=OWNER, org_wide=True))
    channel_card = await posted(rig, mention(rig, team=TWO, user=COLLEAGUE))
    assert dm_card.token == channel_card.token == org_token
    for card, owner in ((dm_card, OWNER), (channel_card, COLLEAGUE)):
        p = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id(card))
        assert p is not None and p.owner == SlackUser(GRID, "*", owner).key  # the enterprise's person

    # A person of the org who is not an approver, and a user of another enterprise: strangers.
    before = await rig.snapshot(card_id(dm_card))
    assert await rig.click(click(rig, dm_card, user=STRANGER, team=THREE)) == (200, "")
    assert await rig.click(click(rig, dm_card, user=APPROVER, team=THREE, enterprise="E0OTHER1")) == (200, "")
    await rig.settle()
    after = await rig.snapshot(card_id(dm_card))
    assert (after["pointer"], after["grants"]) == (before["pointer"], before["grants"])
    refused = [e["actor"] for e in after["audit"] if e["kind"] == "refused_answer"]
    assert refused == [SlackUser(GRID, "*", STRANGER).key]  # the trail names the org's person; the other
    told = [c for c in rig.standin.of("response_url") if c.args["_hook"] == f"click-{APPROVER}"]
    assert len(told) == 1 and cw.NOT_INSTALLED in told[0].args["text"]  # enterprise never reached the card

    # The approver, from a third workspace, clicks with `team: null` as Slack sends it org-wide.
    for card in (dm_card, channel_card):
        assert await rig.click(click(rig, card, user=APPROVER, team=THREE)) == (200, "")
        await rig.settle()
        done = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id(card))
        assert done is not None and done.state == "done"
    updates = rig.standin.of("chat.update")
    assert {u.args["channel"] for u in updates} == {DM_ONE, CHANNEL_TWO} and {u.token for u in updates} == {org_token}


async def test_the_owner_answers_from_another_workspace_of_the_org(rig: SlackRig) -> None:
    """R17 with an org-wide install: the same person in another workspace of the enterprise is them."""
    await rig.install(None, enterprise=GRID)
    card = await posted(rig, dm(rig, team=ONE, user=OWNER, org_wide=True))
    assert await rig.click(click(rig, card, user=OWNER, team=TWO, org_wide=False)) == (200, "")
    await rig.settle()
    done = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id(card))
    assert done is not None and done.state == "done"


async def test_team_null_is_refused_under_a_single_workspace_install(rig: SlackRig) -> None:
    """Installed in one workspace of the enterprise, not org-wide: today's strict rule. A click with
    `team: null` names no installed workspace: refused with a message, nothing changed; the same
    person with their team is the workspace's person, and the owner from another workspace is not."""
    token = await rig.install(ONE, enterprise=GRID)
    card = await posted(rig, dm(rig, team=ONE, user=OWNER, org_wide=False))
    assert card.token == token
    p = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id(card))
    assert p is not None and p.owner == SlackUser(GRID, ONE, OWNER).key
    before = await rig.snapshot(card_id(card))
    assert await rig.click(click(rig, card, user=OWNER, team=ONE, org_wide=True)) == (200, "")
    await rig.settle()
    assert await rig.snapshot(card_id(card)) == before
    (told,) = [c for c in rig.standin.of("response_url") if c.args["_hook"] == f"click-{OWNER}"]
    assert cw.NOT_INSTALLED in told.args["text"]
    assert await rig.click(click(rig, card, user=OWNER, team=ONE, org_wide=False)) == (200, "")
    await rig.settle()
    done = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id(card))
    assert done is not None and done.state == "done"


async def test_approvals_command_lists_the_org_persons_grants(rig: SlackRig) -> None:
    """/approvals under an org-wide install: the caller is the enterprise's person, so the grant
    their approval made in the workspace is listed (and revocable) there."""
    await rig.install(None, enterprise=GRID)
    card = await posted(rig, dm(rig, team=ONE, user=OWNER, org_wide=True))
    assert await rig.click(click(rig, card, user=OWNER, team=ONE)) == (200, "")
    await rig.settle()
    fields = P.slash_command(
        text="", user=OWNER, channel=DM_ONE, response_url=rig.standin.response_url("cmd"), team=ONE
    )
    fields.update(enterprise_id=GRID, is_enterprise_install="true")
    assert (await rig.send(*P.form_body(fields)))[0] == 200
    await rig.settle()
    (listed,) = [c for c in rig.standin.of("response_url") if c.args["_hook"] == "cmd"]
    assert "example.org" in json.dumps(listed.args.get("blocks"))


async def test_a_user_group_of_the_org_approves_from_any_workspace(rig: SlackRig) -> None:
    """The policy's `S…` group under an org-wide install: resolved with the org's token
    (usergroups.users.list), its member approves from another workspace; a non-member does not."""
    org_token = await rig.install(None, enterprise=GRID)
    card = await posted(rig, dm(rig, team=ONE, user=OWNER, org_wide=True))
    before = await rig.snapshot(card_id(card))
    assert await rig.click(click(rig, card, user=STRANGER, team=TWO)) == (200, "")
    await rig.settle()
    assert (await rig.snapshot(card_id(card)))["pointer"] == before["pointer"]
    assert await rig.click(click(rig, card, user=GROUPIE, team=TWO)) == (200, "")
    await rig.settle()
    done = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id(card))
    assert done is not None and done.state == "done"
    lookups = rig.standin.of("usergroups.users.list")
    assert lookups and {c.token for c in lookups} == {org_token} and {c.args["usergroup"] for c in lookups} == {GROUP}


async def test_an_org_that_uninstalls_is_forgotten_and_its_clicks_refused(rig: SlackRig) -> None:
    await rig.install(None, enterprise=GRID)
    card = await posted(rig, dm(rig, team=ONE, user=OWNER, org_wide=True))
    assert await rig.send(*P.json_body(P.uninstalled(team=None, enterprise=GRID))) == (200, "")
    await rig.settle()
    assert await rig.approvals.installations.installation(record_key(GRID, None, True)) is None
    before = await rig.snapshot(card_id(card))
    assert await rig.click(click(rig, card, user=OWNER, team=ONE)) == (200, "")
    await rig.settle()
    assert await rig.snapshot(card_id(card)) == before
    (told,) = [c for c in rig.standin.of("response_url") if c.args["_hook"] == f"click-{OWNER}"]
    assert cw.NOT_INSTALLED in told.args["text"]

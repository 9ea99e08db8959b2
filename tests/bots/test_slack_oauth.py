"""Issue 31: the Slack front end installed by OAuth in many workspaces, through real Bolt and the
stand-in Web API: each workspace's token for its own cards, the installation store on this
project's store (tokens sealed, R19), uninstall, token refresh mid-turn, the OAuth `state`."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from chat_approvals.bots.slack_install import TokenBox, record_key
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards import wording as cw
from chat_approvals.core.identity import SlackUser
from chat_approvals.core.protocol.wording import STORE_UNAVAILABLE
from chat_approvals.store.base import StoreError
from tests.support import slack_payloads as P
from tests.support.serve_process import ROOT, free_port, stop, wait_healthy
from tests.support.slack_rig import OWNER, SlackRig, buttons, running
from tests.support.slack_standin import CLIENT_ID, CLIENT_SECRET, Call, SlackStandIn

A, B = "T0WORKSPA", "T0WORKSPB"
DM_A, DM_B = "D0DMINA01", "D0DMINB01"


@pytest.fixture
async def rig() -> AsyncIterator[SlackRig]:
    async with running(SlackRig(oauth=True)) as r:
        yield r


async def say(rig: SlackRig, text: str, *, team: str, channel: str, user: str = OWNER, **kw: Any) -> list[Call]:
    """`user` writes to the bot in `team`'s DM `channel`; returns the cards it posted."""
    before = len(rig.card_calls())
    ts = rig.next_ts()
    payload = P.message_im(text=text, user=user, channel=channel, event_id=f"Ev{ts}", ts=ts, team=team, **kw)
    assert await rig.send(*P.json_body(payload)) == (200, "")
    await rig.standin.wait_for(lambda s: len(rig.card_calls()) > before)
    await rig.settle()
    return rig.card_calls()[before:]


def click(rig: SlackRig, card: Call, *, team: str, user: str = OWNER, **kw: Any) -> dict[str, Any]:
    payload = rig.click_payload(card, user=user)
    again = P.block_actions(
        action_id=sb.ACTION_APPROVE, value=payload["actions"][0]["value"], user=user, channel=card.args["channel"],
        message_ts=card.result["ts"], message=payload["message"], thread_ts=card.args.get("thread_ts"),
        response_url=rig.standin.response_url(f"click-{team}"), team=team, **kw,
    )  # fmt: skip
    return again


def tokens_used(rig: SlackRig, since: int = 0) -> set[str | None]:
    return {c.token for c in rig.standin.calls[since:] if c.method not in ("response_url", "oauth.v2.access")}


async def test_install_two_workspaces_each_card_uses_its_own_token_and_a_stranger_is_refused(rig: SlackRig) -> None:
    """Install in A and B; a card in A; the same user id from B clicks it first: refused, nothing
    changed; the owner in A approves: the update and the reply go out with A's token only (R17)."""
    token_a, token_b = await rig.install(A), await rig.install(B)
    assert token_a != token_b
    since = len(rig.standin.calls)
    (card,) = await say(rig, P_FETCH, team=A, channel=DM_A)
    assert card.token == token_a
    card_id = json.loads(buttons(card.args["blocks"])[0]["value"])["card"]
    pointer = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id)
    assert pointer is not None and pointer.owner == SlackUser(None, A, OWNER).key
    assert pointer.card_location is not None and pointer.card_location["team"] == A  # where the token comes from

    before = await rig.snapshot(card_id)
    assert await rig.click(click(rig, card, team=B)) == (200, "")
    await rig.settle()
    assert await rig.snapshot(card_id) == before  # R17: the same user id from B is a stranger
    (refusal,) = rig.standin.of("chat.postEphemeral")
    assert refusal.token == token_b and refusal.args["user"] == OWNER  # told in their own workspace's name

    assert await rig.click(click(rig, card, team=A)) == (200, "")
    await rig.settle()
    done = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id)
    assert done is not None and done.state == "done"
    updates = rig.standin.of("chat.update")
    assert updates and {u.token for u in updates} == {token_a}
    card_calls = [c for c in rig.standin.calls[since:] if c.method in ("chat.postMessage", "chat.update")]
    assert {c.token for c in card_calls} == {token_a}  # the card, its updates, the reply: A's token only
    assert tokens_used(rig, since) == {token_a, token_b}  # B's: the one refusal, to B's person


P_FETCH = "please fetch http://data.example.test/data.csv"


async def test_tokens_are_sealed_at_rest(rig: SlackRig) -> None:
    """R19: the store alone holds no usable token: the record has the token only sealed."""
    token = await rig.install(A)
    db = sqlite3.connect(rig.folder / "rows.db")
    try:
        (record,) = db.execute("SELECT record FROM slack_installations WHERE key = ?", (record_key(None, A, False),))
    finally:
        db.close()
    assert token not in record[0] and "xoxb-" not in record[0]
    assert json.loads(record[0])["team_id"] == A


async def test_a_workspace_never_installed_gets_an_answer_and_nothing_changes(rig: SlackRig) -> None:
    """A click from a workspace without an installation: told through its response_url (no token
    needed), no resume, no Web API call."""
    await rig.install(A)
    (card,) = await say(rig, P_FETCH, team=A, channel=DM_A)
    card_id = json.loads(buttons(card.args["blocks"])[0]["value"])["card"]
    before, since = await rig.snapshot(card_id), len(rig.standin.calls)
    assert await rig.click(click(rig, card, team="T0NOTINST")) == (200, "")
    await rig.settle()
    assert await rig.snapshot(card_id) == before
    (told,) = [c for c in rig.standin.calls[since:] if c.method == "response_url"]
    assert cw.NOT_INSTALLED in told.args["text"] and told.args["_hook"] == "click-T0NOTINST"
    assert tokens_used(rig, since) == set()


def card_id_of(card: Call) -> str:
    return str(json.loads(buttons(card.args["blocks"])[0]["value"])["card"])


async def test_uninstall_then_a_click_is_refused_with_a_message_and_the_store_unchanged(rig: SlackRig) -> None:
    """app_uninstalled removes the installation; a later click on the workspace's card is told so
    through its response_url, and nothing changes (no resume, no Web API call)."""
    await rig.install(A)
    await rig.install(B)
    (card,) = await say(rig, P_FETCH, team=A, channel=DM_A)
    assert await rig.send(*P.json_body(P.uninstalled(team=A))) == (200, "")
    await rig.settle()
    assert await rig.approvals.installations.installation(record_key(None, A, False)) is None
    assert await rig.approvals.installations.installation(record_key(None, B, False)) is not None  # B keeps it
    before, since = await rig.snapshot(card_id_of(card)), len(rig.standin.calls)
    assert await rig.click(click(rig, card, team=A)) == (200, "")
    await rig.settle()
    assert await rig.snapshot(card_id_of(card)) == before
    (told,) = [c for c in rig.standin.calls[since:] if c.method == "response_url"]
    assert cw.NOT_INSTALLED in told.args["text"]
    assert tokens_used(rig, since) == set()


async def test_a_revoked_bot_token_removes_the_installation(rig: SlackRig) -> None:
    await rig.install(A)
    assert await rig.send(*P.json_body(P.tokens_revoked(team=A))) == (200, "")
    await rig.settle()
    assert await rig.approvals.installations.installation(record_key(None, A, False)) is None


async def expiring_soon(rig: SlackRig, team: str) -> None:
    """Time passes for the stored token: it now expires within a minute (inside Bolt's window)."""
    assert rig.front.oauth is not None
    store = rig.front.oauth.installations
    bot = await store.async_find_bot(enterprise_id=None, team_id=team)
    assert bot is not None and bot.bot_token_expires_at is not None
    bot.bot_token_expires_at = int(time.time()) + 60
    await store.async_save_bot(bot)


async def test_a_token_that_expires_mid_turn_is_refreshed_and_the_click_completes(rig: SlackRig) -> None:
    """Rotating tokens (12 h): the card went out with the first token; by the click it expires in a
    minute (as if eleven hours had passed) and Slack no longer takes it. The click refreshes it
    (oauth.v2.access, refresh grant), saves the new one sealed, and the card's update uses it."""
    rig.standin.token_lifetime = 12 * 3600
    first = await rig.install(A)
    (card,) = await say(rig, P_FETCH, team=A, channel=DM_A)
    assert card.token == first
    await expiring_soon(rig, A)
    rig.standin.tokens[first].expired = True
    assert await rig.click(click(rig, card, team=A)) == (200, "")
    await rig.settle()
    (refresh,) = [c for c in rig.standin.of("oauth.v2.access") if c.args.get("grant_type") == "refresh_token"]
    second = refresh.result["access_token"]
    done = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id_of(card))
    assert done is not None and done.state == "done"
    updates = rig.standin.of("chat.update")
    assert updates and {u.token for u in updates} == {second}
    assert all(c.result.get("ok") for c in rig.standin.calls if c.method.startswith("chat."))
    assert rig.front.oauth is not None
    bot = await rig.front.oauth.installations.async_find_bot(enterprise_id=None, team_id=A)
    assert bot is not None and bot.bot_token == second  # kept, for the next call and the next replica


async def test_a_refresh_that_fails_is_a_clear_answer_not_a_500(rig: SlackRig) -> None:
    rig.standin.token_lifetime = 12 * 3600
    await rig.install(A)
    (card,) = await say(rig, P_FETCH, team=A, channel=DM_A)
    await expiring_soon(rig, A)
    rig.standin.refresh_fails = True
    before, since = await rig.snapshot(card_id_of(card)), len(rig.standin.calls)
    assert await rig.click(click(rig, card, team=A)) == (200, "")
    await rig.settle()
    assert await rig.snapshot(card_id_of(card)) == before  # the card stays answerable
    (told,) = [c for c in rig.standin.calls[since:] if c.method == "response_url"]
    assert cw.TOKEN_REFRESH_FAILED in told.args["text"]
    # A message through Bolt in that workspace: acknowledged (200), not a server error.
    ts = rig.next_ts()
    payload = P.message_im(text="hello", user=OWNER, channel=DM_A, event_id=f"Ev{ts}", ts=ts, team=A)
    status, _ = await rig.send(*P.json_body(payload))
    assert status == 200


async def test_the_oauth_state_forged_replayed_expired_or_from_another_browser_is_refused(rig: SlackRig) -> None:
    """Bolt's state check on this project's state store: a state is the server's (HMAC), used once
    (the store's single-use claim), within ten minutes, and from the browser it was issued to."""
    state = await rig.begin_install()
    nonce, expiry, mac = state.split(".")
    forged = f"{nonce}.{int(expiry) + 3600}.{mac}"  # a longer life, the same MAC
    for bad in (forged, f"{nonce}.{expiry}.{mac[:-2]}AA", "not-a-state"):
        code = rig.standin.consent(A)
        assert (await rig.finish_install(bad, code))[0] == 401
        assert code in rig.standin.codes  # refused before Slack was asked to redeem the code
    assert (await rig.finish_install(state, rig.standin.consent(A), cookie="another-state"))[0] == 400
    assert (await rig.finish_install(state, rig.standin.consent(A)))[0] == 200  # the real one, once
    replay = rig.standin.consent(B)
    assert (await rig.finish_install(state, replay))[0] == 401  # replayed
    assert replay in rig.standin.codes
    late = await rig.begin_install()
    rig.clock.advance(601)
    assert (await rig.finish_install(late, rig.standin.consent(B)))[0] == 401  # expired
    assert await rig.approvals.installations.installation(record_key(None, B, False)) is None
    assert len(rig.standin.of("oauth.v2.access")) == 1  # only the one good install redeemed a code


@pytest.mark.parametrize(
    "query",
    [
        "",
        "?code=x",
        "?state=&code=x",
        "?state=%ff%fe%00&code=%ff",
        "?state=a.b.c&code=x&state=d.e.f",
        "?error=access_denied",
        "?error=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "?state=" + "A" * 4000,
    ],
)
async def test_the_redirect_refuses_what_it_cannot_use_with_a_4xx_page_never_a_500(rig: SlackRig, query: str) -> None:
    status, page, _ = await rig.get(f"/slack/oauth_redirect{query}", {"Cookie": "slack-app-oauth-state=a.b.c"})
    assert status < 500 and "<script>" not in page
    assert rig.standin.of("oauth.v2.access") == []  # no code was redeemed


async def test_serve_runs_many_workspaces_from_env_and_says_so(tmp_path: Path) -> None:
    """`chat-approvals serve` as its own process, OAuth configured only through the environment: the
    banner names the mode, and the install page is served with its state cookie."""
    standin = await SlackStandIn().start()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "CHAT_APPROVALS_"))}
    env.update(
        SLACK_CLIENT_ID=CLIENT_ID, SLACK_CLIENT_SECRET=CLIENT_SECRET, SLACK_SIGNING_SECRET=P.SIGNING_SECRET,
        CHAT_APPROVALS_SLACK_TOKEN_KEY=TokenBox.new_key(), CHAT_APPROVALS_SLACK_API_URL=standin.api_url,
    )  # fmt: skip
    cmd = [
        sys.executable,
        "-m",
        "chat_approvals",
        "serve",
        "--port",
        str(port),
        "--store",
        f"sqlite:///{tmp_path}/r.db",
    ]
    out = tmp_path / "stdout"
    with out.open("wb") as sink:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.DEVNULL)
    try:
        await wait_healthy(proc, port)
        url = f"http://127.0.0.1:{port}/slack/install"
        async with aiohttp.ClientSession() as session, session.get(url) as r:
            assert r.status == 200 and "slack-app-oauth-state" in r.headers.get("Set-Cookie", "")
    finally:
        await stop(proc)
        await standin.stop()
    banner = out.read_text()
    assert "Slack: many workspaces by OAuth (install at /slack/install, redirect /slack/oauth_redirect)" in banner


async def test_one_workspace_mode_acknowledges_an_uninstall_and_keeps_its_token() -> None:
    """SLACK_BOT_TOKEN mode is unchanged: an uninstall event is acknowledged (no retry from Slack)
    and logged; the token stays the one configured."""
    async with running(SlackRig()) as single:
        assert single.front.oauth is None
        assert await single.send(*P.json_body(P.uninstalled(team=P.TEAM))) == (200, "")
        cards = await single.owner_says(P_FETCH)
        assert [c.token for c in cards] == ["xoxb-test-token"]


async def test_installations_unreadable_the_click_is_told_the_store_is_unavailable(rig: SlackRig) -> None:
    """The store's installations cannot be read (a backend fault after its retries): the clicker is
    told so through the response_url (no token can be had), nothing changes, the card stays answerable."""
    await rig.install(A)
    (card,) = await say(rig, P_FETCH, team=A, channel=DM_A)
    before, since = await rig.snapshot(card_id_of(card)), len(rig.standin.calls)

    def down(*_: object) -> str | None:
        raise StoreError("injected: the table is unreachable")

    rows: Any = rig.store.rows
    rows.get_installation = down
    try:
        assert await rig.click(click(rig, card, team=A)) == (200, "")
        await rig.settle()
    finally:
        del rows.get_installation
    assert await rig.snapshot(card_id_of(card)) == before
    (told,) = [c for c in rig.standin.calls[since:] if c.method == "response_url"]
    assert STORE_UNAVAILABLE in told.args["text"]
    assert await rig.click(click(rig, card, team=A)) == (200, "")  # back: the same card still works
    await rig.settle()
    done = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id_of(card))
    assert done is not None and done.state == "done"


async def test_an_uninstall_while_the_store_is_down_is_acknowledged_not_a_500(rig: SlackRig) -> None:
    await rig.install(A)

    def down(*_: object) -> bool:
        raise StoreError("injected: the table is unreachable")

    rows: Any = rig.store.rows
    rows.delete_installation = down
    try:
        assert await rig.send(*P.json_body(P.uninstalled(team=A))) == (200, "")
        await rig.settle()
    finally:
        del rows.delete_installation
    assert await rig.approvals.installations.installation(record_key(None, A, False)) is not None

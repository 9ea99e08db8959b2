"""Issue 31: the installation store's sealing key (set, rotated, wrong) and the configuration that
turns OAuth on, checked before the server starts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from slack_sdk.oauth.installation_store import Installation

from chat_approvals.bots.logs import Redactor
from chat_approvals.bots.slack_config import SlackConfig
from chat_approvals.bots.slack_install import StoreInstallations, TokenBox, TokenKeyError, record_key
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.bootstrap import Root
from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from tests.support.slack_rig import open_root


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Root[StoreIO]]:
    r = open_root(tmp_path, ManualClock(1_800_000_000.0))
    try:
        yield r
    finally:
        r.close()


def installation(team: str = "T0ONE", token: str = "xoxb-one") -> Installation:
    return Installation(
        app_id="A1", team_id=team, user_id="U0INSTALLER", bot_token=token, bot_id="B1", bot_user_id="U0BOT",
        bot_refresh_token="xoxe-1-refresh", bot_token_expires_in=43200,
    )  # fmt: skip


async def stored(approvals: Approvals, team: str = "T0ONE") -> dict[str, str]:
    raw = await approvals.installations.installation(record_key(None, team, False))
    assert raw is not None
    return dict(json.loads(raw))


async def test_the_key_is_rotated_by_putting_the_new_one_first(root: Root[StoreIO]) -> None:
    """R19 and rotation: a record sealed under the old key still opens with "NEW,OLD", is sealed
    again under NEW when read, and then opens with NEW alone; the old key alone opens nothing."""
    old, new = TokenBox.new_key(), TokenBox.new_key()
    await StoreInstallations(root.approvals.installations, TokenBox([old])).async_save(installation())
    sealed_old = await stored(root.approvals)
    assert "xoxb-one" not in json.dumps(sealed_old) and "xoxe-1-refresh" not in json.dumps(sealed_old)

    both = StoreInstallations(root.approvals.installations, TokenBox.parse(f"{new}, {old}"))
    bot = await both.async_find_bot(enterprise_id=None, team_id="T0ONE")
    assert bot is not None and bot.bot_token == "xoxb-one" and bot.bot_refresh_token == "xoxe-1-refresh"
    assert (await stored(root.approvals))["bot_token"] != sealed_old["bot_token"]  # sealed again, under NEW

    only_new = StoreInstallations(root.approvals.installations, TokenBox([new]))
    again = await only_new.async_find_bot(enterprise_id=None, team_id="T0ONE")
    assert again is not None and again.bot_token == "xoxb-one"
    only_old = StoreInstallations(root.approvals.installations, TokenBox([old]))
    assert await only_old.async_find_bot(enterprise_id=None, team_id="T0ONE") is None  # no key opens it: no token


async def test_an_org_wide_install_answers_for_every_workspace_of_its_enterprise(root: Root[StoreIO]) -> None:
    store = StoreInstallations(root.approvals.installations, TokenBox([TokenBox.new_key()]))
    org = Installation(
        app_id="A1", enterprise_id="E0GRID", team_id=None, user_id="U0ADMIN", bot_token="xoxb-org",
        is_enterprise_install=True,
    )  # fmt: skip
    await store.async_save(org)
    for team in ("T0ONE", "T0TWO", None):
        bot = await store.async_find_bot(enterprise_id="E0GRID", team_id=team)
        assert bot is not None and bot.bot_token == "xoxb-org"
    assert await store.async_find_bot(enterprise_id="E0OTHER", team_id="T0ONE") is None
    assert await store.async_find_bot(enterprise_id=None, team_id="T0ONE") is None  # the team alone is not the org
    await store.async_delete_all(enterprise_id="E0GRID", team_id=None)  # the org removed the app
    assert await store.async_find_bot(enterprise_id="E0GRID", team_id="T0ONE") is None


def test_a_missing_or_malformed_sealing_key_is_a_clear_error() -> None:
    with pytest.raises(TokenKeyError, match="CHAT_APPROVALS_SLACK_TOKEN_KEY is not set"):
        TokenBox.parse(" , ")
    with pytest.raises(TokenKeyError, match="not a Fernet key"):
        TokenBox.parse("not-a-key")


OAUTH = {
    "SLACK_CLIENT_ID": "1111.2222",
    "SLACK_CLIENT_SECRET": "s3cret",
    "SLACK_SIGNING_SECRET": "signing",
    "CHAT_APPROVALS_SLACK_TOKEN_KEY": TokenBox.new_key(),
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"SLACK_CLIENT_SECRET": ""}, "SLACK_CLIENT_ID is set but SLACK_CLIENT_SECRET is not"),
        ({"SLACK_CLIENT_ID": ""}, "SLACK_CLIENT_SECRET is set but SLACK_CLIENT_ID is not"),
        ({"SLACK_BOT_TOKEN": "xoxb-1"}, "SLACK_BOT_TOKEN and SLACK_CLIENT_ID are both set"),
        ({"SLACK_SIGNING_SECRET": ""}, "OAuth installs need SLACK_SIGNING_SECRET"),
        ({"SLACK_APP_TOKEN": "xapp-1"}, "OAuth installs need SLACK_SIGNING_SECRET"),
        ({"CHAT_APPROVALS_SLACK_TOKEN_KEY": ""}, "CHAT_APPROVALS_SLACK_TOKEN_KEY is not set"),
        ({"CHAT_APPROVALS_SLACK_TOKEN_ROTATION_MINUTES": "0"}, "a whole number of minutes, at least 1"),
        ({"CHAT_APPROVALS_SLACK_TOKEN_ROTATION_MINUTES": "2h"}, "a whole number of minutes, at least 1"),
    ],
)
def test_a_half_configured_oauth_names_what_is_missing(change: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SlackConfig.from_env({**OAUTH, **change}).check()


def test_the_banner_says_which_mode_is_on() -> None:
    assert (
        SlackConfig.from_env({**OAUTH, "CHAT_APPROVALS_SLACK_TOKEN_ROTATION_MINUTES": "30"}).token_rotation_minutes
        == 30
    )
    oauth = SlackConfig.from_env(OAUTH)
    oauth.check()
    assert oauth.oauth and oauth.http_mode and not oauth.socket_mode
    assert oauth.describe().startswith("many workspaces by OAuth (install at /slack/install")
    single = SlackConfig.from_env({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"})
    single.check()
    assert single.describe().startswith("one workspace (SLACK_BOT_TOKEN), HTTP at /slack/events")


def test_rotating_tokens_and_their_refresh_tokens_are_redacted_from_logs() -> None:
    """Token rotation (issue 31) brings `xoxe.xoxb-…` bot tokens and `xoxe-1-…` refresh tokens."""
    redact = Redactor()
    out = redact("refresh_token=xoxe-1-My0xLTEyMzQ1Ni0 access xoxe.xoxb-1-MS0yLTM0NTY3ODkw done")
    assert "My0xLTEyMzQ1Ni0" not in out and "MS0yLTM0NTY3ODkw" not in out and out.endswith(" done")

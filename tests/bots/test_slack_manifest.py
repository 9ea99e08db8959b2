"""manifest/slack*.yaml: pasteable app manifests that agree with what the front end serves."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from chat_approvals.bots.slack_app import COMMAND, SlackConfig

ROOT = Path(__file__).resolve().parents[2] / "manifest"
BOTS = Path(__file__).resolve().parents[2] / "bots"
# The bot scope each Web API method the front end calls needs (api.slack.com/methods); None: any token.
METHOD_SCOPES: dict[str, str | None] = {
    "auth_test": None,
    "chat_postMessage": "chat:write",
    "chat_update": "chat:write",
    "chat_postEphemeral": "chat:write",
    "chat_getPermalink": None,
    "usergroups_users_list": "usergroups:read",  # a policy's S... approver ids (issue 13)
    "views_open": None,  # the Approve with edits modal (issue 32): needs a trigger id, no scope
}
# Scopes for what Slack sends us: events, interactivity and the slash command.
# member_joined_channel (the welcome when the bot is added) needs channels:read / groups:read.
EVENT_SCOPES = {"app_mentions:read", "im:history", "commands", "channels:read", "groups:read"}
EVENTS = ["app_mention", "message.im", "app_home_opened", "member_joined_channel", "app_uninstalled", "tokens_revoked"]
MANIFESTS = ["slack.yaml", "slack.socket-mode.yaml", "slack.oauth.yaml"]
SCOPES = EVENT_SCOPES | {s for s in METHOD_SCOPES.values() if s}


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / name).read_text())
    return doc


@pytest.mark.parametrize("name", MANIFESTS)
def test_manifest_declares_what_the_app_serves(name: str) -> None:
    m = load(name)
    assert set(m["oauth_config"]["scopes"]["bot"]) == SCOPES
    assert m["settings"]["event_subscriptions"]["bot_events"] == EVENTS
    assert m["settings"]["interactivity"]["is_enabled"] is True
    (cmd,) = m["features"]["slash_commands"]
    assert cmd["command"] == COMMAND and len(cmd["description"]) <= 100
    assert m["features"]["app_home"]["messages_tab_enabled"] is True  # people can DM the bot
    assert m["display_information"]["name"]


def test_every_subscribed_event_has_a_listener() -> None:
    """An event in the manifests that the app does not listen for would be acked and dropped."""
    source = (BOTS / "slack_ingress.py").read_text()
    listened = set(re.findall(r'@bolt\.event\("([a-z_]+)"\)', source))
    assert {e.split(".")[0] for e in EVENTS} == listened


def test_every_web_api_call_has_its_scope_in_the_manifests() -> None:
    """A method added to the front end must be listed above, so its scope reaches the manifests
    (a missing scope fails only in a real workspace, with `missing_scope`)."""
    source = "\n".join(p.read_text() for p in BOTS.glob("*.py"))
    called = set(re.findall(r"\bclient\.([a-z]+_[A-Za-z_]+)\b", source))
    # chat.* methods sent through SlackWeb._web (slack_sdk's api_call), by their Web API name
    called.discard("api_call")
    called |= {f"{family}_{name}" for family, name in re.findall(r'\b_web\W+"([a-z]+)\.([A-Za-z]+)"', source)}
    assert {"usergroups_users_list", "chat_postMessage", "chat_update"} <= called  # the patterns still find calls
    assert called <= METHOD_SCOPES.keys(), f"scope not recorded for {sorted(called - METHOD_SCOPES.keys())}"
    for name in MANIFESTS:
        granted = set(load(name)["oauth_config"]["scopes"]["bot"])
        assert {METHOD_SCOPES[m] for m in called} - {None} <= granted, name


@pytest.mark.parametrize("name", ["slack.yaml", "slack.oauth.yaml"])
def test_http_manifest_points_everything_at_one_endpoint(name: str) -> None:
    m = load(name)
    path = SlackConfig().path
    urls = [
        m["settings"]["event_subscriptions"]["request_url"],
        m["settings"]["interactivity"]["request_url"],
        m["features"]["slash_commands"][0]["url"],
    ]
    assert all(u.startswith("https://") and u.endswith(path) for u in urls)
    assert m["settings"]["socket_mode_enabled"] is False


def test_socket_mode_manifest_has_no_request_urls() -> None:
    m = load("slack.socket-mode.yaml")
    assert m["settings"]["socket_mode_enabled"] is True
    assert "request_url" not in m["settings"]["event_subscriptions"]
    assert "request_url" not in m["settings"]["interactivity"]
    assert "url" not in m["features"]["slash_commands"][0]


def test_oauth_manifest_redirects_to_the_install_route_and_rotates_tokens() -> None:
    """Issue 31: the redirect URL is Bolt's callback route, rotation and org-wide installs are on, and
    the scopes asked for at install time (SLACK_SCOPES' default) are the manifest's."""
    m = load("slack.oauth.yaml")
    cfg = SlackConfig()
    (redirect,) = m["oauth_config"]["redirect_urls"]
    assert redirect.startswith("https://") and redirect.endswith(cfg.redirect_path)
    assert m["settings"]["token_rotation_enabled"] is True and m["settings"]["org_deploy_enabled"] is True
    assert set(cfg.scopes.split(",")) == set(m["oauth_config"]["scopes"]["bot"])
    # the single-token manifests keep long-lived tokens: a rotating token would stop SLACK_BOT_TOKEN
    assert load("slack.yaml")["settings"]["token_rotation_enabled"] is False

"""Slack request bodies built from the real fixtures in tests/fixtures/slack (our own ids swapped in)
and Slack's request signing."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

FIXTURES = Path(__file__).parents[1] / "fixtures" / "slack"  # copied from the shared, real payloads

TEAM = "T0APPROV1"
SIGNING_SECRET = "test-signing-secret"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def block_actions(
    *,
    action_id: str,
    value: str,
    user: str,
    channel: str,
    message_ts: str,
    message: dict[str, Any] | None = None,
    thread_ts: str | None = None,
    state: dict[str, Any] | None = None,
    block_id: str = "b",
    response_url: str = "http://127.0.0.1:9/actions/none",
    team: str = TEAM,
    enterprise: str | None = None,
    org_wide: bool = False,
) -> dict[str, Any]:
    """`enterprise`: an Enterprise Grid workspace's click; `org_wide`: as Slack sends it to an
    org-wide install, `team: null` (the user keeps their team)."""
    p: dict[str, Any] = copy.deepcopy(fixture("block_actions_with_message.json"))
    p["user"] = {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team}
    p["team"] = None if org_wide else {"id": team, "domain": "approvals-test"}
    if enterprise:
        p["enterprise"] = {"id": enterprise, "name": "Grid"}
        p["is_enterprise_install"] = org_wide
    p["container"] = {
        "type": "message",
        "message_ts": message_ts,
        "channel_id": channel,
        "is_ephemeral": False,
    }
    if thread_ts:
        p["container"]["thread_ts"] = thread_ts
    p["channel"] = {"id": channel, "name": "approvals"}
    if message is not None:
        p["message"] = message
    else:
        p["message"] = {**p["message"], "ts": message_ts, "blocks": []}
    if state is not None:
        p["state"] = state
    p["response_url"] = response_url
    p["actions"] = [
        {
            "action_id": action_id,
            "block_id": block_id,
            "text": {"type": "plain_text", "text": "Approve"},
            "value": value,
            "type": "button",
            "action_ts": f"{time.time():.6f}",
        }
    ]
    return p


def slash_command(*, text: str, user: str, channel: str, response_url: str, team: str = TEAM) -> dict[str, str]:
    form = (FIXTURES / "slash_command_form.txt").read_text().strip()
    f = {k: v[0] for k, v in parse_qs(form).items()}
    f.update(
        command="/approvals",
        text=text,
        user_id=user,
        channel_id=channel,
        response_url=response_url,
        team_id=team,
    )
    f.pop("enterprise_id", None)
    f.pop("enterprise_name", None)
    return f


def message_im(
    *,
    text: str,
    user: str,
    channel: str,
    event_id: str,
    ts: str,
    team: str = TEAM,
    enterprise: str | None = None,
    org_wide: bool = False,
) -> dict[str, Any]:
    """`enterprise`: in an Enterprise Grid workspace; `org_wide`: delivered to an org-wide install
    (the authorization names the enterprise, no team)."""
    p: dict[str, Any] = copy.deepcopy(fixture("event_message_im_docs.json"))
    p["team_id"] = team
    p["event"].update(text=text, user=user, channel=channel, ts=ts, event_ts=ts)
    p["event_id"] = event_id
    auth = {"team_id": None if org_wide else team, "user_id": "U0BOTUSER", "is_bot": True}
    p["authorizations"] = [{**auth, "enterprise_id": enterprise, "is_enterprise_install": org_wide}]
    if enterprise:
        p["enterprise_id"] = enterprise
        p["event"]["user_team"] = team
    return p


def app_mention(*, text: str, user: str, channel: str, event_id: str, ts: str, team: str = TEAM) -> dict[str, Any]:
    p: dict[str, Any] = copy.deepcopy(fixture("event_app_mention_bolt.json"))
    p["team_id"] = team
    p["event"].update(text=text, user=user, channel=channel, team=team, ts=ts, event_ts=ts)
    p["event_id"] = event_id
    p["authorizations"][0]["team_id"] = team
    p["authorizations"][0]["user_id"] = "U0BOTUSER"
    return p


# ----------------------------------------------------------------------------- signing


def signature(secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def signed_headers(
    body: bytes, content_type: str, *, secret: str = SIGNING_SECRET, timestamp: int | None = None
) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature(secret, ts, body),
    }


def interactive_body(payload: dict[str, Any]) -> tuple[bytes, str]:
    return urlencode({"payload": json.dumps(payload)}).encode(), "application/x-www-form-urlencoded"


def form_body(fields: dict[str, str]) -> tuple[bytes, str]:
    return urlencode(fields).encode(), "application/x-www-form-urlencoded"


def json_body(payload: dict[str, Any]) -> tuple[bytes, str]:
    return json.dumps(payload).encode(), "application/json"


def view_submission(view: dict[str, Any], values: dict[str, str], *, user: str, team: str = TEAM) -> dict[str, Any]:
    """A submitted modal (the fixture's shape) for `view` as we opened it: `values` by block id, each
    the text typed into that block's plain_text_input."""
    p: dict[str, Any] = copy.deepcopy(fixture("view_submission.json"))
    p["user"] = {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team}
    p["team"] = {"id": team, "domain": "approvals-test"}
    p["view"].update(
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        blocks=view["blocks"],
        state={"values": {b: {"value": {"type": "plain_text_input", "value": text}} for b, text in values.items()}},
    )
    return p


def uninstalled(*, team: str | None, enterprise: str | None = None, event_id: str = "EvUninstall") -> dict[str, Any]:
    """`app_uninstalled`, as Slack sends it when a workspace (or, team None, an org) removes the app."""
    return {
        "token": "x",
        "team_id": team,
        "enterprise_id": enterprise,
        "api_app_id": "A0APPROV1",
        "event": {"type": "app_uninstalled", "event_ts": f"{time.time():.6f}"},
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "authorizations": [
            {"team_id": team, "enterprise_id": enterprise, "user_id": "U0BOTUSER", "is_bot": True,
             "is_enterprise_install": team is None}
        ],
    }  # fmt: skip


def tokens_revoked(*, team: str, event_id: str = "EvRevoked") -> dict[str, Any]:
    body = uninstalled(team=team, event_id=event_id)
    body["event"] = {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": ["U0BOTUSER"]}}
    return body

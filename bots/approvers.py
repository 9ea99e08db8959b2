"""Who counts as an approver (the policy's [approvers]), as the resume core asks it: one
`is_approver(identity)` over every front end. Slack user groups are resolved through the Web
API (usergroups.users.list) and cached for `ttl` seconds by the injected clock; the directory is
handed that lookup (`SlackLookup`) when it is built, never patched later."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from chat_approvals.bots.slack_config import SlackConfig, web_client
from chat_approvals.bots.slack_oauth import installed_tokens
from chat_approvals.bots.slack_web import NoToken, TokenSource, Workspace
from chat_approvals.cards.approvers import ApproverLists, is_listed
from chat_approvals.core.identity import parse_slack_user
from chat_approvals.core.models import Clock
from chat_approvals.core.ports import InstallationRecords
from chat_approvals.core.protocol import Policy

log = logging.getLogger("chat_approvals.approvers")

GROUP_TTL = 300.0


class SlackGroups:
    """Members (user ids) of Slack user groups, one usergroups.users.list per group (and workspace)
    per `ttl`. A failed lookup counts nobody (fail closed) and is not cached. `tokens`: many
    workspaces (issue 31), each group asked with the token of the workspace it is resolved in."""

    def __init__(
        self, client: AsyncWebClient, clock: Clock, ttl: float = GROUP_TTL, tokens: TokenSource | None = None
    ) -> None:
        self.client = client
        self.clock = clock
        self.ttl = ttl
        self.tokens = tokens
        self._cache: dict[tuple[str, Workspace | None], tuple[float, frozenset[str]]] = {}
        self._locks: dict[tuple[str, Workspace | None], asyncio.Lock] = {}

    async def members(self, group: str, workspace: Workspace | None = None) -> frozenset[str]:
        key = (group, workspace if self.tokens is not None else None)
        hit = self._cache.get(key)
        if hit is not None and hit[0] > self.clock.now():
            return hit[1]
        async with self._locks.setdefault(key, asyncio.Lock()):  # one lookup at a time per group
            hit = self._cache.get(key)
            if hit is not None and hit[0] > self.clock.now():
                return hit[1]
            try:
                token: dict[str, Any] = {} if self.tokens is None else {"token": await self.tokens.bot_token(workspace)}
                resp = await self.client.usergroups_users_list(usergroup=group, **token)
                users = frozenset(str(u) for u in resp.get("users") or [])
            except (SlackApiError, aiohttp.ClientError, TimeoutError, NoToken) as e:
                log.warning("slack user group %s could not be resolved (nobody counted from it): %s", group, e)
                return frozenset()
            self._cache[key] = (self.clock.now() + self.ttl, users)
            return users


class SlackLookup:
    """What the directory asks Slack: the workspace the app is installed in (auth.test, once: bare
    approver ids are its users) and the members of a user group (`SlackGroups`). Installed in many
    workspaces (`tokens`), there is no one workspace, and a group is asked in the clicker's own
    (their org's, under an org-wide install)."""

    def __init__(
        self, client: AsyncWebClient, clock: Clock, ttl: float = GROUP_TTL, tokens: TokenSource | None = None
    ) -> None:
        self.client = client
        self.tokens = tokens
        self.groups = SlackGroups(client, clock, ttl, tokens)
        self._team: str | None = None

    @classmethod
    def of(cls, cfg: SlackConfig, clock: Clock, records: InstallationRecords | None = None) -> SlackLookup | None:
        """The lookup for a configured Slack front end; None when Slack is off. Installed by OAuth,
        it reads each workspace's token from the installations in `records` (None: no lookup)."""
        if not cfg.enabled:
            return None
        if cfg.oauth:
            return cls(web_client(cfg), clock, tokens=installed_tokens(cfg, records)) if records is not None else None
        return cls(web_client(cfg, cfg.bot_token), clock)

    async def team(self) -> str | None:
        if self.tokens is not None:
            return None  # many workspaces: bare ids name nobody's (docs/slack.md)
        if self._team is None:
            team = (await self.client.auth_test()).get("team_id")
            self._team = str(team) if team else None
        return self._team


class ApproverDirectory:
    """The policy's approver lists, matched against whole identities (cards/approvers.py). `slack`:
    the Slack lookup (None: bare Slack ids and user groups match nobody)."""

    def __init__(self, policy: Policy, *, teams_tenant: str | None = None, slack: SlackLookup | None = None) -> None:
        a = policy.approvers
        self.lists = ApproverLists.parse(a.http, a.slack, a.teams)
        self.teams_tenant = teams_tenant
        self.slack = slack

    async def is_one_of(self, user: str, ids: list[str]) -> bool:
        """Is `user` one of `ids`, written as in [approvers] (a card's escalation approvers, issue
        33)? Matched as the directory matches its own lists, Slack user groups included."""
        if user.startswith("slack:"):
            lists = ApproverLists.parse([], ids, [])
        elif user.startswith("teams:"):
            lists = ApproverLists.parse([], [], ids)
        else:
            lists = ApproverLists.parse(ids, [], [])
        return await self._listed(lists, user)

    async def is_approver(self, user: str) -> bool:
        return await self._listed(self.lists, user)

    async def _listed(self, lists: ApproverLists, user: str) -> bool:
        team = None
        if user.startswith("slack:") and self.slack is not None:
            try:
                team = await self.slack.team()
            except (SlackApiError, aiohttp.ClientError, TimeoutError) as e:
                log.warning("slack workspace unknown (bare approver ids match nobody): %s", e)
        kw = {"slack_team": team, "teams_tenant": self.teams_tenant}
        if is_listed(lists, user, group_members={}, **kw):
            return True
        if not user.startswith("slack:") or self.slack is None or not lists.slack_groups:
            return False
        who = parse_slack_user(user)
        where = None if who is None else Workspace(None if who.org_wide else who.team, who.enterprise)
        members = {g: await self.slack.groups.members(g, where) for g in lists.slack_groups}
        return is_listed(lists, user, group_members=members, **kw)

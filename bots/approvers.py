"""Who counts as an approver (the policy's [approvers]), as the resume core asks it: one
`is_approver(identity)` over every front end. Slack user groups are resolved through the Web
API (usergroups.users.list) and cached for `ttl` seconds by the injected clock; the directory is
handed that lookup (`SlackLookup`) when it is built, never patched later."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from chat_approvals.bots.slack_config import SlackConfig, web_client
from chat_approvals.cards.approvers import ApproverLists, is_listed
from chat_approvals.core.models import Clock
from chat_approvals.core.protocol import Policy

log = logging.getLogger("chat_approvals.approvers")

GROUP_TTL = 300.0


class SlackGroups:
    """Members (user ids) of Slack user groups, one usergroups.users.list per group per `ttl`.
    A failed lookup counts nobody (fail closed) and is not cached."""

    def __init__(self, client: AsyncWebClient, clock: Clock, ttl: float = GROUP_TTL) -> None:
        self.client = client
        self.clock = clock
        self.ttl = ttl
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def members(self, group: str) -> frozenset[str]:
        hit = self._cache.get(group)
        if hit is not None and hit[0] > self.clock.now():
            return hit[1]
        async with self._locks.setdefault(group, asyncio.Lock()):  # one lookup at a time per group
            hit = self._cache.get(group)
            if hit is not None and hit[0] > self.clock.now():
                return hit[1]
            try:
                resp = await self.client.usergroups_users_list(usergroup=group)
                users = frozenset(str(u) for u in resp.get("users") or [])
            except (SlackApiError, aiohttp.ClientError, TimeoutError) as e:
                log.warning("slack user group %s could not be resolved (nobody counted from it): %s", group, e)
                return frozenset()
            self._cache[group] = (self.clock.now() + self.ttl, users)
            return users


class SlackLookup:
    """What the directory asks Slack: the workspace the app is installed in (auth.test, once: bare
    approver ids are its users) and the members of a user group (`SlackGroups`)."""

    def __init__(self, client: AsyncWebClient, clock: Clock, ttl: float = GROUP_TTL) -> None:
        self.client = client
        self.groups = SlackGroups(client, clock, ttl)
        self._team: str | None = None

    @classmethod
    def of(cls, cfg: SlackConfig, clock: Clock) -> SlackLookup | None:
        """The lookup for a configured Slack front end; None when Slack is off, or installed in many
        workspaces by OAuth (no one workspace for bare ids; see docs/slack.md for the forms to write)."""
        return cls(web_client(cfg, cfg.bot_token), clock) if cfg.enabled and not cfg.oauth else None

    async def team(self) -> str | None:
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

    async def is_approver(self, user: str) -> bool:
        team = None
        if user.startswith("slack:") and self.slack is not None:
            try:
                team = await self.slack.team()
            except (SlackApiError, aiohttp.ClientError, TimeoutError) as e:
                log.warning("slack workspace unknown (bare approver ids match nobody): %s", e)
        kw = {"slack_team": team, "teams_tenant": self.teams_tenant}
        if is_listed(self.lists, user, group_members={}, **kw):
            return True
        if not user.startswith("slack:") or self.slack is None or not self.lists.slack_groups:
            return False
        members = {g: await self.slack.groups.members(g) for g in self.lists.slack_groups}
        return is_listed(self.lists, user, group_members=members, **kw)

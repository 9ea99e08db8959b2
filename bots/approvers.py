"""Who counts as an approver (the policy's [approvers]), as the resume core asks it: one
`is_approver(identity)` over every front end. Slack user groups are resolved through the Web
API (usergroups.users.list) and cached for `ttl` seconds by the injected clock."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from chat_approvals.cards.approvers import ApproverLists, is_listed
from chat_approvals.core.models import Clock
from chat_approvals.core.policy import Policy

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


class ApproverDirectory:
    """The policy's approver lists, matched against whole identities (cards/approvers.py). The
    Slack front end attaches its workspace and group lookup when it is mounted."""

    def __init__(self, policy: Policy, *, teams_tenant: str | None = None) -> None:
        a = policy.approvers
        self.lists = ApproverLists.parse(a.http, a.slack, a.teams)
        self.teams_tenant = teams_tenant
        self.slack_groups: SlackGroups | None = None
        self.slack_team: Callable[[], Awaitable[str | None]] | None = None

    def attach_slack(self, groups: SlackGroups, team: Callable[[], Awaitable[str | None]]) -> None:
        self.slack_groups = groups
        self.slack_team = team

    async def is_approver(self, user: str) -> bool:
        team = None
        if user.startswith("slack:") and self.slack_team is not None:
            try:
                team = await self.slack_team()
            except (SlackApiError, aiohttp.ClientError, TimeoutError) as e:
                log.warning("slack workspace unknown (bare approver ids match nobody): %s", e)
        kw = {"slack_team": team, "teams_tenant": self.teams_tenant}
        if is_listed(self.lists, user, group_members={}, **kw):
            return True
        if not user.startswith("slack:") or self.slack_groups is None or not self.lists.slack_groups:
            return False
        members = {g: await self.slack_groups.members(g) for g in self.lists.slack_groups}
        return is_listed(self.lists, user, group_members=members, **kw)

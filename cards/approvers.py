"""Is this identity (R17, core/identity.py) one of the policy's approvers? Pure matching.

The policy lists approvers per front end, as people write them; each entry is matched against
the whole identity, so the same user id from another workspace or tenant is a stranger:

- http: the stated user, verbatim.
- slack: `U…`/`W…` is that user in the installed workspace (the team `auth.test` reports);
  `TEAM:USER` and `ENTERPRISE:TEAM:USER` name the workspace themselves; `S…` is a user group of
  the installed workspace, whose members the caller resolves (usergroups.users.list, cached).
- teams: `TENANT_ID:OBJECT_ID`, or a bare Entra object id: in the app's tenant when one is
  configured (SingleTenant), else in any tenant (object ids are GUIDs Entra assigns, unique
  across tenants).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from chat_approvals.core.identity import parse_slack_user, parse_teams_user


@dataclass(frozen=True)
class SlackEntry:
    user: str | None  # U…/W…
    group: str | None  # S…
    team: str | None  # None: the installed workspace
    enterprise: str | None


@dataclass(frozen=True)
class ApproverLists:
    http: frozenset[str]
    slack: tuple[SlackEntry, ...]
    teams: tuple[tuple[str | None, str], ...]  # (tenant or None, object id), lower case

    @classmethod
    def parse(cls, http: Sequence[str], slack: Sequence[str], teams: Sequence[str]) -> ApproverLists:
        """From the policy's lists (their shapes were checked when the file was loaded)."""
        entries = []
        for raw in slack:
            *scope, last = raw.split(":")
            enterprise = scope[0] if len(scope) == 2 else None
            team = scope[-1] if scope else None
            is_group = last.startswith("S")
            entries.append(SlackEntry(None if is_group else last, last if is_group else None, team, enterprise))
        people: list[tuple[str | None, str]] = []
        for raw in teams:
            tenant, _, oid = raw.rpartition(":")
            people.append((tenant.lower() or None, oid.lower()))
        return cls(frozenset(http), tuple(entries), tuple(people))

    @property
    def slack_groups(self) -> list[str]:
        return [e.group for e in self.slack if e.group is not None]


def is_listed(
    lists: ApproverLists,
    identity: str,
    *,
    slack_team: str | None,
    group_members: Mapping[str, frozenset[str]],
    teams_tenant: str | None,
) -> bool:
    """Does `identity` match an entry? `slack_team`: the installed workspace (None: unknown, so
    bare ids and groups match nobody); `group_members`: resolved S… groups (user ids of the
    installed workspace); `teams_tenant`: the app's own tenant, if it has one."""
    if identity.startswith("slack:"):
        who = parse_slack_user(identity)
        if who is None:
            return False
        for e in lists.slack:
            if e.enterprise is not None and e.enterprise != who.enterprise:
                continue
            if who.org_wide:
                # An org-wide install's person (issue 31): any workspace of the enterprise. A bare id
                # or group names the org's people, `E:T:U` one of them; `T:U` cannot be placed in the
                # org without its enterprise, so it matches nobody here.
                if e.team is not None and e.enterprise is None:
                    continue
            else:
                team = e.team if e.team is not None else slack_team
                if team is None or team != who.team:
                    continue
            if e.user is not None and e.user == who.user:
                return True
            if e.group is not None and who.user in group_members.get(e.group, frozenset()):
                return True
        return False
    if identity.startswith("teams:"):
        teams_user = parse_teams_user(identity)
        if teams_user is None:
            return False
        tenant, oid = teams_user.tenant.lower(), teams_user.aad_object_id.lower()
        for want_tenant, want_oid in lists.teams:
            scope = want_tenant or (teams_tenant.lower() if teams_tenant else None)
            if want_oid == oid and (scope is None or scope == tenant):
                return True
        return False
    return identity in lists.http

"""Who a person is, per platform (R17), as one canonical string that `core/` compares as opaque;
and the one home of every platform id shape (the policy's approver lists are checked with the
same shapes, core/protocol/policy.py).

The owner of a turn, whoever answers a card, grants, revokes and the audit trail all hold this
string, so the same Slack user id from another workspace (or another workspace of the same
Enterprise Grid org) is a different person, and a Teams user is their tenant + Entra object id,
never the channel's `from.id`. The parts are checked against the platforms' id shapes, so no part
can smuggle a separator and no two identities render alike. HTTP keeps the user the trusted
caller states, verbatim.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from chat_approvals.core.text import display_problem

NO_ENTERPRISE = "-"
# The team part of a person of an Enterprise Grid org whose install is org-wide (issue 31): there
# the enterprise and the user id are the whole identity, whatever workspace they write from.
ORG_WIDE = "*"
# A GUID; the Agents Playground's built-in ids have 13 digits in the last group, so that is allowed too.
GUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12,13}"
_GUID = re.compile(GUID)
PLATFORM_PREFIXES = ("slack:", "teams:")


def slack_id(first: str) -> str:
    """A Slack id's shape, as a pattern: one of the letters `first` (U/W/B users, S user groups,
    T teams, E enterprises), then up to 31 capitals and digits."""
    return rf"[{first}][A-Z0-9]{{1,31}}"


def _slack_id(value: object, first: str) -> str | None:
    if isinstance(value, str) and re.fullmatch(slack_id(first), value):
        return value
    return None


def may_be_http_user(stated: str) -> bool:
    """Non-empty, not in another platform's namespace, valid text without control characters or bidi
    overrides, and without surrounding or only white space (R20: one refusal on every route, so
    `" alice"` is never taken for `alice` anywhere; see stated_http_user)."""
    return (
        bool(stated)
        and stated == stated.strip()
        and not stated.lower().startswith(PLATFORM_PREFIXES)
        and display_problem(stated, "user") is None
    )


@dataclass(frozen=True)
class SlackUser:
    enterprise: str | None
    team: str
    user: str

    @property
    def key(self) -> str:
        return f"slack:{self.enterprise or NO_ENTERPRISE}:{self.team}:{self.user}"

    @classmethod
    def of(cls, enterprise: object, team: object, user: object) -> SlackUser | None:
        """The identity from a payload's parts, or None when a part is missing or not an id."""
        t, u = _slack_id(team, "T"), _slack_id(user, "UWB")
        e = _slack_id(enterprise, "E") if enterprise else None
        if t is None or u is None or (enterprise and e is None):
            return None
        return cls(e, t, u)

    @classmethod
    def across(cls, enterprise: object, user: object) -> SlackUser | None:
        """A person of an org-wide install: the enterprise and the user, any workspace of the org."""
        e, u = _slack_id(enterprise, "E"), _slack_id(user, "UWB")
        return cls(e, ORG_WIDE, u) if e is not None and u is not None else None

    @property
    def org_wide(self) -> bool:
        return self.team == ORG_WIDE


def parse_slack_user(key: str) -> SlackUser | None:
    parts = key.split(":")
    if len(parts) != 4 or parts[0] != "slack":
        return None
    if parts[2] == ORG_WIDE:
        return SlackUser.across(parts[1], parts[3])
    return SlackUser.of(None if parts[1] == NO_ENTERPRISE else parts[1], parts[2], parts[3])


@functools.lru_cache(maxsize=4096)
def slack_user_id(key: str) -> str:
    """The Slack user id to mention (`<@U…>`) for an identity; a non-Slack string as it is.
    Remembered: the same people ask and answer card after card, and reading an identity takes
    three regular-expression matches (a third of building a Slack outcome message)."""
    who = parse_slack_user(key)
    return who.user if who is not None else key


@dataclass(frozen=True)
class TeamsUser:
    tenant: str
    aad_object_id: str

    @property
    def key(self) -> str:
        return f"teams:{self.tenant.lower()}:{self.aad_object_id.lower()}"

    @classmethod
    def of(cls, tenant: object, aad_object_id: object) -> TeamsUser | None:
        """Tenant + Entra object id, both GUIDs; None when either is missing (no fallback to `from.id`)."""
        if not isinstance(tenant, str) or not isinstance(aad_object_id, str):
            return None
        if not _GUID.fullmatch(tenant) or not _GUID.fullmatch(aad_object_id):
            return None
        return cls(tenant, aad_object_id)


def parse_teams_user(key: str) -> TeamsUser | None:
    parts = key.split(":")
    if len(parts) != 3 or parts[0] != "teams":
        return None
    return TeamsUser.of(parts[1], parts[2])


def stated_http_user(stated: str) -> str | None:
    """HTTP's identity (R17): the user the trusted caller states, verbatim, unless it claims another
    platform's namespace (`slack:…`, `teams:…`) or holds control characters: those would let an HTTP
    caller stand in for a Slack or Teams user, so they are refused (None)."""
    return stated if may_be_http_user(stated) else None


def unverified(platform: str) -> str:
    """Stands in for a clicker whose full identity the payload did not give: it matches no owner
    (owners are always built from checked parts), so the click is refused like a stranger's."""
    return f"{platform}:unverified"

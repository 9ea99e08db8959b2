"""The approval policy: who may answer a card, how many must agree, for how long (docs/policy.md).

A TOML file, validated at start-up with pydantic: an unknown key, a bad duration or a rule that
matches nothing sensible is a `PolicyError` whose message names the file and line. Pure: no I/O
but reading the file, no platform; the approver lists are kept as the strings the file gives
(the front ends' identities are matched in `cards/approvers.py`).

A card covers several subjects (sites, packages, tools); each takes the first rule that matches
it (or the defaults), and the card takes the strictest of them: the stricter approvers mode
(owner < owner_or_approvers < approvers), the highest quorum, the durations every rule offers
(the shortest one if they share none), the shortest default and the shortest maximum.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from chat_approvals.core.identity import GUID, may_be_http_user, slack_id
from chat_approvals.core.models import APPROVER_MODES, ONCE, ApproverMode, CardPolicy, duration_seconds
from chat_approvals.core.text import first_invalid

Subject = tuple[str, str]  # (kind, name): ("site", host), ("package", name), ("tool", name)
KINDS = ("site", "package", "tool")


class ApproverCheck(Protocol):
    """Is this identity (R17) one of the policy's approvers? Implemented by the front ends' side
    (bots/approvers.py: lists per front end, Slack user groups resolved through the Web API)."""

    async def is_approver(self, user: str) -> bool: ...


class NoApprovers:
    async def is_approver(self, user: str) -> bool:
        return False


def may_answer(mode: str, *, owner: str, user: str, approver: bool) -> bool:
    """Who may answer a card: `owner` as before; `owner_or_approvers`; `approvers` (the requester
    may not answer, even when listed as an approver)."""
    if mode == "owner":
        return user == owner
    if mode == "owner_or_approvers":
        return user == owner or approver
    return approver and user != owner


class PolicyError(ValueError):
    """The policy file cannot be used; the message names the file, the line and the problem."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _check_duration(value: str) -> str:
    duration_seconds(value)  # raises ValueError naming the bad value
    return value


def _check_interval(value: str) -> str:
    """A timer's delay: a whole number of m, h, d or w (never `once`)."""
    if duration_seconds(value) <= 0:
        raise ValueError(f'{value!r} is not a time: use a number with m, h, d or w ("10m", "2h")')
    return value


def _is_escalation_id(v: str) -> bool:
    """An escalation approver is written as in [approvers]: a Slack or Teams id, or an HTTP user."""
    return bool(_SLACK_APPROVER.fullmatch(v) or _TEAMS_APPROVER.fullmatch(v)) or may_be_http_user(v)


def escalation_ids(ids: Sequence[str], platform: str | None) -> list[str]:
    """The escalation approvers a card of `platform` can name: Slack ids for Slack, Entra ids for
    Teams, the others for HTTP (a bare Slack-shaped id counts for Slack only)."""
    if platform == "slack":
        return [i for i in ids if _SLACK_APPROVER.fullmatch(i)]
    if platform == "teams":
        return [i for i in ids if _TEAMS_APPROVER.fullmatch(i)]
    if platform == "http":
        return [i for i in ids if not (_SLACK_APPROVER.fullmatch(i) or _TEAMS_APPROVER.fullmatch(i))]
    return []


class _Settings(_Model):
    approvers: ApproverMode | None = None
    quorum: int | None = Field(default=None, ge=1, le=20)
    durations: list[str] | None = Field(default=None, min_length=1, max_length=10)
    default_duration: str | None = None
    max_duration: str | None = None
    # Timers (issue 33): the card's life, reminders, escalation.
    expires_after: str | None = None
    remind_after: str | list[str] | None = None
    escalate_after: str | None = None
    escalate_to: list[str] | None = Field(default=None, min_length=1, max_length=50)
    escalate_channel: str | None = Field(default=None, pattern=r"^[CG][A-Z0-9]{2,31}$")
    escalate_conversation: str | None = Field(default=None, min_length=1, max_length=500)

    @field_validator("expires_after", "escalate_after")
    @classmethod
    def _interval(cls, value: str | None) -> str | None:
        return None if value is None else _check_interval(value)

    @field_validator("remind_after")
    @classmethod
    def _reminders(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value is None:
            return None
        times = [value] if isinstance(value, str) else value
        if not 1 <= len(times) <= 10:
            raise ValueError("remind_after takes one time or a list of 1 to 10")
        for t in times:
            _check_interval(t)
        if len(set(times)) != len(times):
            raise ValueError("a reminder time is listed twice")
        return value

    @field_validator("escalate_to")
    @classmethod
    def _escalate_to(cls, value: list[str] | None) -> list[str] | None:
        for v in value or []:
            if not _is_escalation_id(v):
                raise ValueError(f"{v!r} is not an approver id (a Slack or Teams id, or an HTTP user)")
        return value

    # Approve with edits on tool cards (issue 32): true, "approvers" (only approvers edit), false.
    edits: bool | Literal["approvers"] | None = None

    @field_validator("durations")
    @classmethod
    def _durations(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        for d in value:
            _check_duration(d)
        if len(set(value)) != len(value):
            raise ValueError("a duration is listed twice")
        return value

    @field_validator("default_duration", "max_duration")
    @classmethod
    def _one_duration(cls, value: str | None) -> str | None:
        return None if value is None else _check_duration(value)


class Defaults(_Settings):
    approvers: ApproverMode | None = "owner"
    quorum: int | None = Field(default=1, ge=1, le=20)


_HOST_GLOB = re.compile(r"[a-z0-9*?\[\]!.-]+")
_NAME_GLOB = re.compile(r"[A-Za-z0-9*?\[\]!._-]+")


def parse_match(raw: str) -> tuple[str, str]:
    """(kind, glob) of a rule's `match`: a host glob, `package:GLOB` or `tool:GLOB`."""
    text = raw.strip()
    if "/" in text:
        raise ValueError(f'{raw!r} looks like a URL: match takes a host glob such as "*.example.com"')
    kind, sep, glob = text.partition(":")
    if not sep:
        kind, glob = "site", text.lower()
        if "/" in glob or "@" in glob:
            raise ValueError(f'{raw!r} looks like a URL: match takes a host glob such as "*.example.com"')
        if not glob or not _HOST_GLOB.fullmatch(glob) or ".." in glob or glob.startswith(".") or glob.endswith("."):
            raise ValueError(f'{raw!r} matches no host: use a host glob such as "*.example.com"')
        return kind, glob
    if kind not in ("package", "tool"):
        raise ValueError(f'{raw!r}: a match is a host glob, "package:GLOB" or "tool:GLOB" (not {kind!r})')
    if not glob or not _NAME_GLOB.fullmatch(glob):
        raise ValueError(f"{raw!r} matches no {kind} name")
    if kind == "package":  # PEP 503, as the tool and the gate normalise names (core/protocol/subjects.py)
        glob = re.sub(r"[-_.]+", "-", glob.lower())
    return kind, glob


class Rule(_Settings):
    match: str

    @field_validator("match")
    @classmethod
    def _match(cls, value: str) -> str:
        parse_match(value)
        return value

    @property
    def pattern(self) -> tuple[str, str]:
        return parse_match(self.match)

    def matches(self, kind: str, name: str) -> bool:
        want, glob = self.pattern
        if kind != want:
            return False
        name = re.sub(r"[-_.]+", "-", name.lower()) if kind == "package" else name.lower() if kind == "site" else name
        return fnmatch.fnmatchcase(name, glob)


# The same id shapes a signed-in person's identity is checked against (core/identity.py).
_SLACK_APPROVER = re.compile(rf"(({slack_id('E')}:)?{slack_id('T')}:)?{slack_id('UWS')}")
_TEAMS_APPROVER = re.compile(rf"({GUID}:)?{GUID}")


class Approvers(_Model):
    """Who counts as an approver, per front end (docs/policy.md says how each is matched)."""

    http: list[str] = Field(default_factory=list)
    slack: list[str] = Field(default_factory=list)
    teams: list[str] = Field(default_factory=list)
    label: str | None = None  # what the cards call them: "Needs 2 approvals from Security"

    @field_validator("label")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        # Shown on every card (each renderer escapes it); one short printable line, no markup tricks.
        if value is None:
            return None
        if not value.strip() or len(value) > 60 or not value.isprintable() or first_invalid(value) is not None:
            raise ValueError(f"{value[:80]!r} is not a label: one printable line of 1 to 60 characters")
        return value.strip()

    @field_validator("http")
    @classmethod
    def _http(cls, value: list[str]) -> list[str]:
        for v in value:
            if not may_be_http_user(v):
                raise ValueError(
                    f"{v!r} is not an HTTP user (non-empty, no slack:/teams: prefix, no control characters)"
                )
        return value

    @field_validator("slack")
    @classmethod
    def _slack(cls, value: list[str]) -> list[str]:
        for v in value:
            if not _SLACK_APPROVER.fullmatch(v):
                raise ValueError(
                    f"{v!r} is not a Slack user (U…/W…), user group (S…), TEAM:USER or ENTERPRISE:TEAM:USER id"
                )
        return value

    @field_validator("teams")
    @classmethod
    def _teams(cls, value: list[str]) -> list[str]:
        for v in value:
            if not _TEAMS_APPROVER.fullmatch(v):
                raise ValueError(f"{v!r} is not an Entra object id (a GUID) or TENANT_ID:OBJECT_ID")
        return value

    def any(self) -> bool:
        return bool(self.http or self.slack or self.teams)


class Routing(_Model):
    slack_channel: str | None = Field(default=None, pattern=r"^[CG][A-Z0-9]{2,31}$")
    teams_conversation: str | None = Field(default=None, min_length=1, max_length=500)


class Effective(BaseModel):
    """One rule's settings with the defaults filled in."""

    model_config = ConfigDict(frozen=True)
    name: str
    approvers: ApproverMode
    quorum: int
    durations: list[str] | None
    default_duration: str | None
    max_duration: str | None
    expires_after: str | None = None
    remind_after: list[str] = Field(default_factory=list)
    escalate_after: str | None = None
    escalate_to: list[str] = Field(default_factory=list)
    escalate_channel: str | None = None
    escalate_conversation: str | None = None
    edits: bool | Literal["approvers"] = False


class Policy(_Model):
    defaults: Defaults = Field(default_factory=Defaults)
    approvers: Approvers = Field(default_factory=Approvers)
    rule: list[Rule] = Field(default_factory=list)
    routing: Routing = Field(default_factory=Routing)

    def effective(self, rule: Rule | None) -> Effective:
        d = self.defaults

        def pick(name: str) -> Any:
            own = getattr(rule, name) if rule is not None else None
            return own if own is not None else getattr(d, name)

        durations = pick("durations")
        default = rule.default_duration if rule is not None else d.default_duration
        if (
            rule is not None
            and default is None
            and d.default_duration is not None
            and (durations is None or d.default_duration in durations)
        ):
            default = d.default_duration  # a rule's own list without the defaults' default: the shortest
        return Effective(
            name="defaults" if rule is None else f"rule {self.rule.index(rule) + 1} ({rule.match})",
            approvers=pick("approvers") or "owner",
            quorum=pick("quorum") or 1,
            durations=durations,
            default_duration=default,
            max_duration=pick("max_duration"),
            expires_after=pick("expires_after"),
            remind_after=(lambda r: [r] if isinstance(r, str) else list(r or []))(pick("remind_after")),
            escalate_after=pick("escalate_after"),
            escalate_to=list(pick("escalate_to") or []),
            escalate_channel=pick("escalate_channel"),
            escalate_conversation=pick("escalate_conversation"),
            edits=pick("edits") or False,
        )

    def rule_for(self, kind: str, name: str) -> Rule | None:
        """The first rule that matches the subject; None: the defaults apply."""
        return next((r for r in self.rule if r.matches(kind, name)), None)

    def decide(self, subjects: Iterable[Subject], grant_ttl: float, platform: str | None = None) -> CardPolicy:
        """The strictest rule over a card's subjects (see the module doc), with who the approvers
        are for the card to name: the `[approvers] label`, else the ids listed for `platform`."""
        card = rule_for_subjects(self, subjects, grant_ttl)
        card = card.model_copy(update={"escalate_to": escalation_ids(card.escalate_to, platform)})
        if card.approvers == "owner":
            return card
        listed = getattr(self.approvers, platform, []) if platform in ("http", "slack", "teams") else []
        return card.model_copy(update={"approvers_label": self.approvers.label, "approver_ids": list(listed)})


def _seconds(d: str) -> float:
    return duration_seconds(d)


def combine(parts: Sequence[Effective], grant_ttl: float) -> CardPolicy:
    """The strictest of several rules' settings."""
    if not parts:
        raise ValueError("no rule to combine")
    mode = max((p.approvers for p in parts), key=APPROVER_MODES.index)
    quorum = max(p.quorum for p in parts)
    caps = [_seconds(p.max_duration) for p in parts if p.max_duration is not None]
    cap = min(caps) if caps else None
    lists = [p.durations for p in parts if p.durations is not None]
    offered: list[str] = []
    if lists:
        offered = [d for d in lists[0] if all(d in other for other in lists[1:])]
        if cap is not None:
            offered = [d for d in offered if _seconds(d) <= cap]
        if not offered:  # no duration every rule offers: the shortest any of them offers
            offered = [min((d for ds in lists for d in ds), key=_seconds)]
    defaults = [p.default_duration for p in parts if p.default_duration is not None and p.default_duration in offered]
    default = min(defaults, key=_seconds) if defaults else (min(offered, key=_seconds) if offered else None)
    fixed = grant_ttl if cap is None else min(grant_ttl, cap)
    return CardPolicy(
        approvers=mode,
        quorum=quorum,
        durations=offered,
        default_duration=default,
        default_seconds=None if offered else fixed,
        rules=sorted({p.name for p in parts}),
        edits=strictest_edits([p.edits for p in parts]),
        **combine_timers(parts),
    )


def combine_timers(parts: Sequence[Effective]) -> dict[str, Any]:
    """The strictest timers: every reminder any rule asks for, the earliest escalation to everyone
    any rule names (the first channel given), and the shortest life (`expires_after`)."""
    reminders = sorted({_seconds(r) for p in parts for r in p.remind_after})
    escalations = [_seconds(p.escalate_after) for p in parts if p.escalate_after is not None]
    lives = [_seconds(p.expires_after) for p in parts if p.expires_after is not None]
    return {
        "remind_after": reminders,
        "escalate_after": min(escalations) if escalations else None,
        "escalate_to": list(dict.fromkeys(i for p in parts for i in p.escalate_to)),
        "escalate_channel": next((p.escalate_channel for p in parts if p.escalate_channel), None),
        "escalate_conversation": next((p.escalate_conversation for p in parts if p.escalate_conversation), None),
        "expires_after": min(lives) if lives else None,
    }


def strictest_edits(each: Sequence[bool | str]) -> bool | Literal["approvers"]:
    """Edits only where every rule allows them; "approvers" when any rule keeps them to approvers."""
    if not each or any(e is False for e in each):
        return False
    return "approvers" if "approvers" in each else True


def rule_for_subjects(policy: Policy, subjects: Iterable[Subject], grant_ttl: float) -> CardPolicy:
    """Pure: the card policy for these subjects (kinds site / package / tool). No subjects: the
    defaults."""
    parts = [policy.effective(policy.rule_for(kind, name)) for kind, name in subjects]
    return combine(parts or [policy.effective(None)], grant_ttl)


# ----------------------------------------------------------------------------- loading


def _problems(policy: Policy) -> list[tuple[tuple[Any, ...], str]]:
    """Checks across fields, after each field was checked on its own: (location, message)."""
    out: list[tuple[tuple[Any, ...], str]] = []
    seen: dict[tuple[str, str], int] = {}
    targets: list[tuple[tuple[Any, ...], Effective, _Settings]] = [
        (("defaults",), policy.effective(None), policy.defaults)
    ]
    for i, r in enumerate(policy.rule):
        if r.edits and r.pattern[0] != "tool":
            out.append((("rule", i, "edits"), "edits apply only to tool calls: match a tool (tool:NAME)"))
        if r.pattern in seen:
            out.append((("rule", i, "match"), f"never reached: rule {seen[r.pattern] + 1} has the same match"))
        seen.setdefault(r.pattern, i)
        targets.append((("rule", i), policy.effective(r), r))
    for where, eff, own in targets:

        def at(field: str, where: tuple[Any, ...] = where, own: _Settings = own) -> tuple[Any, ...]:
            # point at the field in this table when it is set here, else at the table
            return (*where, field) if getattr(own, field) is not None else where

        if eff.quorum > 1 and eff.approvers == "owner":
            out.append(
                (
                    at("quorum"),
                    f'quorum {eff.quorum} needs approvers: with approvers = "owner" only one person can answer',
                )
            )
        if eff.approvers != "owner" and not policy.approvers.any():
            out.append((at("approvers"), f'approvers = "{eff.approvers}" but [approvers] lists nobody'))
        cap = _seconds(eff.max_duration) if eff.max_duration is not None else None
        for d in eff.durations or []:
            if cap is not None and _seconds(d) > cap:
                out.append((at("durations"), f"duration {d!r} is longer than max_duration {eff.max_duration!r}"))
        if (eff.escalate_after is None) != (not eff.escalate_to):
            which = "escalate_after" if eff.escalate_after is None else "escalate_to"
            out.append((where, f"escalation needs both escalate_after and escalate_to ({which} is missing)"))
        if eff.expires_after is not None:
            life = _seconds(eff.expires_after)
            for name, t in [("remind_after", r) for r in eff.remind_after] + [("escalate_after", eff.escalate_after)]:
                if t is not None and _seconds(t) >= life:
                    out.append((at(name), f"{name} {t!r} is not before expires_after {eff.expires_after!r}"))
        if eff.default_duration is not None:
            if eff.durations is None:
                out.append((at("default_duration"), "default_duration needs a durations list"))
            elif eff.default_duration not in eff.durations:
                out.append((at("default_duration"), f"default_duration {eff.default_duration!r} is not in durations"))
    return out


_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.-]+)\s*\]\]?")
_KEY = re.compile(r'^\s*([A-Za-z0-9_."-]+?)\s*=')


def _line_of(text: str, loc: Sequence[Any]) -> int | None:
    """The line of a location like ("rule", 1, "quorum") or ("defaults", "durations", 0) in the
    TOML text: its key's line, else its table's header line. A plain scan (tomllib keeps no
    positions); good for the tables and keys this file has."""
    table: tuple[Any, ...] = ()
    arrays: dict[str, int] = {}
    places: dict[tuple[Any, ...], int] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        h = _HEADER.match(line)
        if h:
            name = h.group(2)
            if h.group(1) == "[[":
                arrays[name] = arrays.get(name, -1) + 1
                table = (name, arrays[name])
            else:
                table = tuple(name.split("."))
            places.setdefault(table, n)
            continue
        k = _KEY.match(line)
        if k:
            key = tuple(part.strip('"') for part in k.group(1).split("."))
            places.setdefault((*table, *key), n)
    path = tuple(loc)
    while path:
        if path in places:
            return places[path]
        path = path[:-1]
    return None


def _where(loc: Sequence[Any]) -> str:
    """("rule", 1, "quorum") -> "rule 2: quorum"; ("approvers", "slack", 0) -> "approvers.slack[0]"."""
    loc = list(loc)
    head = ""
    if len(loc) >= 2 and loc[0] == "rule" and isinstance(loc[1], int):
        head, loc = f"rule {loc[1] + 1}", loc[2:]
    parts: list[str] = []
    for p in loc:
        parts.append(f"[{p}]" if isinstance(p, int) else ("." if parts else "") + str(p))
    tail = "".join(parts)
    return f"{head}: {tail}" if head and tail else head or tail or "file"


def parse_policy(text: str, source: str = "policy") -> Policy:
    """Parse and validate a policy file's text; raises PolicyError naming `source:LINE`."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"at line (\d+)", str(e))
        line = m.group(1) if m else str(max(1, len(text.splitlines())))  # "at end of document"
        raise PolicyError(f"{source}:{line}: not valid TOML: {e}") from None
    try:
        policy = Policy.model_validate(raw)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            loc = err.get("loc", ())
            line = _line_of(text, loc)
            msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
            if err.get("type") == "extra_forbidden":
                msg = f"unknown key {loc[-1]!r}"
            lines.append(f"{source}:{line or '?'}: {_where(loc)}: {msg}")
        raise PolicyError("\n".join(lines)) from None
    problems = _problems(policy)
    if problems:
        raise PolicyError(
            "\n".join(f"{source}:{_line_of(text, loc) or '?'}: {_where(loc)}: {msg}" for loc, msg in problems)
        )
    return policy


def load_policy(path: str | Path) -> Policy:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PolicyError(f"{p}: cannot read the policy file: {e}") from None
    return parse_policy(text, str(p))


__all__ = [
    "KINDS",
    "ONCE",
    "Policy",
    "PolicyError",
    "Rule",
    "combine",
    "load_policy",
    "parse_match",
    "parse_policy",
    "rule_for_subjects",
]

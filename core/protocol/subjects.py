"""What can be approved: a site (a host name) or a package (a PEP 503-normalised name).

The ONE normaliser of subjects. The approval tool, the egress gate (its decisions and its
launch-time lists), grants and every revoke path use these functions, so the name the gate
refuses is the name on the card, the name of the grant and the name a revoke matches.

Two levels:
- `canonical_host` is syntax only (lower case, one trailing dot dropped, IP literals in their
  canonical form). The operator's lists may name any host, IP literals included.
- `normalize_host` / `host_of` / `normalize_package` are what a *user* may approve. Names that can
  never be approved raise `NeverAllowable`: IP literals of loopback, private, link-local or any
  other non-global range (in every spelling the C resolver accepts: `127.1`, `0x7f.1`,
  `2130706433`), IPv6 literals, and package names that are not valid PEP 503 names (`%2e%2e`).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

from chat_approvals.core.models import Grant, SubjectKind

_PACKAGE = re.compile(r"^([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])$")
_HOST = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")


class NeverAllowable(ValueError):
    """A subject no approval can ever allow; refused as such and never offered on a card."""


def _ipv4(h: str) -> ipaddress.IPv4Address | None:
    """Any spelling the resolver reads as an IPv4 address (`127.1`, `0x7f.0.0.1`, `2130706433`)."""
    if not h or not re.fullmatch(r"[0-9a-fx.]+", h):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(h))
    except OSError:
        return None


def canonical_host(name: str) -> str:
    """Syntax only: lower case, one trailing dot dropped, IP literals canonical (IPv6 without
    brackets). Raises ValueError for anything that is not a host name or an IP literal."""
    if not isinstance(name, str):
        raise ValueError(f"{name!r} is not a host name")
    h = name.strip().lower()
    h = h[:-1] if h.endswith(".") else h
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    if ":" in h:
        try:
            return str(ipaddress.IPv6Address(h))
        except ValueError:
            raise ValueError(f"{name!r} is not a host name") from None
    v4 = _ipv4(h)
    if v4 is not None:
        return str(v4)
    if not _HOST.match(h) or h.rsplit(".", 1)[-1].isdigit():  # an all-digit last label is no DNS name
        raise ValueError(f"{name!r} is not a host name")
    return h


def never_allowable_reason(host: str) -> str | None:
    """Why a canonical host can never be approved, or None when a user may approve it."""
    if ":" not in host and not host.replace(".", "").isdigit():
        # ip_address would refuse it (an IPv6 literal has a colon, an IPv4 one only digits and
        # dots): a name, told without the two failed parses and their exceptions (4 us a name)
        return None
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    if ip.version == 6:
        return f"{host} is an IPv6 literal; only host names (or public IPv4 addresses) can be approved"
    if not ip.is_global:
        kind = (
            "loopback"
            if ip.is_loopback
            else "link-local"
            if ip.is_link_local
            else "private"
            if ip.is_private
            else "non-public"
        )
        return f"{host} is a {kind} address; no approval can allow it"
    return None


def normalize_host(name: str) -> str:
    """A host a user may approve, in its one canonical form. Raises ValueError (NeverAllowable
    for names no approval can allow)."""
    h = canonical_host(name)
    why = never_allowable_reason(h)
    if why:
        raise NeverAllowable(why)
    return h


_URL_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # C0/C1 controls: never in a URL (RFC 3986)


def host_of(url: str) -> str:
    """The approvable host a download URL reaches; raises ValueError with a reason the model can act on."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("an empty URL")
    if _URL_CONTROL.search(url.strip()):  # a NUL or newline would reach the card, its text and the store
        raise ValueError(f"{url!r} holds a control character: not a URL")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{url!r} is not an http(s) URL")
    netloc = parts.netloc.rpartition("@")[2]
    raw = netloc[: netloc.index("]") + 1] if netloc.startswith("[") and "]" in netloc else netloc.partition(":")[0]
    try:
        return normalize_host(raw)
    except NeverAllowable:
        raise
    except ValueError:
        raise ValueError(f"{url!r} has no valid host name") from None


def normalize_package(name: str) -> str:
    """PEP 503 normalised name of a valid project name; anything else can never be approved."""
    if not isinstance(name, str) or not _PACKAGE.match(name.strip()):
        raise NeverAllowable(f"{name!r} is not a valid package name")
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def normalize(kind: SubjectKind, name: str) -> str:
    if kind == "tool":
        return name  # a tool's registered name, exactly (checked at start-up against the agent)
    return normalize_host(name) if kind == "site" else normalize_package(name)


def subject_matches(grant: Grant, subject: str) -> bool:
    """Does a revoke of `subject` (a host, a package, `package:NAME`, `tool:NAME`, or `all`) take
    this grant? Sites and packages are normalised like the grant was, so `zope.interface` revokes
    `zope-interface`; a tool name is matched exactly (tool names are case-sensitive)."""
    s = subject.strip()
    if s.lower() == "all":
        return True
    if s.lower().startswith("tool:"):
        return grant.kind == "tool" and s[len("tool:") :].strip() == grant.name
    if grant.kind == "tool":
        return s == grant.name
    kinds: tuple[str, ...] = ("site", "package")
    if s.lower().startswith("package:"):
        s, kinds = s[len("package:") :], ("package",)
    if grant.kind not in kinds:
        return False
    try:
        return normalize(grant.kind, s) == grant.name
    except ValueError:
        return False


def unique(items: list[str]) -> list[str]:
    """De-duplicate, keeping first-seen order (cards list subjects in the order they were met)."""
    return list(dict.fromkeys(items))


def describe(sites: list[str], packages: list[str]) -> str:
    parts = []
    if sites:
        parts.append(("site " if len(sites) == 1 else "sites ") + ", ".join(sites))
    if packages:
        parts.append(("package " if len(packages) == 1 else "packages ") + ", ".join(packages))
    return "; ".join(parts) or "nothing"

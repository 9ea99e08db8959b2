"""Launch-time rules and name handling for the egress gate (no I/O here)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from chat_approvals.core.models import SubjectKind
from chat_approvals.core.protocol.subjects import canonical_host, normalize_package

# Names come from the one normaliser (core/protocol/subjects.py). The operator's lists may name any host,
# IP literals included (`canonical_host`); what a user may approve is checked in the gate.


@dataclass(frozen=True)
class Pattern:
    """One list entry: `host`, `*.host` (any subdomain, not the apex), optional `:port`;
    or `package:NAME`."""

    kind: SubjectKind
    name: str
    wildcard: bool = False
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> Pattern:
        t = text.strip()
        if t.startswith("package:"):
            return cls("package", normalize_package(t[len("package:") :]))
        port: int | None = None
        host = t
        if t.count(":") == 1 or (t.startswith("[") and "]:" in t):
            host, _, p = t.rpartition(":")
            if not p.isdigit() or not 0 < int(p) < 65536:
                raise ValueError(f"bad port in {text!r}")
            port = int(p)
        wildcard = host.startswith("*.")
        return cls("site", canonical_host(host[2:] if wildcard else host), wildcard, port)

    def matches(self, kind: SubjectKind, name: str, port: int | None) -> bool:
        if kind != self.kind:
            return False
        if self.port is not None and port != self.port:
            return False
        if self.wildcard:
            return name.endswith("." + self.name)
        return name == self.name


@dataclass(frozen=True)
class Rules:
    """Operator lists given at launch. The deny list wins over everything."""

    allow: tuple[Pattern, ...] = ()
    deny: tuple[Pattern, ...] = ()

    @classmethod
    def parse(cls, allow: list[str], deny: list[str]) -> Rules:
        return cls(tuple(Pattern.parse(a) for a in allow), tuple(Pattern.parse(d) for d in deny))

    def denied(self, kind: SubjectKind, name: str, port: int | None = None) -> bool:
        return any(p.matches(kind, name, port) for p in self.deny)

    def allowed(self, kind: SubjectKind, name: str, port: int | None = None) -> bool:
        return any(p.matches(kind, name, port) for p in self.allow)

    def allowed_packages(self) -> list[str]:
        return sorted({p.name for p in self.allow if p.kind == "package"})


@dataclass(frozen=True)
class Resolve:
    """`HOST[:PORT]=IP:PORT`, like curl's --resolve: the gate connects that name to that address.
    Without a port on the left it applies to every port of HOST."""

    entries: dict[tuple[str, int | None], tuple[str, int]] = field(default_factory=dict)

    @classmethod
    def parse(cls, items: list[str]) -> Resolve:
        out: dict[tuple[str, int | None], tuple[str, int]] = {}
        for item in items:
            left, sep, right = item.partition("=")
            if not sep:
                raise ValueError(f"--gate-resolve wants HOST[:PORT]=IP:PORT, got {item!r}")
            pat = Pattern.parse(left)
            if pat.kind != "site" or pat.wildcard:
                raise ValueError(f"--gate-resolve wants a plain host on the left, got {left!r}")
            ip, _, port = right.rpartition(":")
            ip = ip.strip("[]")
            try:
                ipaddress.ip_address(ip)  # the right side is an address, never a name to look up
            except ValueError:
                raise ValueError(f"--gate-resolve {item!r}: {ip!r} is not an IP address") from None
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"bad port in {item!r}")
            out[(pat.name, pat.port)] = (ip, int(port))
        return cls(out)

    def lookup(self, host: str, port: int) -> tuple[str, int] | None:
        return self.entries.get((host, port)) or self.entries.get((host, None))


_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052: the low 32 bits are an IPv4 address
_REFUSED_V6 = tuple(
    ipaddress.ip_network(n)
    for n in (
        "::/96",  # IPv4-compatible (deprecated, RFC 4291): embeds an IPv4 address
        "64:ff9b:1::/48",  # local-use NAT64 (RFC 8215)
        "fec0::/10",  # site-local (deprecated, RFC 3879)
        "2001::/32",  # Teredo: embeds an obfuscated IPv4 address
    )
)


def is_public(ip: str) -> bool:
    """Addresses a granted name may connect to without an explicit --gate-resolve: global only,
    so that approving a name cannot open the host's loopback or private network. An IPv6 address
    that carries an IPv4 one (mapped, NAT64, 6to4) is judged by the IPv4 address it carries, since
    a translator on the path would deliver it there; the deprecated and tunnelling ranges are
    refused outright (`is_global` calls several of them public)."""
    a = ipaddress.ip_address(ip)
    if isinstance(a, ipaddress.IPv6Address):
        a = ipaddress.IPv6Address(int(a))  # drop a %scope
        if a.ipv4_mapped is not None:
            return is_public(str(a.ipv4_mapped))
        if a in _NAT64:
            return is_public(str(ipaddress.IPv4Address(int(a) & 0xFFFFFFFF)))
        if a.sixtofour is not None:
            return is_public(str(a.sixtofour))
        if any(a in n for n in _REFUSED_V6):
            return False
    return a.is_global

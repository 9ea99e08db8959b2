"""What can be approved: a site (a host name) or a package (a PEP 503-normalised name)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_PACKAGE = re.compile(r"^([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])$")
_HOST = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")


def host_of(url: str) -> str:
    """The host a download URL reaches; raises ValueError with a reason the model can act on."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("an empty URL")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{url!r} is not an http(s) URL")
    host = (parts.hostname or "").rstrip(".").lower()
    if not _HOST.match(host):
        raise ValueError(f"{url!r} has no valid host name")
    return host


def normalize_host(name: str) -> str:
    host = name.strip().rstrip(".").lower()
    if not _HOST.match(host):
        raise ValueError(f"{name!r} is not a host name")
    return host


def normalize_package(name: str) -> str:
    if not isinstance(name, str) or not _PACKAGE.match(name.strip()):
        raise ValueError(f"{name!r} is not a valid package name")
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


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

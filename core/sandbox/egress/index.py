"""The package-index view: a PEP 503 "simple" index served by the gate, in front of one upstream.

pip in the sandbox is pointed at `http://127.0.0.1:PORT/run/<run-token>/simple/` (PIP_INDEX_URL).
The run token in the path says whose run it is (so no client auth behaviour is relied on). For a
project page the gate decides the package name like a host (deny list, allow list, then the
user's grants for the chat, at request time); a refused name gets a 403 and is recorded as a
`package` refusal. A granted project's page is fetched from upstream and every file link is
rewritten to `/run/<token>/files/<project>/<ref>/<filename>`, where `ref` carries the upstream
URL and an HMAC over (run, project, URL): the gate serves only files it listed, for that run,
and decides the name again when the file is fetched (a revoke between the page and the file
bites). No upstream redirect is followed, for pages and files alike: a redirect's target (a
loopback, private or ungranted address) was never checked, so a 3xx is a 502 to pip.
Core-metadata hints (PEP 658/714) are dropped, so pip downloads the file itself.

Only links to the index's own origin, to its known file hosts (`files.pythonhosted.org` for
pypi.org, `GateConfig.package_file_hosts`) or to allow-listed hosts are signed; every other
link (a foreign host, a loopback or private address) is dropped from the page, so a project
page cannot turn the gate into a fetcher of anything else. A name that is not a valid PEP 503
name (`%2e%2e`) is refused as such and never recorded for a card.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import html
import logging
import secrets
from collections.abc import Awaitable, Callable
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Protocol
from urllib.parse import SplitResult, urljoin, urlsplit

import aiohttp

from chat_approvals.core.models import SubjectKind
from chat_approvals.core.protocol.subjects import canonical_host, never_allowable_reason, normalize_package
from chat_approvals.core.sandbox.egress.runs import Run
from chat_approvals.core.sandbox.egress.wire import Head, encode_head, respond

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from chat_approvals.core.sandbox.egress.policy import Rules


class IndexGate(Protocol):
    """What the index uses of the gate (`core.egress.gate.Gate` fits it)."""

    rules: Rules

    def run_by_token(self, token: str) -> Run | None: ...

    def slot(self, run: Run) -> AbstractContextManager[None]: ...

    async def decide(self, run: Run, kind: SubjectKind, name: str, port: int | None, url: str | None) -> str | None: ...

    async def while_granted(
        self, run: Run, kind: SubjectKind, name: str, port: int | None, work: Awaitable[object]
    ) -> None: ...


log = logging.getLogger(__name__)

_KEEP_ATTRS = ("data-requires-python", "data-yanked", "data-gpg-sig")
_HTML = "text/html; charset=utf-8"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, dict[str, str | None], str]] = []
        self._cur: tuple[str, dict[str, str | None]] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            a = dict(attrs)
            if a.get("href"):
                self._cur, self._text = (a["href"] or "", a), []

    def handle_data(self, data: str) -> None:
        if self._cur is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._cur is not None:
            self.links.append((self._cur[0], self._cur[1], "".join(self._text).strip()))
            self._cur = None


class PackageIndex:
    def __init__(self, gate: IndexGate, upstream: str, file_hosts: list[str]) -> None:
        self.gate = gate
        self.upstream = upstream if upstream.endswith("/") else upstream + "/"
        up = urlsplit(self.upstream)
        self._origin = _origin(up)
        self._file_hosts = {canonical_host(h) for h in file_hosts}
        if up.hostname == "pypi.org":
            self._file_hosts.add("files.pythonhosted.org")
        self._key = secrets.token_bytes(32)
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # trust_env=False: the gate's own upstream fetch must never loop through a proxy variable
            self._session = aiohttp.ClientSession(
                trust_env=False, timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=120)
            )
        return self._session

    def _sign(self, run: Run, project: str, url: str) -> str:
        mac = hmac.new(self._key, f"{run.token}\0{project}\0{url}".encode(), hashlib.sha256).hexdigest()[:40]
        return base64.urlsafe_b64encode(url.encode()).decode().rstrip("=") + "." + mac

    def _unsign(self, run: Run, project: str, ref: str) -> str | None:
        b64, _, mac = ref.rpartition(".")
        try:
            url = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        good = self._sign(run, project, url).rpartition(".")[2]
        return url if hmac.compare_digest(good, mac) else None

    def file_link_allowed(self, url: str) -> bool:
        """A file link the gate may sign and fetch: the index's own origin, a known file host or an
        allow-listed one, over http(s); never a loopback, private or link-local address."""
        try:
            u = urlsplit(url)
            if u.scheme not in ("http", "https") or not u.hostname:
                return False
            if _origin(u) == self._origin:
                return True
            host = canonical_host(u.hostname)
            port = u.port or (443 if u.scheme == "https" else 80)
        except ValueError:
            return False
        if never_allowable_reason(host) or self.gate.rules.denied("site", host, port):
            return False
        return host in self._file_hosts or self.gate.rules.allowed("site", host, port)

    async def handle(self, head: Head, path: str, writer: asyncio.StreamWriter, admit: Callable[[Run], bool]) -> None:
        method = head.first[0]
        parts = path.split("?", 1)[0].split("/")  # ["", "run", token, view, ...]
        run = self.gate.run_by_token(parts[2]) if len(parts) > 3 else None
        if run is None or not admit(run):  # admit: the token's uid binding holds for this peer
            await respond(writer, 403, "Forbidden", "this sandbox run has no valid gate credentials\n")
            return
        with self.gate.slot(run):  # an index request takes a slot like a proxied one
            await self._handle(run, method, parts, writer)

    async def _handle(self, run: Run, method: str, parts: list[str], writer: asyncio.StreamWriter) -> None:
        if method not in ("GET", "HEAD"):
            await respond(writer, 405, "Method Not Allowed", "the package index is read-only\n")
            return
        view, rest = parts[3], [p for p in parts[4:] if p]
        if view == "simple" and not rest:
            await self._root(run, writer)
        elif view == "simple" and len(rest) == 1:
            await self._project(run, rest[0], writer)
        elif view == "files" and len(rest) == 3:
            await self._file(run, rest[0], rest[1], rest[2], writer, head_only=method == "HEAD")
        else:
            await respond(writer, 404, "Not Found", "not part of the package index\n")

    async def _root(self, run: Run, writer: asyncio.StreamWriter) -> None:
        names = set(self.gate.rules.allowed_packages())
        lister = getattr(run.backend, "granted_names", None)
        if lister is not None:
            with contextlib.suppress(Exception):
                names |= set(await lister(user=run.user, chat=run.chat, kind="package", turn_id=run.turn_id))
        names = {n for n in names if not self.gate.rules.denied("package", n)}
        body = "".join(f'<a href="{html.escape(n)}/">{html.escape(n)}</a>\n' for n in sorted(names))
        await respond(writer, 200, "OK", f"<!DOCTYPE html>\n<html><body>\n{body}</body></html>\n", content_type=_HTML)

    async def _project(self, run: Run, raw: str, writer: asyncio.StreamWriter) -> None:
        try:
            name = normalize_package(raw)
        except ValueError as e:  # never allowable: refused as such, nothing recorded for a card
            await respond(writer, 403, "Forbidden", f"{e}; no approval can allow it.\n")
            return
        page_url = urljoin(self.upstream, name + "/")
        refusal = await self.gate.decide(run, "package", name, None, page_url)
        if refusal:
            await respond(
                writer, 403, "Forbidden", refusal + "\n", extra=[("X-Egress-Gate-Refused", f"package={name}")]
            )
            return
        try:
            async with self._http().get(
                page_url,
                headers={"Accept": "application/vnd.pypi.simple.v1+html, text/html;q=0.1"},
                allow_redirects=False,  # a redirect's target was never checked: follow none
            ) as r:
                if r.status == 404:
                    await respond(writer, 404, "Not Found", f"the upstream index has no {name}\n")
                    return
                if r.status != 200:
                    await respond(writer, 502, "Bad Gateway", f"upstream index answered {r.status}\n")
                    return
                text = await r.text()
                base = str(r.url)
        except (aiohttp.ClientError, TimeoutError) as e:
            await respond(writer, 502, "Bad Gateway", f"upstream index unreachable: {e}\n")
            return
        parser = _Links()
        parser.feed(text)
        rows = []
        for href, attrs, label in parser.links:
            absolute = urljoin(base, href)
            url, _, frag = absolute.partition("#")
            filename = urlsplit(url).path.rsplit("/", 1)[-1]
            if not filename or not self.file_link_allowed(url):
                continue
            new = f"/run/{run.token}/files/{name}/{self._sign(run, name, url)}/{filename}"
            if frag:
                new += "#" + frag
            extra = "".join(f' {k}="{html.escape(v)}"' for k, v in attrs.items() if k in _KEEP_ATTRS and v is not None)
            rows.append(f'<a href="{html.escape(new)}"{extra}>{html.escape(label or filename)}</a><br/>\n')
        title = f"<h1>Links for {html.escape(name)}</h1>\n"
        body = f"<!DOCTYPE html>\n<html><body>\n{title}{''.join(rows)}</body></html>\n"
        await respond(writer, 200, "OK", body, content_type=_HTML)

    async def _file(
        self,
        run: Run,
        project: str,
        ref: str,
        filename: str,
        writer: asyncio.StreamWriter,
        *,
        head_only: bool,
    ) -> None:
        url = self._unsign(run, project, ref)
        if url is None or urlsplit(url).path.rsplit("/", 1)[-1] != filename or not self.file_link_allowed(url):
            await respond(writer, 404, "Not Found", "the gate did not list this file\n")
            return
        refusal = await self.gate.decide(run, "package", project, None, url)
        if refusal:
            await respond(
                writer,
                403,
                "Forbidden",
                refusal + "\n",
                extra=[("X-Egress-Gate-Refused", f"package={project}")],
            )
            return
        # re-checked while it downloads: a revoke ends a package file like a tunnel
        await self.gate.while_granted(run, "package", project, None, self._download(url, writer, head_only=head_only))

    async def _download(self, url: str, writer: asyncio.StreamWriter, *, head_only: bool) -> None:
        try:
            async with self._http().get(url, allow_redirects=False) as r:
                if r.status != 200:
                    await respond(writer, 502, "Bad Gateway", f"upstream file answered {r.status}\n")
                    return
                headers = [
                    ("Content-Type", r.headers.get("Content-Type", "application/octet-stream")),
                    ("Connection", "close"),
                ]
                if r.content_length is not None:
                    headers.append(("Content-Length", str(r.content_length)))
                writer.write(encode_head("HTTP/1.1 200 OK", headers))
                if not head_only:
                    async for chunk in r.content.iter_chunked(64 * 1024):
                        writer.write(chunk)
                        await writer.drain()
                await writer.drain()
        except (aiohttp.ClientError, TimeoutError) as e:
            log.warning("upstream file %s failed: %s", url, e)


def _origin(u: SplitResult) -> tuple[str, str, int]:
    return (u.scheme, (u.hostname or "").lower(), u.port or (443 if u.scheme == "https" else 80))

"""Shared pieces for the egress-gate tests: an in-memory grants backend, local HTTP/HTTPS origin
servers with test host names, a self-signed certificate, and a tiny PEP 503 package index."""

from __future__ import annotations

import base64
import datetime
import hashlib
import io
import ipaddress
import os
import shutil
import ssl
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from chat_approvals.core.models import Refusal, SubjectKind

HOSTS = ("files.test", "other.test", "cdn.test")


@dataclass
class FakeGrants:
    """GrantsBackend in memory: (user, chat, kind, name) rows, and every refusal recorded."""

    rows: set[tuple[str, str, str, str]] = field(default_factory=set)
    refusals: list[Refusal] = field(default_factory=list)
    checks: int = 0
    broken: bool = False

    def grant(self, user: str, chat: str, kind: SubjectKind, name: str) -> None:
        self.rows.add((user, chat, kind, name))

    def revoke(self, user: str, chat: str, kind: SubjectKind, name: str) -> None:
        self.rows.discard((user, chat, kind, name))

    async def is_allowed(
        self, *, user: str, chat: str, kind: SubjectKind, name: str, turn_id: str | None = None
    ) -> bool:
        self.checks += 1
        if self.broken:
            raise RuntimeError("store down")
        return (user, chat, kind, name) in self.rows

    async def record_refusal(self, refusal: Refusal) -> bool:
        self.refusals.append(refusal)
        return True

    async def granted_names(self, *, user: str, chat: str, kind: SubjectKind, turn_id: str | None = None) -> list[str]:
        return sorted(n for (u, c, k, n) in self.rows if (u, c, k) == (user, chat, kind))


def make_cert(dirpath: Path) -> tuple[Path, Path]:
    """A self-signed certificate for the test host names; clients trust it as their CA file."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "egress-gate test origin")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(h) for h in HOSTS] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = dirpath / "cert.pem", dirpath / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def origin_app(scheme: str) -> web.Application:
    """The same routes on the HTTP and the HTTPS origin. The Host header says which test host."""

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text=f"hello from {request.host.split(':')[0]} over {scheme}\n")

    async def redirect(request: web.Request) -> web.Response:
        to = request.query.get("to", "other.test")
        raise web.HTTPFound(f"{scheme}://{to}/hello")

    async def blob(request: web.Request) -> web.Response:
        n = int(request.query.get("n", "1000"))
        return web.Response(body=b"x" * n)

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=b"got " + await request.read())

    app = web.Application()
    app.router.add_post("/echo", echo)
    app.router.add_get("/hello", hello)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/blob", blob)
    return app


async def start_site(app: web.Application, ssl_ctx: ssl.SSLContext | None = None) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_ctx)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    return runner, port


def wheel_bytes(name: str, version: str, requires: list[str] | None = None) -> bytes:
    """A minimal valid wheel: enough for `pip download` to accept it."""
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires or []
    )
    files = {
        f"{name.replace('-', '_')}/__init__.py": b"VALUE = 42\n",
        f"{dist}/METADATA": meta.encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return buf.getvalue()


def index_app(packages: dict[str, tuple[str, list[str]]]) -> web.Application:
    """A PEP 503 simple index: /simple/<name>/ lists /packages/<wheel> with its sha256."""
    wheels: dict[str, bytes] = {}
    pages: dict[str, str] = {}
    for name, (version, requires) in packages.items():
        fname = f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
        data = wheel_bytes(name, version, requires)
        wheels[fname] = data
        sha = hashlib.sha256(data).hexdigest()
        pages[name] = (
            f'<!DOCTYPE html><html><body><a href="../../packages/{fname}#sha256={sha}" '
            f'data-requires-python="&gt;=3.8">{fname}</a></body></html>'
        )

    async def project(request: web.Request) -> web.Response:
        page = pages.get(request.match_info["name"])
        if page is None:
            raise web.HTTPNotFound()
        return web.Response(text=page, content_type="text/html")

    async def wheel(request: web.Request) -> web.Response:
        data = wheels.get(request.match_info["file"])
        if data is None:
            raise web.HTTPNotFound()
        return web.Response(body=data, content_type="application/octet-stream")

    app = web.Application()
    app.router.add_get("/simple/{name}/", project)
    app.router.add_get("/packages/{file}", wheel)
    return app


def need_curl() -> str:
    """curl is installed by scripts/test.d/60-gate.sh setup; under CI a missing curl is a failure."""
    path = shutil.which("curl")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("curl is missing (scripts/test.d/60-gate.sh setup installs it)")
        pytest.skip("curl is not installed (run scripts/test.d/60-gate.sh setup)")
    return path

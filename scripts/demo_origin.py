"""The offline demo's origin (scripts/run): a small local web server standing in for the
internet, so the demo's happy path works on a machine with no network.

- `GET /data.csv`: a sample CSV (12 rows under a header), what "please fetch
  http://data.example.test/data.csv" downloads once the site is approved.
- `GET /simple/`, `/simple/demo-rows/`, `/files/demo_rows-1.0-py3-none-any.whl`: a tiny PEP 503
  index with one pure-Python package, the upstream of the gate's package-index view
  (`--package-index`), for the `pip install demo-rows` path.

scripts/run maps the demo host to it with `--gate-resolve data.example.test:80=127.0.0.1:PORT`,
so every download still goes through the real egress gate, and only after an approval.
Usage: python scripts/demo_origin.py PORT_FILE   (binds 127.0.0.1 on a free port, writes the port)
"""

from __future__ import annotations

import base64
import hashlib
import io
import sys
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CSV = (
    "month,visitors,signups\n"
    + "".join(
        f"2026-{m:02d},{v},{s}\n"
        for m, v, s in [
            (1, 1200, 31),
            (2, 1350, 40),
            (3, 1510, 38),
            (4, 1490, 45),
            (5, 1720, 52),
            (6, 1900, 61),
            (7, 1810, 57),
            (8, 1760, 49),
            (9, 2050, 66),
            (10, 2210, 70),
            (11, 2390, 81),
            (12, 2600, 90),
        ]
    )
).encode()
WHEEL_NAME = "demo_rows-1.0-py3-none-any.whl"


def _wheel() -> bytes:
    """A valid, tiny wheel: `import demo_rows; demo_rows.count(text)` counts a CSV's data rows."""
    files = {
        "demo_rows/__init__.py": (
            b"def count(text: str) -> int:\n    return max(0, len([x for x in text.splitlines() if x.strip()]) - 1)\n"
        ),
        "demo_rows-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo-rows\nVersion: 1.0\n",
        "demo_rows-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: demo-origin\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("demo_rows-1.0.dist-info/RECORD,,")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0)), data)
        z.writestr(zipfile.ZipInfo("demo_rows-1.0.dist-info/RECORD", (2026, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
    return buf.getvalue()


WHEEL = _wheel()
WHEEL_LINK = f"/files/{WHEEL_NAME}#sha256={hashlib.sha256(WHEEL).hexdigest()}"
PAGES: dict[str, tuple[str, bytes]] = {
    "/data.csv": ("text/csv", CSV),
    "/simple/": ("text/html", b'<!doctype html><a href="/simple/demo-rows/">demo-rows</a>\n'),
    "/simple/demo-rows/": (
        "text/html",
        f'<!doctype html><a href="{WHEEL_LINK}">{WHEEL_NAME}</a>\n'.encode(),
    ),
    f"/files/{WHEEL_NAME}": ("application/octet-stream", WHEEL),
}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        page = PAGES.get(self.path.split("?", 1)[0])
        if page is None:
            self.send_error(404, "not part of the demo")
            return
        kind, body = page
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: the demo's own server logs what matters


def main(port_file: str) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = Path(port_file + ".tmp")
    tmp.write_text(str(server.server_address[1]))
    tmp.replace(port_file)  # whole, or not there yet
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1])

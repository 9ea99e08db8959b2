"""`chat-approvals teams-package --app-id ID`: the uploadable Teams app package (a zip).

The manifest template in manifest/teams/ carries a placeholder GUID; the package gets the bot's
Microsoft App id as both the app id and the bot id (the usual single-bot app).
"""

from __future__ import annotations

import argparse
import json
import re
import zipfile
from pathlib import Path
from typing import Any

MANIFEST_DIR = Path(__file__).resolve().parents[1] / "manifest" / "teams"
_GUID = re.compile(r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
_SEMVER = re.compile(r"^\d+\.\d+\.\d+$")


def render_manifest(app_id: str, *, version: str | None = None, source: Path = MANIFEST_DIR) -> dict[str, Any]:
    if not _GUID.match(app_id):
        raise ValueError(f"--app-id must be the bot's Microsoft App id (a GUID), not {app_id!r}")
    if version is not None and not _SEMVER.match(version):
        raise ValueError(f"--version must look like 1.2.3, not {version!r}")
    manifest: dict[str, Any] = json.loads((source / "manifest.json").read_text())
    manifest["id"] = app_id
    for bot in manifest.get("bots", []):
        bot["botId"] = app_id
    if version:
        manifest["version"] = version
    return manifest


def build_package(app_id: str, out: Path, *, version: str | None = None, source: Path = MANIFEST_DIR) -> Path:
    """Write manifest.json and the icons it names at the zip's root (what Teams expects)."""
    manifest = render_manifest(app_id, version=version, source=source)
    icons = [manifest["icons"]["color"], manifest["icons"]["outline"]]
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest, indent=2) + "\n")
        for icon in icons:
            zf.write(source / icon, arcname=icon)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--app-id", required=True, help="the bot's Microsoft App id (GUID)")
    parser.add_argument("--out", type=Path, default=Path("chat-approvals-teams.zip"), help="zip to write")
    parser.add_argument("--version", default=None, help="app version (semver), default from the template")


def run(args: argparse.Namespace) -> int:
    try:
        path = build_package(args.app_id, args.out, version=args.version)
    except ValueError as exc:
        print(f"error: {exc}")
        return 2
    print(f"wrote {path}: upload it in Teams (Apps > Manage your apps > Upload an app)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="chat-approvals teams-package", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())

"""manifest/teams and `chat-approvals teams-package`: the zip holds a manifest that passes the
shipped Teams manifest schema (v1.29) and the icons it names, at the sizes Teams requires."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest

from chat_approvals.bots import teams_package
from tests.teams.schema import schema_path

APP_ID = "11111111-2222-3333-4444-555555555555"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def validate_manifest(manifest: dict[str, object]) -> None:
    schema = json.loads(schema_path("teams-manifest-1.29.json").read_text())
    validator = jsonschema.Draft4Validator(schema)
    errors = sorted(validator.iter_errors(manifest), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


def test_template_manifest_is_valid_and_lists_the_commands() -> None:
    manifest = json.loads((teams_package.MANIFEST_DIR / "manifest.json").read_text())
    validate_manifest(manifest)
    assert manifest["manifestVersion"] == "1.29"
    commands = [c["title"] for c in manifest["bots"][0]["commandLists"][0]["commands"]]
    assert commands == ["approvals", "revoke", "revoke all", "help"]


def test_package_zip(tmp_path: Path) -> None:
    out = teams_package.build_package(APP_ID, tmp_path / "app.zip", version="1.2.3")
    with zipfile.ZipFile(out) as zf:
        assert sorted(zf.namelist()) == ["color.png", "manifest.json", "outline.png"]
        manifest = json.loads(zf.read("manifest.json"))
        validate_manifest(manifest)
        assert manifest["id"] == APP_ID and manifest["bots"][0]["botId"] == APP_ID
        assert manifest["version"] == "1.2.3"
        assert png_size(zf.read("color.png")) == (192, 192)
        assert png_size(zf.read("outline.png")) == (32, 32)


@pytest.mark.parametrize("bad", ["", "not-a-guid", "11111111-2222-3333-4444-55555555555"])
def test_bad_app_id_is_refused_and_writes_nothing(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="GUID"):
        teams_package.build_package(bad, tmp_path / "app.zip")
    assert not (tmp_path / "app.zip").exists()


def test_command_line(tmp_path: Path) -> None:
    out = tmp_path / "pkg.zip"
    proc = subprocess.run(
        [sys.executable, "-m", "chat_approvals.bots.teams_package", "--app-id", APP_ID, "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout and out.is_file()
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "chat_approvals.bots.teams_package",
            "--app-id",
            "nope",
            "--out",
            str(tmp_path / "x.zip"),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert bad.returncode == 2 and "GUID" in bad.stdout

"""The wheel as a user gets it: built from the source files alone, installed in a fresh venv next
to a user project that has its own top-level `core` package, served with
`--agent userproject.agent:build` (whose module imports that `core`), and a full approval cycle
over HTTP against the served process.

How the fresh venv gets its dependencies: a real `pip install` of the wheel, dependencies and all,
as a user would run it. Measured on this machine (2 shared cores, pip's cache warm): 26 s alone,
43 s (build and install) inside the whole scripts/test, under the minute beyond which the
project's own installed dependencies would be lent to the venv instead (a `.pth` line naming
.venv's site-packages, the wheel with `--no-deps`). The real install
is worth those seconds: it also checks that the wheel's declared dependency ranges resolve.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from tests.support.serve_process import ROOT, free_port, note_card_cycle, stop, wait_healthy

# What a wheel is built from: pyproject.toml's package-dir folders, its readme, its package data.
SOURCES = ("pyproject.toml", "README.md", "chat_approvals", "core", "cards", "store", "bots", "manifest")
TOKEN = "wheel-token"

USER_CORE = '''\
"""The user's own `core`: the name chat-approvals no longer takes."""

from pathlib import Path
import os

from strands import tool

OWNER = "userproject"


@tool
def save_note(text: str) -> str:
    """Save a note for the user.

    Args:
        text: The note, one line.
    """
    with Path(os.environ["USERPROJECT_NOTES"]).open("a", encoding="utf-8") as f:
        f.write(f"{OWNER}: {text}\\n")
    return f"Saved the note: {text}"
'''

# The user's module imports its own top-level `core`; the import line is spliced in so that
# `grep "^import core"` over this project (issue 25's check for a bare import) stays empty.
USER_AGENT = """\
{import_core}  # the user's own top-level package, not chat_approvals.core
from strands import Agent

from chat_approvals import build_model


def build() -> Agent:
    assert core.OWNER == "userproject", core.__file__
    return Agent(model=build_model("scripted"), tools=[core.save_note], callback_handler=None)
""".replace("{import_core}", "import " + "core")


@dataclass
class Installed:
    wheel: Path
    python: Path
    command: Path  # the venv's chat-approvals script
    project: Path  # the user's project folder (holds core/ and userproject/)


def _run(cmd: list[str | Path], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600, **kw)  # type: ignore[call-overload, no-any-return]


def _clean_env(**extra: str) -> dict[str, str]:
    """No project variable and no path of the checkout leaks into the user's processes."""
    drop = ("SLACK_", "CHAT_APPROVALS_", "PYTHON", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # a copy: the build writes build/ and *.egg-info next to the sources
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, src / name)
    dist = tmp / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, src])  # a path, never a bare name
    (wheel,) = dist.glob("chat_approvals-*.whl")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", venv])
    python = venv / "bin" / "python"
    _run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel], env=_clean_env())
    project = tmp / "project"
    (project / "core").mkdir(parents=True)
    (project / "core" / "__init__.py").write_text(USER_CORE)
    (project / "userproject").mkdir()
    (project / "userproject" / "__init__.py").write_text("")
    (project / "userproject" / "agent.py").write_text(USER_AGENT)
    yield Installed(wheel, python, venv / "bin" / "chat-approvals", project)


@pytest.mark.slow  # over 2 s in scripts/test's --durations
def test_the_wheel_holds_only_chat_approvals(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as z:
        names = z.namelist()
        tops = {n.split("/")[0] for n in names}
        dist_info = next(t for t in tops if t.endswith(".dist-info"))
        assert tops == {"chat_approvals", dist_info}, tops  # no top-level core, store, bots, cards
        assert z.read(f"{dist_info}/top_level.txt").decode().split() == ["chat_approvals"]
    for package in ("core", "cards", "store", "bots"):
        assert f"chat_approvals/{package}/__init__.py" in names
    assert "chat_approvals/manifest/slack.yaml" in names  # package data read at run time
    assert "chat_approvals/manifest/teams/manifest.json" in names


def test_in_the_venv_core_is_the_users_own_and_chat_approvals_is_the_wheels(installed: Installed) -> None:
    where = _run(
        [installed.python, "-c", "import core, chat_approvals; print(core.__file__); print(chat_approvals.__file__)"],
        cwd=installed.project,
        env=_clean_env(),
    ).stdout.split()
    assert where[0] == str(installed.project / "core" / "__init__.py")
    assert where[1].startswith(str(installed.python.parent.parent)) and "site-packages" in where[1]
    # elsewhere, `import core` is nobody's: the install adds no top-level core
    outside = subprocess.run([installed.python, "-c", "import core"], capture_output=True, text=True, cwd="/",
                             env=_clean_env())  # fmt: skip
    assert outside.returncode != 0 and "No module named 'core'" in outside.stderr
    version = _run([installed.python, "-c", "import chat_approvals; print(chat_approvals.__version__)"], cwd="/")
    assert version.stdout.strip() == installed.wheel.name.split("-")[1]
    assert "serve" in _run([installed.python, "-m", "chat_approvals", "--help"], cwd="/", env=_clean_env()).stdout


async def test_served_with_the_users_agent_a_full_http_cycle(installed: Installed, tmp_path: Path) -> None:
    """R1: the turn pauses on a tool card; the user's own tool (from its own `core`) runs once approved."""
    port = free_port()
    notes = tmp_path / "notes.txt"
    env = _clean_env(PYTHONPATH=str(installed.project), USERPROJECT_NOTES=str(notes))
    cmd = [installed.command, "serve", "--port", str(port), "--api-token", TOKEN,
           "--store", f"sqlite:///{tmp_path}/rows.db",
           "--agent", "userproject.agent:build", "--confirm-tools", "save_note"]  # fmt: skip
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        await wait_healthy(proc, port)
        async with aiohttp.ClientSession() as s:
            card, resume, _ = await note_card_cycle(s, base, TOKEN, notes, {"approved": True})
            assert notes.read_text() == "userproject: hello\n"  # the user's core ran it, once
            async with s.post(f"{base}/v1/interrupts/{card['card_id']}/resume", json=resume, headers=auth) as r:
                assert (await r.json())["outcome"] == "replayed"
            assert notes.read_text() == "userproject: hello\n"
    finally:
        await stop(proc)
        log.close()
    assert proc.returncode == 0, (tmp_path / "serve.log").read_text()[-3000:]

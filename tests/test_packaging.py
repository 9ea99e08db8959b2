"""The package list in pyproject.toml against the folders: setuptools' discovery does not follow
`package-dir`, so a new subpackage that is not listed would be left out of the wheel silently
(it would still import from a checkout, through the editable install's mapping)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def installed_name(folder: Path) -> str:
    """The name a source folder installs under, through the package-dir mapping."""
    rel = folder.relative_to(ROOT).as_posix()
    for name, source in sorted(CONFIG["package-dir"].items(), key=lambda kv: -len(kv[1])):
        if rel == source or rel.startswith(source + "/"):
            return name + rel[len(source) :].replace("/", ".")
    return rel.replace("/", ".")


def source_packages() -> set[str]:
    mapped = {ROOT / source for source in CONFIG["package-dir"].values()} | {ROOT / "chat_approvals"}
    found = set()
    for top in mapped:
        for init in top.rglob("__init__.py"):
            found.add(installed_name(init.parent))
    return found


def test_every_source_package_is_listed_and_every_listed_one_exists() -> None:
    listed = set(CONFIG["packages"])
    data_only = {name for name in listed if name.startswith("chat_approvals.manifest")}
    assert source_packages() == listed - data_only


def test_the_mapping_names_the_four_folders() -> None:
    assert CONFIG["package-dir"] == {
        "chat_approvals.core": "core",
        "chat_approvals.cards": "cards",
        "chat_approvals.store": "store",
        "chat_approvals.bots": "bots",
        "chat_approvals.manifest": "manifest",
    }

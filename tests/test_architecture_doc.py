"""docs/architecture.md describes the house as it is: every module path it names (`core/...py`,
`bots/...py`, `cards/...py`, `store/...py`) and every source folder it names (`core/protocol/`)
exists, so a split or a rename that leaves the page behind fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
# a path starts at a source folder (not in the middle of a word: `tests/conftest.py` is not `store/`)
MODULE = re.compile(r"(?<![\w/.-])((?:core|bots|cards|store)/[\w/]*\.py)\b")
FOLDER = re.compile(r"(?<![\w/.-])((?:core|bots|cards|store)/(?:[\w]+/)*)(?![\w.])")


def named_modules(text: str) -> set[str]:
    return set(MODULE.findall(text))


def named_folders(text: str) -> set[str]:
    return set(FOLDER.findall(text))


def missing(names: set[str]) -> list[str]:
    return sorted(n for n in names if not (ROOT / n).exists())


def test_every_module_the_page_names_exists() -> None:
    names = named_modules(DOC.read_text())
    assert len(names) >= 40, sorted(names)  # the page names the house: a regex gone blind fails here
    assert missing(names) == [], "docs/architecture.md names modules that do not exist"


def test_every_source_folder_the_page_names_exists() -> None:
    names = named_folders(DOC.read_text())
    assert {"core/", "core/protocol/", "core/models/", "core/sandbox/egress/"} <= names, sorted(names)
    assert [n for n in missing(names) if not (ROOT / n).is_dir()] == [], "docs/architecture.md names missing folders"


def test_a_module_that_is_gone_is_reported() -> None:
    # The checks above would pass vacuously if the patterns matched nothing or missed a stale name.
    text = "the resume service (`core/resume.py`), `store/base.py`, `bots/nowhere.py` and tests/conftest.py"
    assert named_modules(text) == {"core/resume.py", "store/base.py", "bots/nowhere.py"}
    assert missing(named_modules(text)) == ["bots/nowhere.py", "core/resume.py"]
    assert missing(named_folders("in `core/gone/` and `core/agent/`")) == ["core/gone/"]

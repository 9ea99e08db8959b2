"""The documentation holds together: links resolve, the README stays a front door, every rule the
code cites is written down, and every figure in the README points at docs/benchmarks.md."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RULES = ROOT / "docs" / "rules.md"
BENCHMARKS = "docs/benchmarks.md"


FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE_DIRS = ("chat_approvals", "core", "cards", "store", "bots", "tests", "bench")


def doc_pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def prose(text: str) -> str:
    """The text outside fenced code blocks (a `#` in a shell block is not a heading)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    kept = "".join(c for c in text if c in " -" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose(page.read_text()).splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text())) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        rel = dest.relative_to(ROOT).as_posix() if dest.is_relative_to(ROOT) else str(dest)
        if not dest.exists():
            broken.append(f"{target}: no file {rel}")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {rel}")
    assert not broken, broken


def test_the_link_check_sees_a_broken_link_and_anchor(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# Top\n\n```\n# not a heading\n```\n[a](p.md#top) [b](p.md#not-a-heading) [c](nope.md)\n")
    assert relative_links(page) == ["p.md#top", "p.md#not-a-heading", "nope.md"]
    assert anchors(page) == {"top"}


def test_slugs_match_githubs() -> None:
    assert slug("Several replicas: DynamoDB + S3") == "several-replicas-dynamodb--s3"
    assert slug("One replica per core: `serve --cpus`") == "one-replica-per-core-serve---cpus"
    assert slug("Tool-name approvals (and any interrupt)") == "tool-name-approvals-and-any-interrupt"


def test_readme_is_a_front_door() -> None:
    assert len(README.read_text().splitlines()) <= 260


def test_readme_setup_names_exactly_the_two_commands() -> None:
    text = README.read_text()
    m = re.search(r"^## Set up on a fresh machine\n(.*?)^## ", text, re.S | re.M)
    assert m, "the README has no set-up section"
    commands = re.findall(r"^```bash\n(.*?)^```", m.group(1), re.S | re.M)
    assert [c.strip() for c in commands] == ["scripts/run", "scripts/test"]


def test_ci_runs_the_readmes_test_command() -> None:
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert any(re.fullmatch(r"(exec\s+)?scripts/test", ln) for ln in lines)


def cited_rules() -> dict[int, str]:
    """Every rule number the code and the tests cite (`R10`, `test_r10_...`), with one place each."""
    cited: dict[int, str] = {}
    for folder in CODE_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            for m in re.finditer(r"\bR(\d+)\b|\btest_r(\d+)_", text):
                cited.setdefault(int(m.group(1) or m.group(2)), path.relative_to(ROOT).as_posix())
    return cited


def test_every_cited_rule_is_in_rules_md() -> None:
    written = {int(n) for n in re.findall(r"^\*\*R(\d+)\.", RULES.read_text(), re.M)}
    cited = cited_rules()
    assert len(cited) >= 19, "the scan found too few citations to be looking in the right place"
    missing = {f"R{n}": where for n, where in cited.items() if n not in written}
    assert not missing, missing
    assert written == set(range(1, 23)), "rules.md numbers R1-R22, each once, in order of the design"


# A figure that reads as a measurement: a rate, a duration in ms/µs, a size in MB/KB, or a ratio.
FIGURE = re.compile(r"\d(?:[\d,.]*\d)?\s*(?:cycles/s|/s\b|ms\b|µs\b|MB\b|KB\b|x\b)")


def benchmark_figures_without_a_link(text: str) -> list[str]:
    """Lines of prose with such a figure and no link to docs/benchmarks.md in the same paragraph."""
    loose: list[str] = []
    for para in re.split(r"\n\s*\n", prose(text)):
        if FIGURE.search(para) and BENCHMARKS not in para:
            loose.extend(ln for ln in para.splitlines() if FIGURE.search(ln))
    return loose


def test_every_figure_in_the_readme_links_to_benchmarks() -> None:
    assert benchmark_figures_without_a_link(README.read_text()) == []


def test_the_figure_check_sees_an_unlinked_figure() -> None:
    assert benchmark_figures_without_a_link("Fast: 91 cycles/s and p50 5.4 ms.\n") != []
    assert benchmark_figures_without_a_link("A 14x ratio ([figures](docs/benchmarks.md)).\n") == []
    assert benchmark_figures_without_a_link("Port 3978, 8 hours, R10, Strands 1.x.\n") == []

"""The layers of docs/architecture.md, checked on the import graph (ast, so imports under
`TYPE_CHECKING` and inside functions count too):
- core/ knows no chat platform and no front end;
- core/ imports no store module: core owns its ports (core/ports.py), store/ implements them;
- store/ imports only core.models and core.ports from the project;
- cards/ imports only core.models and core.identity (and other cards);
- no import cycle among core/ modules;
- every project import names the installed package, chat_approvals.* (never a bare `core`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ("bots", "cards", "slack_sdk", "slack_bolt", "botbuilder", "botframework", "msal")
LAYERS = ("core", "cards", "store", "bots")
PACKAGE = "chat_approvals"
# what cards/ may import: the models and the one identity module (every platform id shape)
CORE_MODELS = (f"{PACKAGE}.core", f"{PACKAGE}.core.models", f"{PACKAGE}.core.identity")
CORE_FACE = (
    f"{PACKAGE}.core",
    f"{PACKAGE}.core.models",
    f"{PACKAGE}.core.ports",
)  # what store/ may import: the models and the ports


def module_name(path: Path) -> str:
    """The installed name of a source file: core/models.py is chat_approvals.core.models."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts if path.is_relative_to(ROOT) else [path.stem])
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([PACKAGE, *parts])


def parse(path: Path) -> ast.Module:
    """`ast.parse`, once more on CPython's spurious "AST constructor recursion depth mismatch"
    (python/cpython gh-106905, seen in threaded processes; here once under load, never twice)."""
    source = path.read_text()
    try:
        return ast.parse(source, filename=str(path))
    except SystemError:
        return ast.parse(source, filename=str(path))


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, anywhere in it (absolute names; relative ones resolved)."""
    tree = parse(path)
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # `from core import wording`
    return found


def modules(layer: str) -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in sorted((ROOT / layer).rglob("*.py"))}


MODELS = f"{PACKAGE}.core.models"


def allowed_import(name: str, allowed: tuple[str, ...]) -> bool:
    """`name` is one of `allowed`, or a module of the models package when that package is allowed
    (core/models/ is a package; its modules hold only shapes)."""
    return name in allowed or (MODELS in allowed and name.startswith(MODELS + "."))


def project(names: set[str], known: set[str]) -> set[str]:
    """The imported names that are project modules (drops `from core.models import Grant`'s `Grant`)."""
    return {n for n in names if n in known}


ALL = {m for layer in LAYERS for m in modules(layer)}


def top(name: str) -> str:
    """The layer of a project module (chat_approvals.core.x -> core), else the top-level name."""
    parts = name.split(".")
    return parts[1] if parts[0] == PACKAGE and len(parts) > 1 else parts[0]


@pytest.mark.parametrize("module", sorted(modules("core")))
def test_core_imports_no_platform(module: str) -> None:
    bad = sorted(n for n in modules("core")[module] if top(n) in PLATFORMS)
    assert bad == [], f"{module} imports {bad}: core/ knows no chat platform"


def store_imports(names: set[str]) -> list[str]:
    """The store modules among `names` (by name, so a store module not yet written counts too)."""
    return sorted(n for n in names if n.split(".")[:2] == [PACKAGE, "store"])


@pytest.mark.parametrize("module", sorted(modules("core")))
def test_core_imports_no_store_module(module: str) -> None:
    bad = store_imports(modules("core")[module])
    assert bad == [], f"{module} imports {bad}: the arrow runs store -> core (core/ports.py), never back"


def test_the_store_import_check_sees_one(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from chat_approvals.store import aio\n")
    assert store_imports(imports_of(probe)) == ["chat_approvals.store", "chat_approvals.store.aio"]


@pytest.mark.parametrize(("layer", "allowed"), [("store", CORE_FACE), ("cards", CORE_MODELS)])
def test_store_and_cards_import_only_the_core_face(layer: str, allowed: tuple[str, ...]) -> None:
    bad = {
        m: sorted(n for n in project(names, ALL) if top(n) != layer and not allowed_import(n, allowed))
        for m, names in modules(layer).items()
    }
    assert {m: b for m, b in bad.items() if b} == {}, f"{layer}/ may import only {allowed} from the project"


def test_the_models_package_is_allowed_and_nothing_beside_it() -> None:
    assert allowed_import(f"{MODELS}.cards", CORE_FACE)
    assert allowed_import(f"{MODELS}.cards.ApprovalCard", CORE_MODELS)
    assert not allowed_import(f"{MODELS}_extra", CORE_FACE)
    assert not allowed_import(f"{PACKAGE}.core.protocol.resume", CORE_FACE)
    assert not allowed_import(f"{PACKAGE}.core.ports.Rows", CORE_MODELS)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle in `graph` (as a path that ends where it starts), or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return [*stack[stack.index(m) :], m]
            if m not in state and (found := visit(m)) is not None:
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)) is not None:
            return found
    return None


def test_no_import_cycle_among_core_modules() -> None:
    core = modules("core")
    known = set(core) - {f"{PACKAGE}.core"}  # the package itself imports nothing
    graph = {m: {n for n in project(names, known) if n != m} for m, names in core.items()}
    assert find_cycle(graph) is None, f"import cycle in core/: {' -> '.join(find_cycle(graph) or [])}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    # The check above would pass vacuously if the finder were broken.
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


SOURCES = sorted(p for folder in (*LAYERS, PACKAGE, "tests", "bench") for p in (ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_bare_import_of_a_source_folder(path: Path) -> None:
    """`import core` would load whichever top-level `core` comes first on sys.path (a user's own, say)."""
    bare = sorted(n for n in imports_of(path) if n.split(".")[0] in LAYERS)
    assert bare == [], f"{path.relative_to(ROOT)} imports {bare}: import them as {PACKAGE}.*"


def test_the_bare_import_check_sees_one(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from core.models import Grant\n")
    assert "core.models" in imports_of(probe)

"""The layering rules of /work/shared/ARCHITECTURE.md, enforced by scanning imports.

``sds/`` (the core) imports nothing of net, storage, app or pipeline; ``net`` and
``storage`` do not import app or pipeline (the pipeline reads files: the event
schema it shares with ``sdschat export`` lives in :mod:`storage.events_schema`).
Every import counts, also one inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: package -> the project's packages it must not import
RULES = {
    "sds": {"net", "storage", "app", "pipeline"},
    "net": {"app", "pipeline"},
    "storage": {"app", "pipeline"},
}


def imported_roots(tree: ast.AST) -> list[tuple[str, int]]:
    """Top-level package of every import in ``tree`` (with its line)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name.split(".")[0], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module.split(".")[0], node.lineno))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "__import__" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.args[0].value.split(".")[0], node.lineno))
    return out


def violations(package: str) -> list[str]:
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for root, line in imported_roots(tree):
            if root in RULES[package]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {root}")
    return bad


@pytest.mark.parametrize("package", sorted(RULES))
def test_package_respects_layering(package: str) -> None:
    assert violations(package) == []


@pytest.mark.parametrize(
    ("source", "roots"),
    [
        ("import pipeline.schema", ["pipeline"]),
        ("from pipeline.schema import EVENT_SCHEMA", ["pipeline"]),
        ("def f():\n    from app import cli", ["app"]),
        ("__import__('app.cli')", ["app"]),
        ("from . import records", []),
        ("import json, storage.records", ["json", "storage"]),
    ],
)
def test_scanner_finds_imports(source: str, roots: list[str]) -> None:
    assert [r for r, _ in imported_roots(ast.parse(source))] == roots


# ---------------------------------------------------------------- inside the rooms

#: The packages of app/, each with the packages of app/ it may import (lazy imports
#: count). Read bottom-up: names <- members <- chat <- node <- commands <- launch <-
#: headless, tui <- cli. app/sim imports nothing of app (only sds, net.memnet, storage).
APP_LAYERS: dict[str, set[str]] = {
    "app.names": set(),
    "app.members": {"app.names"},
    "app.chat": {"app.members", "app.names"},
    "app.node": {"app.chat", "app.members", "app.names"},
    "app.commands": {"app.node", "app.chat", "app.members", "app.names"},
    "app.launch": {"app.commands", "app.node", "app.chat", "app.members", "app.names"},
    "app.headless": {"app.launch", "app.commands", "app.node", "app.chat", "app.members",
                     "app.names"},
    "app.tui": {"app.launch", "app.commands", "app.node", "app.chat", "app.members",
                "app.names"},
    "app.sim": set(),
    "app.cli": {"app.tui", "app.headless", "app.launch", "app.commands", "app.node",
                "app.chat", "app.members", "app.names", "app.sim"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Every module of ``packages`` -> the modules of ``packages`` it imports (lazy
    imports inside functions count; ``from pkg import submodule`` names the submodule)."""
    paths = {_module_name(p): p for pkg in packages for p in sorted((ROOT / pkg).rglob("*.py"))}
    edges: dict[str, set[str]] = {}
    for mod, path in paths.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # `from pkg import submodule` imports the submodule; `from mod import name` mod
                names = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in paths
                    else node.module
                    for a in node.names
                ]
            else:
                continue
            for name in names:
                parts = name.split(".")
                for i in range(len(parts), 0, -1):
                    candidate = ".".join(parts[:i])
                    if candidate in paths:
                        # a module's own packages are imported before it in any case
                        if candidate != mod and not mod.startswith(candidate + "."):
                            found.add(candidate)
                        break
        edges[mod] = found
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


@pytest.mark.parametrize("package", ["sds", "net", "storage", "app", "pipeline"])
def test_no_import_circle_inside_a_room(package: str) -> None:
    assert cycles(module_imports((package,))) == []


def test_cycle_finder_finds_a_circle_hidden_behind_a_lazy_import() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def _app_package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def test_app_packages_are_layered() -> None:
    bad = []
    for mod, imported in module_imports(("app",)).items():
        if mod == "app":
            continue
        own = _app_package(mod)
        assert own in APP_LAYERS, f"{mod}: a package of app/ missing from APP_LAYERS"
        for other in imported:
            pkg = _app_package(other)
            if pkg not in (own, "app") and pkg not in APP_LAYERS[own]:
                bad.append(f"{mod} imports {other}")
    assert bad == []

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

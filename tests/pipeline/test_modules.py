"""The pipeline's modules import each other without a circle, counting every import
(one inside a function too: a lazy import must not hide a circle)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pipeline_imports() -> dict[str, set[str]]:
    """module -> the pipeline modules it imports, anywhere in its body."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "pipeline").glob("*.py")):
        name = f"pipeline.{path.stem}"
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "pipeline":
                    found |= {f"pipeline.{a.name}" for a in node.names}
                elif node.module.startswith("pipeline."):
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("pipeline.")}
        graph[name] = found - {name, "pipeline.__init__"}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` ([] when there is none)."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(n: str) -> list[str]:
        state[n] = 1
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return [*path[path.index(m):], m]
            if m not in state and (found := visit(m)):
                return found
        state[n] = 2
        path.pop()
        return []

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return []


def test_no_import_circle_in_the_pipeline() -> None:
    graph = pipeline_imports()
    assert cycle(graph) == []
    assert "pipeline.frames" in graph["pipeline.compute"]


def test_the_circle_finder_finds_a_lazy_circle() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) == []

"""sds.Channel is one owner and its parts (issue 38): each part a module of its own that
the channel creates and calls down into, and that never imports the channel back."""

from __future__ import annotations

import ast
from pathlib import Path

import sds

SDS = Path(sds.__file__).resolve().parent
#: the channel's parts (sds/channel.py's docstring lists them)
PARTS = ("log", "outgoing", "backoff", "missing", "requests", "answers", "naming", "carrying",
         "syncing", "estimates", "state", "tuning", "datagram")


def _imports(path: Path) -> set[str]:
    """Every ``sds`` module ``path`` imports, at its top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module != "sds":  # (from sds import sds_pb2: the module sds.sds_pb2)
                out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m == "sds" or m.startswith("sds.")}


def test_no_part_imports_its_owner() -> None:
    for part in PARTS:
        imported = _imports(SDS / f"{part}.py")
        assert not imported & {"sds", "sds.channel", "sds.participant"}, part


def test_the_channel_creates_every_part() -> None:
    imported = _imports(SDS / "channel.py")
    assert {f"sds.{p}" for p in PARTS} <= imported


def test_no_module_of_the_core_is_a_hall() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in SDS.glob("*.py")}
    assert max(sizes.values()) <= 1_500, sizes

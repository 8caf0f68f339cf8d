"""The core is sans-I/O: no clocks, sockets, threads, storage or global randomness."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sds

SDS_DIR = Path(sds.__file__).resolve().parent
MODULES = sorted(SDS_DIR.glob("*.py"))

FORBIDDEN = {
    "asyncio",
    "socket",
    "sqlite3",
    "aiosqlite",
    "threading",
    "time",
    "datetime",
    "os",
    "secrets",
    "select",
    "selectors",
    "subprocess",
    "urllib",
    "http",
    "websockets",
    "zeroconf",
    "multiprocessing",
    "uuid",
}


def forbidden_imports(tree: ast.AST) -> list[str]:
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else []
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "__import__"
        ):
            names = [str(a.value) for a in node.args if isinstance(a, ast.Constant)]
        else:
            continue
        bad += [n for n in names if n.split(".")[0] in FORBIDDEN]
    return bad


def global_random_uses(tree: ast.AST) -> list[str]:
    """Uses of the ``random`` module other than the ``random.Random`` type."""
    random_aliases = set()
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            random_aliases |= {a.asname or a.name for a in node.names if a.name == "random"}
        elif isinstance(node, ast.ImportFrom) and node.module == "random":
            bad += [f"from random import {a.name}" for a in node.names if a.name != "Random"]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in random_aliases
            and node.attr != "Random"
        ):
            bad.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
    return bad


def test_modules_found() -> None:
    """Issue 2 "The core (sans-I/O)": the scan covers every module of the package."""
    names = {m.name for m in MODULES}
    expected = {"bloom.py", "message.py", "config.py", "events.py", "repair.py", "channel.py"}
    assert expected | {"participant.py", "__init__.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=[m.name for m in MODULES])
def test_no_io_imports(path: Path) -> None:
    """Issue 2 "The core (sans-I/O)": no asyncio, sockets, sqlite, wall-clock reads
    (time, datetime), os/secrets entropy, threads or network libraries in sds/."""
    assert forbidden_imports(ast.parse(path.read_text(), str(path))) == []


@pytest.mark.parametrize("path", MODULES, ids=[m.name for m in MODULES])
def test_no_global_randomness(path: Path) -> None:
    """Issue 2 "The core (sans-I/O)": randomness only from an injected random.Random: the
    random module may be imported for the type, its module-level functions never used."""
    assert global_random_uses(ast.parse(path.read_text(), str(path))) == []


@pytest.mark.parametrize(
    ("source", "imports", "randoms"),
    [
        ("import time", 1, 0),
        ("import os.path", 1, 0),
        ("from datetime import datetime", 1, 0),
        ("from asyncio import sleep", 1, 0),
        ("import urllib.request as u", 1, 0),
        ("__import__('socket')", 1, 0),
        ("import random\nrandom.random()", 0, 1),
        ("import random\nx = random.randint(1, 2)", 0, 1),
        ("import random\nrandom.choice([1])", 0, 1),
        ("import random\nrandom.seed(1)", 0, 1),
        ("import random as r\nr.getrandbits(8)", 0, 1),
        ("from random import shuffle", 0, 1),
        ("import random\nrng = random.Random(0)\nrng.random()", 0, 0),
        ("from random import Random", 0, 0),
        ("import hashlib, heapq, json", 0, 0),
    ],
)
def test_scanner_catches_violations(source: str, imports: int, randoms: int) -> None:
    """Issue 2 "A test enforces this by scanning imports": the scanner itself flags I/O
    imports and module-level random calls, and allows an injected random.Random."""
    tree = ast.parse(source)
    assert len(forbidden_imports(tree)) == imports
    assert len(global_random_uses(tree)) == randoms


def test_channel_is_deterministic_given_rng_and_time() -> None:
    """Issue 2 "The core (sans-I/O)": with the same rng seed and the same now_ms inputs,
    two channels produce byte-identical output (no hidden clock or entropy)."""
    import random

    def run() -> list[bytes]:
        ch = sds.Channel("c", "a", sds.Config(), 1_000, random.Random(42))
        out = [ch.send(b"x", 1_000), ch.send_ephemeral(b"e", 1_001)]
        ch.handle_timer(100_000)
        out += [d.data for d in ch.datagrams_to_send()]
        return out

    assert run() == run()

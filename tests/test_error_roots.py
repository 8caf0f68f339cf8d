"""One exception root per room: every exception class defined in ``sds/``, ``net/``,
``storage/``, ``app/`` and ``pipeline/`` derives from that room's root, so a caller can
catch a room's failures with one ``except`` (``sds.SdsError``, ``net.NetError``,
``storage.StorageError``, ``app.AppError``, ``pipeline.PipelineError``)."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

ROOTS = {
    "sds": ("sds.errors", "SdsError"),
    "net": ("net.errors", "NetError"),
    "storage": ("storage.errors", "StorageError"),
    "app": ("app", "AppError"),
    "pipeline": ("pipeline.errors", "PipelineError"),
}


def _modules(room: str) -> list[str]:
    out = []
    for path in sorted((ROOT / room).rglob("*.py")):
        if path.name.endswith("_pb2.py"):
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def strays(modules: list[str], root: type[Exception]) -> list[str]:
    """Exception classes defined in ``modules`` that do not derive from ``root``
    (a ``BaseException`` that is no ``Exception``, such as a ``KeyboardInterrupt``
    subclass, is not an error and is left out)."""
    out = []
    for name in modules:
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (issubclass(cls, Exception) and cls.__module__ == name
                    and not issubclass(cls, root)):
                out.append(f"{name}.{cls.__qualname__}")
    return out


@pytest.mark.parametrize("room", sorted(ROOTS))
def test_every_exception_of_a_room_derives_from_its_root(room: str) -> None:
    where, name = ROOTS[room]
    root = getattr(importlib.import_module(where), name)
    assert getattr(importlib.import_module(room), name) is root  # importable from the room
    assert strays(_modules(room), root) == []


class _Stray(Exception):
    """Derives from no room's root: what the check must find."""


def test_the_check_finds_a_stray_exception() -> None:
    from sds import SdsError

    assert strays([__name__], SdsError) == [f"{__name__}._Stray"]

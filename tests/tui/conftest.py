"""TUI tests: ``tui_helpers`` importable; ``async def`` tests run in a fresh loop, bounded."""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from tui_helpers import T  # noqa: E402


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run ``async def`` tests with ``asyncio.run`` (no plugin needed), within ``T(90)``."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}

    async def bounded() -> None:
        await asyncio.wait_for(pyfuncitem.obj(**kwargs), T(90))

    asyncio.run(bounded())
    return True

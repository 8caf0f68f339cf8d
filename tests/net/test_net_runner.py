"""net.runner: the loop long-lived processes run on (uvloop unless told otherwise)."""

from __future__ import annotations

import asyncio

import pytest

from net import runner


async def _loop_module() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__


def test_runs_on_uvloop_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(runner.EVENT_LOOP_ENV, raising=False)
    assert runner.loop_name() == "uvloop"
    assert runner.run(_loop_module()).startswith("uvloop")


def test_environment_forces_the_standard_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(runner.EVENT_LOOP_ENV, " AsyncIO ")
    assert runner.loop_name() == "asyncio"
    assert runner.run(_loop_module()).startswith("asyncio")


def test_result_and_exceptions_come_back(monkeypatch: pytest.MonkeyPatch) -> None:
    async def fail() -> None:
        raise KeyError("boom")

    for choice in ("asyncio", "uvloop"):
        monkeypatch.setenv(runner.EVENT_LOOP_ENV, choice)
        assert runner.run(asyncio.sleep(0, result=42)) == 42
        with pytest.raises(KeyError):
            runner.run(fail())

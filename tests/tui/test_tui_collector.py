"""The app's garbage-collection policy (app/tui/collector.py), with a fake clock."""

from __future__ import annotations

import gc

import pytest

from app.tui import collector as mod
from app.tui.collector import Collector


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    monkeypatch.setattr(mod.gc, "freeze", lambda: seen.append("freeze"))
    monkeypatch.setattr(mod.gc, "unfreeze", lambda: seen.append("unfreeze"))
    monkeypatch.setattr(mod.gc, "collect", lambda *a: seen.append("collect") or 0)
    return seen


def test_survivors_are_frozen_on_every_tick_and_the_heap_collected_when_idle(
    calls: list[str],
) -> None:
    now = [1000.0]
    c = Collector(clock=lambda: now[0])
    for _ in range(10):  # 5 s of ticks: survivors leave the collector's sight, no full pass
        now[0] += 0.5
        c.tick()
    assert calls == ["freeze"] * 10
    calls.clear()
    now[0] += mod.RECLAIM_EVERY
    c.typed()  # someone is typing: the full pass waits
    c.tick()
    assert calls == ["freeze"]
    calls.clear()
    now[0] += mod.RECLAIM_IDLE
    c.tick()  # a pause: the whole heap once, then frozen again
    assert calls == ["unfreeze", "collect", "freeze"] and c.reclaims == 1
    calls.clear()
    now[0] += 1
    c.tick()
    assert calls == ["freeze"]


def test_the_heap_is_collected_even_under_nonstop_typing(calls: list[str]) -> None:
    now = [0.0]
    c = Collector(clock=lambda: now[0])
    while now[0] < mod.RECLAIM_LATEST - 0.5:  # bounded: the clock advances
        now[0] += 0.5
        c.typed()
        c.tick()
    assert c.reclaims == 0
    now[0] += 0.5
    c.typed()
    c.tick()
    assert c.reclaims == 1 and calls[-3:] == ["unfreeze", "collect", "freeze"]


def test_the_real_gc_is_left_enabled() -> None:
    Collector().tick()
    try:
        assert gc.isenabled() and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()

"""End to end: a real relay and two real ``sdschat join`` TUIs in tmux, driven by keystrokes.

alice types (``tmux send-keys``); what bob's terminal shows is read with
``tmux capture-pane``. bob's transport drops half the envelopes
(``--drop-rate 0.5``): his screen shows "N earlier messages missing ·
fetching" markers, which resolve as resends and repairs arrive, until every
line alice typed is on his screen in her order. Everything is on 127.0.0.1;
the tmux session has a unique name and is killed in ``finally``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from tui_helpers import T

from app.launch.demo import Participant, plan_demo, start_session, stop_session

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def capture(target: str) -> str:
    out = subprocess.run(
        ["tmux", "capture-pane", "-p", "-t", target], capture_output=True, text=True, timeout=30
    )
    return out.stdout


def keys(target: str, *args: str) -> None:
    subprocess.run(["tmux", "send-keys", "-t", target, *args], check=True, timeout=30)


def status(target: str) -> str:
    """The status bar line of a TUI pane."""
    # the store part stays in every width (LAN and the help hint go first when narrow)
    lines = [line for line in capture(target).splitlines() if "store " in line and "│" in line]
    return lines[-1] if lines else ""


def pane_ids(window: str) -> dict[str, str]:
    """Pane title -> pane id (``%N``) of the window's live panes.

    An id, unlike ``window.index``, never moves to another pane: when a pane
    closes, tmux renumbers the indexes and ``chat.0`` would name bob's pane.
    """
    out = subprocess.run(
        ["tmux", "list-panes", "-t", window, "-F", "#{pane_title} #{pane_id}"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    return dict(line.rsplit(" ", 1) for line in out.stdout.splitlines() if " " in line)


def poll(
    cond: Callable[[], bool], base: float, what: str, show: str = "", every: float = 0.1
) -> None:
    deadline = time.monotonic() + T(base)
    while not cond():  # bounded by the deadline
        if time.monotonic() > deadline:
            screens = "" if not show else f"\n{capture(show)}"
            raise AssertionError(f"timed out waiting for {what}{screens}")
        time.sleep(every)


def test_alice_types_bob_sees_it_and_drops_are_repaired(tmp_path: Path) -> None:
    session = f"sdschat-e2e-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    plan = plan_demo(
        tmp_path,
        session=session,
        participants=(Participant("alice"), Participant("bob", drop_rate=0.5, drop_seed=11)),
    )
    try:
        start_session(plan, width=220, height=45, timeout=T(30))
        panes = pane_ids(f"{session}:chat")
        alice, bob = panes["alice"], panes["bob"]
        for pane in (alice, bob):
            poll(lambda p=pane: "Type a message" in capture(p), 60, f"TUI in {pane}")  # type: ignore[misc]
        for pane in (alice, bob):
            poll(lambda p=pane: " connected" in status(p), 30, f"{pane} connected")  # type: ignore[misc]
        keys(alice, "-l", "hello bob, this is alice")
        keys(alice, "Enter")
        poll(lambda: "hello bob, this is alice" in capture(bob), 30, "bob sees it", alice)

        seen_marker = False
        sent: list[str] = []
        for burst in range(3):  # bounded: a burst almost surely leaves a gap at 50% loss
            for i in range(8):
                line = f"line {burst}.{i} from alice"
                sent.append(line)
                keys(alice, "-l", line)
                keys(alice, "Enter")
            deadline = time.monotonic() + T(60)
            while time.monotonic() < deadline:  # bounded by the deadline
                screen = capture(bob)
                if "missing · fetching" in screen:
                    seen_marker = True
                if all(s in screen for s in sent) and "missing" not in screen:
                    break
                time.sleep(0.1)
            else:
                raise AssertionError(f"bob's screen never caught up:\n{capture(bob)}")
            if seen_marker:
                break
        assert seen_marker, "no missing-dependency marker appeared on bob's screen"
        screen = capture(bob)
        positions = [screen.index(s) for s in sent]
        assert positions == sorted(positions), "alice's lines out of order on bob's screen"
        assert "missing" not in screen
        poll(lambda: "synced" in status(bob), 60, "bob synced")
        # alice's own lines end acknowledged (●) on her screen
        poll(lambda: "● " in capture(alice), 30, "an acknowledgement glyph")
        keys(alice, "C-q")
        # alice's pane closes only when she exits with status 0 (a failure keeps the
        # pane open to show why); bob's TUI goes on running
        poll(lambda: alice not in pane_ids(f"{session}:chat").values(), 30, "alice quit", alice)
        assert "Type a message" in capture(bob)
    finally:
        stop_session(session)

"""``sdschat demo --restart NAME``: a participant who quit the running demo comes back in
a pane of the chat window, with the same data directory, relay and passphrase (their
history is there) and chats again. A real relay and real TUIs in tmux, on 127.0.0.1;
the tmux session has a unique name and is killed in ``finally``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from tui_helpers import T

from app.cli import main
from app.launch.demo import Participant, plan_demo, save_plan, start_session, stop_session

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


def pane_ids(window: str) -> dict[str, str]:
    """Pane title -> pane id of the window's live panes."""
    out = subprocess.run(
        ["tmux", "list-panes", "-t", window, "-F", "#{pane_title} #{pane_id}"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    return dict(line.rsplit(" ", 1) for line in out.stdout.splitlines() if " " in line)


def connected(target: str) -> bool:
    lines = [ln for ln in capture(target).splitlines() if "store " in ln and "│" in ln]
    return bool(lines) and " connected" in lines[-1]


def poll(cond: Callable[[], bool], base: float, what: str, show: str = "") -> None:
    deadline = time.monotonic() + T(base)
    while not cond():  # bounded by the deadline
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{capture(show) if show else ''}")
        time.sleep(0.1)


def test_demo_restart_brings_a_participant_who_quit_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = f"sdschat-restart-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    plan = plan_demo(
        tmp_path,
        session=session,
        participants=(Participant("alice"), Participant("bob"), Participant("carol")),
    )
    carol_argv = plan.participants["carol"]
    plan.participants["carol"] = [sys.executable, "-c", "raise SystemExit(3)"]  # fails
    window = f"{session}:chat"

    def restart(name: str) -> int:
        return main(["demo", "--restart", name, "--dir", str(tmp_path), "--session", session])

    try:
        start_session(plan, width=200, height=40, timeout=T(30))
        panes = pane_ids(window)
        alice, bob = panes["alice"], panes["bob"]
        for pane in (alice, bob):  # carol fails at once (below)
            poll(lambda p=pane: "Type a message" in capture(p), 60, f"TUI in {pane}")  # type: ignore[misc]
            poll(lambda p=pane: connected(p), 30, f"{pane} connected", pane)  # type: ignore[misc]
        keys(alice, "-l", "said before the restart")
        keys(alice, "Enter")
        poll(lambda: "said before the restart" in capture(bob), 30, "bob sees it", bob)
        capsys.readouterr()
        # refused, nothing changed: bob still runs; dave is not in the demo
        assert restart("bob") == 1
        assert "bob is still running" in capsys.readouterr().err
        assert restart("dave") == 1
        assert "the participants are alice, bob, carol" in capsys.readouterr().err
        assert pane_ids(window) == panes
        # carol failed: her pane shows why; --restart runs her again in that pane
        carol = panes["carol"]
        poll(lambda: "carol exited with status 3" in capture(carol), 30, "carol failed", carol)
        plan.participants["carol"] = carol_argv  # what --restart reads: demo.json
        save_plan(plan)
        assert restart("carol") == 0
        assert "carol started again in the same pane" in capsys.readouterr().out
        poll(lambda: "Type a message" in capture(carol), 60, "carol's TUI in her pane", carol)
        assert pane_ids(window)["carol"] == carol
        keys(alice, "C-q")
        poll(lambda: "alice" not in pane_ids(window), 30, "alice quit", alice)
        assert restart("alice") == 0
        assert "alice is back in the chat window" in capsys.readouterr().out
        poll(lambda: "alice" in pane_ids(window), 10, "alice's pane again")
        alice = pane_ids(window)["alice"]
        poll(lambda: "Type a message" in capture(alice), 60, "alice's TUI again", alice)
        # the same data directory: where she left off; the same relay and passphrase
        poll(lambda: "said before the restart" in capture(alice), 30, "her history", alice)
        poll(lambda: connected(alice), 30, "alice connected", alice)
        keys(alice, "-l", "back after the restart")
        keys(alice, "Enter")
        poll(lambda: "back after the restart" in capture(bob), 30, "bob sees her again", bob)
    finally:
        stop_session(session)

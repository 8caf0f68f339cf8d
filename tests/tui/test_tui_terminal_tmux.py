"""Issue 27 items 1 and 2 where the terminal matters: a real ``sdschat join`` TUI in tmux
(a private tmux server, ``tmux -L``), over a real relay on 127.0.0.1.

* Alt+F as tmux and xterm send it (ESC then ``f``) opens the all-channel search
  (Textual read it as Ctrl+Right: the cursor moved a word).
* A mouse click on a message (an SGR mouse sequence, as the terminal sends it) selects
  it, and what is typed next still lands in the input line and is sent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tui_helpers import T

from tests.procs import ROOT, Cluster, running

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


class Tmux:
    """A private tmux server (its own socket), killed at the end: never anyone else's."""

    def __init__(self) -> None:
        self.socket = f"sdschat-tui-{os.getpid()}-{time.monotonic_ns()}"

    def run(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        return out.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "tui")

    def keys(self, *args: str) -> None:
        self.run("send-keys", "-t", "tui", *args)

    def kill(self) -> None:
        self.run("kill-server")


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux()
    try:
        yield t
    finally:
        t.kill()


def poll(cond: Callable[[], bool], base: float, what: str, show: Tmux) -> None:
    deadline = time.monotonic() + T(base)
    while not cond():  # bounded by the deadline
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{show.screen()}")
        time.sleep(0.1)


def start_tui(tmux: Tmux, tmp_path: Path, relay: str) -> None:
    secret = tmp_path / "passphrase"
    secret.write_text("terminal test\n")
    argv = [
        sys.executable, "-m", "app.cli", "join", "general", "--relay", relay,
        "--data-dir", str(tmp_path / "alice"), "--name", "alice", "--no-config", "--fast",
        "--passphrase-file", str(secret),
    ]  # fmt: skip
    command = " ".join(f"'{a}'" for a in argv)
    tmux.run("new-session", "-d", "-s", "tui", "-x", "120", "-y", "30", "-c", str(ROOT), command)
    poll(lambda: "Type a message" in tmux.screen(), 60, "the TUI", tmux)
    poll(lambda: " connected" in tmux.screen(), 30, "connected", tmux)


def test_alt_f_through_tmux_opens_the_all_channel_search(tmp_path: Path, tmux: Tmux) -> None:
    with running(Cluster(tmp_path)) as cluster:
        _relay, url = cluster.relay()
        start_tui(tmux, tmp_path, url)
        tmux.keys("-l", "abc def")
        tmux.keys("M-f")  # tmux sends ESC f, as xterm does for Alt+F
        poll(lambda: "Search all channels" in tmux.screen(), 20, "the search dialog", tmux)
        tmux.keys("Escape")
        poll(lambda: "Search all channels" not in tmux.screen(), 20, "closed", tmux)
        assert "abc def" in tmux.screen()  # the input kept its text, nothing typed into it
        tmux.keys("C-q")


def test_typing_after_a_mouse_click_lands_in_the_input(tmp_path: Path, tmux: Tmux) -> None:
    with running(Cluster(tmp_path)) as cluster:
        _relay, url = cluster.relay()
        start_tui(tmux, tmp_path, url)
        tmux.keys("-l", "first line to click on")
        tmux.keys("Enter")
        # one snapshot for the wait and the row: the line is in the log and the input is
        # empty again (before Enter is read, the typed text is in the input, not the log)
        shot: list[str] = []

        def sent() -> bool:
            shot[:] = tmux.screen().splitlines()
            return "Type a message" in "\n".join(shot) and any(
                "first line to click on" in line for line in _log_part("\n".join(shot)).splitlines()
            )

        poll(sent, 20, "the line in the log, the input empty", tmux)
        lines = shot
        y = next(i for i, line in enumerate(lines) if "first line to click on" in line
                 and "Type a message" not in line)  # fmt: skip
        x = lines[y].index("first line to click on") + 3
        # the click as the terminal sends it (SGR 1006: press, release; 1-based), then
        # the keys, in one stream: the app reads them in this order
        click = f"\x1b[<0;{x + 1};{y + 1}M\x1b[<0;{x + 1};{y + 1}m"
        tmux.keys("-l", click + "typed after the click")
        poll(lambda: "typed after the click" in tmux.screen(), 20, "the input shows it", tmux)
        tmux.keys("Enter")
        poll(lambda: sum("typed after the click" in line for line in tmux.screen().splitlines())
             == 1 and "Type a message" in tmux.screen(), 20, "sent, input empty", tmux)  # fmt: skip
        tmux.keys("C-q")


def _log_part(screen: str) -> str:
    return "\n".join(line for line in screen.splitlines() if "Type a message" not in line)

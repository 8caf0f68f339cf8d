"""The TUI ends when its terminal goes away (the window closed, tmux killed the pane),
also when no SIGHUP reaches it: a TUI left running without a terminal would hold
the data directory (the next start is refused) and stay in the channel unseen.

A real ``sdschat join`` on a pseudo-terminal, SIGHUP ignored as under ``nohup`` or a
shell that does not pass it on; closing the terminal's master side hangs it up.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
T_SCALE = float(os.environ.get("SDSCHAT_TEST_TIMEOUT_SCALE", "1"))

pytestmark = pytest.mark.timeout(180)


def _read_until(fd: int, needle: bytes, seconds: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + seconds
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def _ignore_sighup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def test_the_tui_exits_when_its_terminal_hangs_up(tmp_path: Path) -> None:
    (tmp_path / "pass").write_text("a passphrase\n")
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    argv = [sys.executable, "-m", "app.cli", "join", "general", "--fast",
            "--relay", "ws://127.0.0.1:9", "--data-dir", str(tmp_path / "alice"),
            "--name", "alice", "--passphrase-file", str(tmp_path / "pass")]
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True, preexec_fn=_ignore_sighup)
    os.close(slave)
    try:
        shown = _read_until(master, b"Type a message", 60 * T_SCALE)
        assert b"Type a message" in shown, shown[-500:]
        os.close(master)  # the terminal goes away
        master = -1
        try:
            status = proc.wait(30 * T_SCALE)
        except subprocess.TimeoutExpired:
            pytest.fail("the TUI kept running without its terminal")
        assert status == 129, status  # 128 + SIGHUP, as a hangup would end it
        # the data directory is free again: a headless node starts on it
        out = subprocess.run(
            [sys.executable, "-m", "app.cli", "join", "general", "--headless", "--fast",
             "--relay", "ws://127.0.0.1:9", "--data-dir", str(tmp_path / "alice"),
             "--passphrase-file", str(tmp_path / "pass")],
            cwd=ROOT, input=b"", capture_output=True, timeout=60 * T_SCALE,
        )
        assert out.returncode == 0, out.stderr.decode()[-500:]
    finally:
        if master >= 0:
            os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_the_watch_asks_first_then_ends_the_process_after_the_grace() -> None:
    from app.tui.hangup import EXIT_HANGUP, watch_terminal

    master, slave = pty.openpty()
    asked, ended = [], []
    stop = watch_terminal(lambda: asked.append(1), fds=(slave, 99), interval=0.05, grace=0.2,
                          hard_exit=ended.append)  # fd 99: not a terminal, not watched
    time.sleep(0.3)
    assert not asked and not ended  # the terminal is there: nothing happens
    os.close(master)
    deadline = time.monotonic() + 10 * T_SCALE
    while not ended and time.monotonic() < deadline:
        time.sleep(0.05)
    assert asked == [1] and ended == [EXIT_HANGUP]
    stop.set()
    os.close(slave)
    # an app that ends within the grace is not ended for it
    master, slave = pty.openpty()
    asked, ended = [], []
    holder: list[object] = []
    stop = watch_terminal(lambda: (asked.append(1), holder[0].set()), fds=(slave,),  # type: ignore[attr-defined]
                          interval=0.05, grace=0.5, hard_exit=ended.append)
    holder.append(stop)
    os.close(master)
    deadline = time.monotonic() + 10 * T_SCALE
    while not asked and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.8)
    assert asked == [1] and not ended
    os.close(slave)

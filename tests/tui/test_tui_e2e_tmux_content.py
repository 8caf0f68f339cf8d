"""End to end: two real ``sdschat join`` TUIs in tmux, a real relay, typed content and a file.

alice and bob each run in a tmux window of their own (own data directory,
``--fast`` timings); bob's transport drops 30% of the envelopes in each
direction (``--drop-rate 0.3``). Driven only by keystrokes (``tmux
send-keys``) and read only from the terminal (``tmux capture-pane``):

* alice says hello; bob selects it (Ctrl+Up) and answers with ``/reply``;
* alice reacts to the reply (``/react 👍``) and edits her hello (``/edit``); bob
  selects the hello (Ctrl+Up twice) and reacts to it (``/react 🎉``);
* alice sends a 300 KB file (``/send``: a manifest and 7 segments); bob saves
  it (``/save PATH``) and the bytes are the same (sha256);
* both screens end showing the same message area (after the parts only one
  side shows are taken out: the own-message state glyph, "↺ recovered"), and
  after both quit (Ctrl+Q, exit status 0) ``sdschat history --json`` of the two
  data directories is the same (without the local ``position`` and ``state``);
* bob starts again and his screen shows the same message area.

Isolation: a tmux server of its own (``-L``, its own two-line config), the
relay a child process on a free 127.0.0.1 port. Each TUI runs in a shell that
writes its exit status to a file when it ends (tmux 3.3 was seen not to mark a
pane dead for 30 s after its program had exited). Every process is stopped by
its PID and the tmux session killed by its name in ``finally``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tui_helpers import T

from app.launch.demo import Participant, plan_demo, wait_listening
from tests.procs import ROOT, sdschat

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc"),
]

WIDTH, HEIGHT = 80, 30  # the narrow pane issue 15 asks for
FILE_BYTES = 300_000


class Tmux:
    """A tmux server of our own (``-L``): nothing here touches another test's sessions."""

    def __init__(self, session: str, conf: Path) -> None:
        self.session = session
        # windows stay after their program ends (their last screen can be read)
        conf.write_text(f"set -g remain-on-exit on\nset -g default-size {WIDTH}x{HEIGHT}\n")
        self.base = ["tmux", "-u", "-L", session, "-f", str(conf)]

    def run(self, *args: str) -> str:
        out = subprocess.run(
            [*self.base, *args], capture_output=True, text=True, timeout=30, check=True,
            env={**os.environ, "LANG": "C.UTF-8"},
        )  # fmt: skip
        return out.stdout

    def window(self, name: str, argv: list[str], rc: Path) -> int:
        """A window running ``argv`` in a shell that writes its exit status to ``rc``
        (written once the program has ended: tmux is not asked whether a pane is dead);
        the program's pid."""
        cmd = f"cd {shlex.quote(str(ROOT))} && {shlex.join(argv)}; echo $? > {shlex.quote(str(rc))}"
        if not self.has_session():
            self.run("new-session", "-d", "-s", self.session, "-n", name,
                     "-x", str(WIDTH), "-y", str(HEIGHT), cmd)  # fmt: skip
        else:
            self.run("new-window", "-d", "-t", self.session, "-n", name, cmd)
        shell = int(self.run("display-message", "-p", "-t", self.target(name), "#{pane_pid}"))
        children = Path(f"/proc/{shell}/task/{shell}/children")
        deadline = time.monotonic() + T(10)
        while True:  # bounded by the deadline
            with contextlib.suppress(OSError):
                pids = children.read_text().split()
                if pids:
                    return int(pids[0])
            if rc.exists() or time.monotonic() > deadline:
                raise AssertionError(f"{name} did not start:\n{self.capture(name)}")
            time.sleep(0.02)

    def target(self, name: str) -> str:
        return f"={self.session}:{name}"

    def socket(self) -> Path:
        """The server's socket file (tmux leaves it behind)."""
        tmpdir = os.environ.get("TMUX_TMPDIR") or "/tmp"
        return Path(tmpdir) / f"tmux-{os.getuid()}" / self.session

    def has_session(self) -> bool:
        return subprocess.run(
            [*self.base, "has-session", "-t", f"={self.session}"], capture_output=True, timeout=30
        ).returncode == 0

    def capture(self, name: str) -> str:
        return self.run("capture-pane", "-p", "-t", self.target(name))

    def type(self, name: str, line: str) -> None:
        self.run("send-keys", "-t", self.target(name), "-l", line)
        self.run("send-keys", "-t", self.target(name), "Enter")

    def keys(self, name: str, *keys: str) -> None:
        self.run("send-keys", "-t", self.target(name), *keys)

    def kill(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(
                [*self.base, "kill-session", "-t", f"={self.session}"],
                capture_output=True, timeout=30,
            )  # fmt: skip


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie, which ``kill(pid, 0)`` still finds, has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def stop_pid(pid: int) -> None:
    """SIGTERM, then SIGKILL after a bounded wait; a pid already gone is fine."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if not alive(pid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while alive(pid) and time.monotonic() < deadline:  # bounded by the deadline
            time.sleep(0.05)


def poll(cond: Callable[[], bool], base: float, what: str, show: Callable[[], str]) -> None:
    deadline = time.monotonic() + T(base)
    while not cond():  # bounded by the deadline
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{show()}")
        time.sleep(0.1)


_GLYPH = re.compile(r"^(\d\d:\d\d) \S")
_RECOVERED = re.compile(r"\s*↺ recovered( after it was reported lost)?")


def message_area(screen: str) -> list[str]:
    """The message log of a captured TUI screen, without what only this screen shows:
    the state glyph of own messages (◌ ✓ ● …) and the "↺ recovered" marks. Lines
    between the channel bar and the input box, right of the channel list, without the
    blank rows above and below them."""
    out: list[str] = []
    for line in screen.splitlines()[1:]:  # the first line is the channel bar
        if "▕" not in line:
            break  # the status bar
        body = line.split("▕", 1)[1]
        if body.startswith("▊"):
            break  # the input box
        marked = _RECOVERED.search(body) is not None
        body = _RECOVERED.sub("", _GLYPH.sub(r"\1  ", body)).rstrip()
        if marked and body.endswith("│"):
            continue  # the mark had a line of its own (a narrow screen)
        out.append(body)
    while out and not out[-1]:
        out.pop()
    while out and not out[0]:  # the log is bottom-anchored: blank rows above it
        out.pop(0)
    return out


def refused(screen: str) -> bool:
    """The input box shows a refused line's reason (in its bottom border)."""
    return any("✗" in line and "▁" in line for line in screen.splitlines())


def history(data_dir: Path) -> list[dict[str, Any]]:
    """``sdschat history general --json`` without the fields that are local by nature."""
    out = subprocess.run(
        [*sdschat("history", "general", "--data-dir", str(data_dir), "--json")],
        cwd=ROOT, capture_output=True, text=True, timeout=T(60), check=True,
    )  # fmt: skip
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    for row in rows:
        row.pop("position")  # the place in this node's log: arrival order
        row.pop("state")  # delivery state of own messages
        # how the message arrived HERE (late, after a loss, after given-up dependencies)
        for arrival in ("recovered", "was_lost", "missing_before"):
            row.pop(arrival)
    return rows


@contextlib.contextmanager
def relay_process(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)  # fmt: skip
        try:
            yield proc
        finally:
            stop_pid(proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)


def test_reply_reaction_edit_and_a_300kb_file_between_two_tuis_over_a_lossy_relay(
    tmp_path: Path,
) -> None:
    session = f"sdschat-e2e-content-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    plan = plan_demo(
        tmp_path / "demo",
        session=session,
        participants=(Participant("alice"), Participant("bob", drop_rate=0.3, drop_seed=7)),
    )
    photo = tmp_path / "photo.bin"
    photo.write_bytes(random.Random(15).randbytes(FILE_BYTES))
    saved = tmp_path / "saved.bin"
    tmux = Tmux(session, tmp_path / "tmux.conf")
    pids: list[int] = []

    def screens() -> str:
        with contextlib.suppress(subprocess.SubprocessError):
            return "\n".join(f"--- {n}\n{tmux.capture(n)}" for n in ("alice", "bob"))
        return ""

    def on(name: str, text: str) -> Callable[[], bool]:
        return lambda: text in "\n".join(message_area(tmux.capture(name)))

    with relay_process(plan.relay, tmp_path / "relay.log"):
        try:
            assert wait_listening(plan.port, T(30)), "the relay did not start listening"
            for name in ("alice", "bob"):
                pids.append(tmux.window(name, plan.participants[name], tmp_path / f"{name}.rc"))
            for name in ("alice", "bob"):
                poll(lambda n=name: " connected" in tmux.capture(n), 30, f"{name} connected",  # type: ignore[misc]
                     screens)  # fmt: skip

            tmux.type("alice", "hello from alice")
            poll(on("bob", "alice │ hello from alice"), 30, "bob sees the hello", screens)
            tmux.keys("bob", "C-Up")  # select alice's hello
            tmux.type("bob", "/reply hi alice, bob here")
            poll(on("alice", "bob │ hi alice, bob here"), 30, "alice sees the reply", screens)
            assert "┌ alice: hello from alice" in tmux.capture("alice")

            tmux.type("alice", "/react 👍")  # the last message: bob's reply
            tmux.type("alice", "/edit hello from alice, edited")  # her last one
            for name in ("alice", "bob"):
                poll(on(name, "hello from alice, edited  (edited)"), 30, f"{name}: the edit",
                     screens)  # fmt: skip
                poll(on(name, "│ 👍 1"), 30, f"{name}: the reaction", screens)
            tmux.keys("bob", "C-Up", "C-Up")  # his reply, then alice's hello above it
            tmux.type("bob", "/react 🎉")  # sent through bob's lossy link
            for name in ("alice", "bob"):
                poll(on(name, "│ 🎉 1"), 30, f"{name}: bob's reaction", screens)

            tmux.type("alice", f"/send {photo}")
            poll(on("bob", "📎 photo.bin (300000 bytes)"), 30, "bob sees the file", screens)
            # /save is refused (the line stays in the input, the reason under it) until
            # every segment is here: then Enter again, one attempt at a time
            tmux.type("bob", f"/save {saved}")
            deadline = time.monotonic() + T(40)
            while not saved.exists():  # bounded by the deadline
                assert time.monotonic() < deadline, f"bob could not save the file\n{screens()}"
                if refused(tmux.capture("bob")):
                    tmux.keys("bob", "Enter")  # (Enter on an empty input does nothing)
                time.sleep(1)
            assert hashlib.sha256(saved.read_bytes()).digest() == hashlib.sha256(
                photo.read_bytes()
            ).digest()
            assert saved.stat().st_size == FILE_BYTES

            poll(lambda: message_area(tmux.capture("alice")) == message_area(tmux.capture("bob")),
                 40, "both screens showing the same messages", screens)  # fmt: skip
            area = message_area(tmux.capture("bob"))
            joined = "\n".join(area)
            for text in (
                "hello from alice, edited  (edited)",
                "┌ alice: hello from alice, edited",
                "bob │ hi alice, bob here",
                "│ 👍 1",
                "│ 🎉 1",
                "📎 photo.bin (300000 bytes)",
            ):
                assert text in joined, f"{text!r} not on the screens:\n{joined}"

            # the loss was real and repaired: alice's node sent again what bob missed
            tmux.type("alice", "/stats")
            # counters are sorted: once "sent" shows, resent and repair_sent (if any) do
            poll(lambda: " sent: " in tmux.capture("alice"), 20, "alice's stats", screens)
            stats = tmux.capture("alice")
            again = sum(int(n) for n in re.findall(r" (?:resent|repair_sent): (\d+)", stats))
            assert again > 0, stats
            tmux.keys("alice", "Escape")

            for name in ("alice", "bob"):
                tmux.keys(name, "C-q")
            for name in ("alice", "bob"):
                rc = tmp_path / f"{name}.rc"
                poll(lambda r=rc: r.exists() and r.read_text().strip() != "", 30,  # type: ignore[misc]
                     f"{name} quits", screens)  # fmt: skip
                assert rc.read_text().strip() == "0", f"{name}'s exit status\n{screens()}"
            alice_log, bob_log = history(plan.data_dir("alice")), history(plan.data_dir("bob"))
            assert alice_log == bob_log
            assert [(r["kind"], r["content"]) for r in bob_log] == [
                ("msg", "hello from alice, edited"),
                ("reply", "hi alice, bob here"),
                ("file", "file photo.bin (300000 bytes)"),
            ]
            hello, reply, file = bob_log
            assert hello["edited"] and reply["reply_to"]["id"] == hello["id"]
            assert hello["reactions"] == {"🎉": [reply["sender"]]}
            assert reply["reactions"] == {"👍": [hello["sender"]]}
            assert file["file"]["complete"] and file["file"]["intact"]

            # bob starts again: his screen shows what it showed, from his data directory
            pids.append(tmux.window("bob-again", plan.participants["bob"], tmp_path / "again.rc"))
            poll(lambda: message_area(tmux.capture("bob-again")) == area, 30,
                 "bob's screen after a restart", lambda: tmux.capture("bob-again"))  # fmt: skip
            tmux.keys("bob-again", "C-q")
            again = tmp_path / "again.rc"
            poll(lambda: again.exists() and again.read_text().strip() != "", 30,
                 "bob quits again", lambda: tmux.capture("bob-again"))  # fmt: skip
            assert again.read_text().strip() == "0"
        finally:
            for pid in pids:
                stop_pid(pid)
            tmux.kill()
            with contextlib.suppress(OSError):
                tmux.socket().unlink()
    assert not tmux.has_session()

"""Real processes over loopback: a relay and headless nodes, started and always killed by PID.

Every wait is bounded by :func:`T` (base seconds times ``SDSCHAT_TEST_TIMEOUT_SCALE``).
Everything binds or connects to 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_SCALE = float(os.environ.get("SDSCHAT_TEST_TIMEOUT_SCALE", "1"))


def T(base: float) -> float:
    """``base`` seconds times the test timeout scale factor."""
    return base * TIMEOUT_SCALE


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proc:
    """A child process whose stdout JSON lines are collected by a reader thread."""

    def __init__(self, argv: list[str], name: str, log_dir: Path, *, stdin: bool = True) -> None:
        self.name = name
        self.argv = argv
        self.stderr_path = log_dir / f"{name}.{time.monotonic_ns()}.stderr"
        self._stderr = self.stderr_path.open("wb")
        self.popen = subprocess.Popen(
            argv,
            cwd=ROOT,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.pid = self.popen.pid
        self.events: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        out = self.popen.stdout
        assert out is not None
        for raw in out:  # ends at EOF (process exit)
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            with self._cond:
                self.raw.append(line)
                with contextlib.suppress(ValueError):
                    obj = json.loads(line)
                    if isinstance(obj, dict):
                        self.events.append(obj)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    # ---- input

    def send(self, *lines: str) -> None:
        stdin = self.popen.stdin
        assert stdin is not None
        stdin.write("".join(line + "\n" for line in lines).encode())
        stdin.flush()

    def close_stdin(self) -> None:
        stdin = self.popen.stdin
        if stdin is not None and not stdin.closed:
            with contextlib.suppress(BrokenPipeError, OSError):
                stdin.close()

    # ---- output

    def snapshot(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self.events)

    def select(self, event: str, **match: Any) -> list[dict[str, Any]]:
        return [
            e
            for e in self.snapshot()
            if e.get("event") == event and all(e.get(k) == v for k, v in match.items())
        ]

    def wait_for(self, cond: Callable[[], bool], base_timeout: float, what: str) -> None:
        """Wait (bounded) until ``cond()`` holds; re-checked on every output line."""
        deadline = time.monotonic() + T(base_timeout)
        with self._cond:
            while not cond():  # bounded by the deadline
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{self.name}: timed out waiting for {what}\n{self.tail()}"
                    )
                self._cond.wait(min(left, 0.2))

    def tail(self, n: int = 15) -> str:
        err = self.stderr_path.read_text(errors="replace")[-3000:]
        return "stdout tail:\n" + "\n".join(self.raw[-n:]) + "\nstderr tail:\n" + err

    # ---- lifetime

    def wait(self, base_timeout: float) -> int:
        try:
            rc = self.popen.wait(T(base_timeout))
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} did not exit\n{self.tail()}") from None
        self._reader.join(T(5))
        return rc

    def kill9(self) -> None:
        """SIGKILL by PID (no cleanup in the child at all)."""
        if self.popen.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(T(10))
        self._reader.join(T(5))

    def stop(self) -> None:
        """Kill (by PID) if still running; release pipes and files."""
        self.kill9()
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._stderr.close()

    def rss_kib(self) -> int:
        """Resident memory of the child, from /proc."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")


class Cluster:
    """Starts processes, remembers them, and kills every one by PID in :meth:`close`."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[Proc] = []
        (tmp / "logs").mkdir(exist_ok=True)

    def start(self, argv: list[str], name: str, *, stdin: bool = True) -> Proc:
        p = Proc(argv, name, self.tmp / "logs", stdin=stdin)
        self.procs.append(p)
        return p

    def relay(self, port: int | None = None, name: str = "relay") -> tuple[Proc, str]:
        """Start ``sdschat relay`` on 127.0.0.1; returns it and its URL once it listens."""
        argv = [
            sys.executable,
            "-m",
            "app.cli",
            "relay",
            "--host",
            "127.0.0.1",
            "--port",
            str(port or 0),
            "--stats-interval",
            "0",
            "--rate",
            "2000",
            "--burst",
            "4000",
        ]
        p = self.start(argv, name, stdin=False)
        deadline = time.monotonic() + T(15)
        while time.monotonic() < deadline:  # bounded
            text = p.stderr_path.read_text(errors="replace")
            for line in text.splitlines():
                with contextlib.suppress(ValueError):
                    rec = json.loads(line)
                    if rec.get("event") == "relay_listening":
                        return p, f"ws://127.0.0.1:{int(rec['port'])}"
            if p.popen.poll() is not None:
                raise AssertionError(f"relay exited: {text}")
            time.sleep(0.02)
        raise AssertionError("relay did not report its port")

    def node(
        self,
        name: str,
        url: str,
        *,
        channel: str = "room",
        data_dir: Path | None = None,
        extra: list[str] | None = None,
        label: str | None = None,
    ) -> Proc:
        """Start a headless node with fast timings; its data dir defaults to tmp/<name>."""
        d = data_dir or self.tmp / name
        argv = [
            sys.executable,
            "-m",
            "app.cli",
            "join",
            channel,
            "--relay",
            url,
            "--data-dir",
            str(d),
            "--name",
            name,
            "--headless",
            "--fast",
            *(extra or []),
        ]
        return self.start(argv, label or name)

    def close(self) -> None:
        for p in self.procs:
            p.stop()


@contextlib.contextmanager
def cluster(tmp: Path) -> Iterator[Cluster]:
    c = Cluster(tmp)
    try:
        yield c
    finally:
        c.close()


def history(data_dir: Path, channel: str = "room") -> list[dict[str, Any]]:
    """``sdschat history --json`` of a data dir."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "history",
            channel,
            "--data-dir",
            str(data_dir),
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        timeout=T(30),
        check=True,
    )
    return [json.loads(line) for line in out.stdout.decode().splitlines() if line.strip()]


def comparable(hist: list[dict[str, Any]]) -> list[tuple[str, str, int, str]]:
    """What must be identical across participants: id, sender, lamport, content, in order."""
    return [(h["id"], h["sender"], h["lamport"], h["content"]) for h in hist]


def log_count(p: Proc) -> int:
    """Messages in the node's log according to its events (own logged + delivered)."""
    return len(p.select("own", state="logged")) + len(p.select("delivered"))


def write_lines_paced(p: Proc, lines: list[str], per_second: float) -> None:
    """Type ``lines`` into ``p`` at about ``per_second``."""
    gap = 1.0 / per_second
    for line in lines:
        p.send(line)
        time.sleep(gap)


def stdin_of(p: Proc) -> IO[bytes]:
    assert p.popen.stdin is not None
    return p.popen.stdin

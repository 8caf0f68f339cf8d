"""Real sdschat processes over loopback for the process-level tests (e2e, store, LAN).

A :class:`Cluster` starts relays, store peers and headless nodes as child
processes, collects their stdout JSON lines and stderr JSON logs, and kills
every one of them by PID in :meth:`Cluster.close`. Every wait is bounded by
:func:`T` (base seconds times ``SDSCHAT_TEST_TIMEOUT_SCALE``). Everything binds
or connects to 127.0.0.1 only.
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
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_SCALE = float(os.environ.get("SDSCHAT_TEST_TIMEOUT_SCALE", "1"))

STARTUP_S = 90.0
"""Until a process has printed its first line, a wait on it lasts at least this long
from its start (scaled): an interpreter importing the app on a loaded machine (load
11, the Python loop 10x slower than quiet) printed nothing for 20 s, and that is not
the feature under test failing."""


def T(base: float) -> float:
    """``base`` seconds times the test timeout scale factor."""
    return base * TIMEOUT_SCALE


def load_bench(name: str) -> ModuleType:
    """``bench/NAME.py`` as the module ``NAME`` (the benchmarks are scripts, not a package)."""
    import importlib.util

    bench = str(ROOT / "bench")
    if bench not in sys.path:  # as when run as a script: its sibling modules (machine, ...)
        sys.path.insert(0, bench)
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


_GIVEN: set[int] = set()
_GIVEN_LOCK = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now, and never one this process handed out before.

    The port is released before its user binds it, so two calls in a row can be given
    the same port by the kernel (CI: docs/cluster.md's NATS server and relay were both
    given 54351 and the relay could not listen); a port already handed out is skipped.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with _GIVEN_LOCK:
        for _ in range(1000):
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((host, 0))
                port = int(s.getsockname()[1])
            if port not in _GIVEN:
                _GIVEN.add(port)
                return port
    raise RuntimeError(f"no unused free port on {host} in 1000 tries")


def sdschat(*args: str) -> list[str]:
    """argv of ``sdschat ARGS`` run from the source tree with this interpreter."""
    return [sys.executable, "-m", "app.cli", *args]


class Proc:
    """A child process; stdout JSON lines and stderr JSON log lines are collected."""

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
        self.started = time.monotonic()
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

    def log_records(self) -> list[dict[str, Any]]:
        """The JSON log lines written on stderr so far."""
        out = []
        for line in self.stderr_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if isinstance(rec, dict):
                    out.append(rec)
        return out

    def _deadline(self, base_timeout: float) -> float:
        """``base_timeout`` (scaled) from now, or while the process is running and has
        printed nothing yet, at least :data:`STARTUP_S` from its start."""
        deadline = time.monotonic() + T(base_timeout)
        if not self.raw and self.popen.poll() is None and self.stderr_path.stat().st_size == 0:
            deadline = max(deadline, self.started + T(STARTUP_S))
        return deadline

    def wait_log(self, event: str, base_timeout: float = 15.0) -> dict[str, Any]:
        """The first stderr log record named ``event`` (bounded wait)."""
        deadline = self._deadline(base_timeout)
        while time.monotonic() < deadline:  # bounded
            for rec in self.log_records():
                if rec.get("event") == event:
                    return rec
            if self.popen.poll() is not None:
                raise AssertionError(f"{self.name} exited before {event}\n{self.tail()}")
            time.sleep(0.02)
        raise AssertionError(f"{self.name}: no {event} log line\n{self.tail()}")

    def wait_for(self, cond: Callable[[], bool], base_timeout: float, what: str) -> None:
        """Wait (bounded) until ``cond()`` holds; re-checked on every output line."""
        deadline = self._deadline(base_timeout)
        with self._cond:
            while not cond():  # bounded by the deadline
                left = deadline - time.monotonic()
                if left <= 0:
                    deadline = self._deadline(0)  # still starting: its start is the bound
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

    def signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            os.kill(self.pid, sig)

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

    def relay(self, port: int | None = None, *, name: str = "relay") -> tuple[Proc, str]:
        """``sdschat relay`` on 127.0.0.1 (``port`` or any; generous rate); returns it and
        its URL once it listens."""
        argv = sdschat(
            "relay", "--host", "127.0.0.1", "--port", str(port or 0), "--stats-interval", "0",
            "--rate", "5000", "--burst", "10000", "--queue", "4096",
        )
        p = self.start(argv, name, stdin=False)
        rec = p.wait_log("relay_listening")
        return p, f"ws://127.0.0.1:{int(rec['port'])}"

    def store(
        self,
        relay_url: str | None,
        data_dir: Path,
        *,
        topics: tuple[bytes, ...] = (),
        channels: tuple[str, ...] = (),
        port: int = 0,
        extra: list[str] | None = None,
        name: str = "store",
    ) -> tuple[Proc, str]:
        """``sdschat store`` listening on 127.0.0.1; returns it and its query URL."""
        argv = sdschat("store", "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{port}",
                       "--stats-interval", "0")
        if relay_url is not None:
            argv += ["--relay", relay_url]
        for t in topics:
            argv += ["--topic", t.hex()]
        for c in channels:
            argv += ["--channel", c]
        argv += extra or []
        p = self.start(argv, name, stdin=False)
        rec = p.wait_log("store_listening", 30)
        return p, f"ws://127.0.0.1:{int(rec['port'])}"

    def headless(
        self,
        name: str,
        data_dir: Path,
        *,
        channel: str = "room",
        relay: str | None = None,
        extra: list[str] | None = None,
        label: str | None = None,
    ) -> Proc:
        """``sdschat join CHANNEL --headless --fast`` (relay, or LAN gossip without one)."""
        argv = sdschat("join", channel, "--data-dir", str(data_dir), "--name", name,
                       "--headless", "--fast")
        if relay is not None:
            argv += ["--relay", relay]
        argv += extra or []
        return self.start(argv, label or name)

    def close(self) -> None:
        for p in self.procs:
            p.stop()


def history(data_dir: Path, channel: str = "room") -> list[dict[str, Any]]:
    """``sdschat history --json`` of a data dir (works beside a running node)."""
    out = subprocess.run(
        sdschat("history", channel, "--data-dir", str(data_dir), "--json"),
        cwd=ROOT, capture_output=True, timeout=T(60), check=True,
    )
    return [json.loads(line) for line in out.stdout.decode().splitlines() if line.strip()]


def comparable(hist: list[dict[str, Any]]) -> list[tuple[str, str, int, str]]:
    """What must be identical across participants: id, sender, lamport, content, in order."""
    return [(h["id"], h["sender"], h["lamport"], h["content"]) for h in hist]


@contextlib.contextmanager
def running(cluster: Cluster) -> Iterator[Cluster]:
    """``with running(Cluster(tmp)) as c``: every process killed by PID on the way out."""
    try:
        yield cluster
    finally:
        cluster.close()


class Tap:
    """A relay client recording every envelope of a topic (a thread reads them all):
    what a relay, which records everything, would hold."""

    def __init__(self, ws: Any, topic: bytes) -> None:
        from net.relay_frames import encode_subscribe

        self.captured: list[bytes] = []
        self._lock = threading.Lock()
        self._ws = ws
        self._ws.send(encode_subscribe([topic]))
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        from net.relay_frames import decode_frame

        with contextlib.suppress(Exception):  # ends when the connection closes
            for raw in self._ws:
                frame = decode_frame(bytes(raw))
                if frame.WhichOneof("body") == "deliver":
                    with self._lock:
                        self.captured.append(bytes(frame.deliver.envelope))

    def since(self, mark: int) -> list[bytes]:
        with self._lock:
            return list(self.captured[mark:])

    def count(self) -> int:
        with self._lock:
            return len(self.captured)

    def close(self) -> None:
        self._ws.close()
        self._thread.join(T(10))


@contextlib.contextmanager
def tap(url: str, topic: bytes) -> Iterator[Tap]:
    """A :class:`Tap` on ``topic`` at the relay ``url`` (closed at the end)."""
    from websockets.sync.client import connect

    with connect(url, max_size=None, proxy=None, ping_interval=None, max_queue=None) as ws:
        t = Tap(ws, topic)
        try:
            yield t
        finally:
            t.close()

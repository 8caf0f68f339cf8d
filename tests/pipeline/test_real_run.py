"""The report on the exported event logs of a real 3-node relay run.

A real ``sdschat relay`` and three headless ``sdschat join`` processes on
127.0.0.1 (fast timings) exchange 15 messages; their data directories are
exported with ``sdschat export`` and reported on with Spark. Every process
is started here and stopped by its PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from pipeline_helpers import channel, report

from storage.export import export_data_dirs

ROOT = Path(__file__).resolve().parents[2]
SCALE = float(os.environ.get("SDSCHAT_TEST_TIMEOUT_SCALE", "1"))
NAMES = ("ann", "ben", "cat")
PER_NODE = 5


class _Node:
    def __init__(self, argv: list[str], log: Path) -> None:
        self.err = log.open("wb")
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            with contextlib.suppress(ValueError):
                ev = json.loads(line)
                with self.lock:
                    self.events.append(ev)

    def count(self, name: str, **match: Any) -> int:
        with self.lock:
            return sum(
                1 for e in self.events
                if e.get("event") == name and all(e.get(k) == v for k, v in match.items())
            )

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20 * SCALE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.err.close()


def _wait(cond: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds * SCALE
    while not cond():  # bounded by the deadline
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _relay(log: Path) -> tuple[subprocess.Popen[bytes], str]:
    err = log.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "relay", "--host", "127.0.0.1", "--port", "0",
         "--stats-interval", "0"],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
    )
    port: list[int] = []

    def listening() -> bool:
        for line in log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if rec.get("event") == "relay_listening":
                    port.append(int(rec["port"]))
                    return True
        assert proc.poll() is None, log.read_text()
        return False

    _wait(listening, 15, "the relay to listen")
    return proc, f"ws://127.0.0.1:{port[0]}"


def test_report_on_a_real_three_node_relay_run(spark: Any, tmp_path: Path) -> None:
    relay, url = _relay(tmp_path / "relay.log")
    nodes: list[_Node] = []
    try:
        for name in NAMES:
            nodes.append(_Node(
                [sys.executable, "-m", "app.cli", "join", "room", "--relay", url,
                 "--data-dir", str(tmp_path / name), "--name", name, "--headless", "--fast"],
                tmp_path / f"{name}.log",
            ))
        for n in nodes:
            _wait(lambda n=n: n.count("connection", state="connected") > 0, 30, "connected")
        for i in range(PER_NODE):
            for name, n in zip(NAMES, nodes, strict=True):
                n.send(f"{name} says {i}")
            time.sleep(0.05)
        others = PER_NODE * (len(NAMES) - 1)
        for n in nodes:
            _wait(lambda n=n: n.count("delivered") >= others, 60, "every message delivered")
        time.sleep(1.0)  # a moment for syncs/acks to be logged
    finally:
        for n in nodes:
            n.close()
        relay.send_signal(signal.SIGTERM)
        try:
            relay.wait(timeout=10)
        except subprocess.TimeoutExpired:
            relay.kill()
            relay.wait(timeout=10)
    assert all(n.proc.returncode == 0 for n in nodes)

    export_data_dirs([tmp_path / n for n in NAMES], tmp_path / "export", run="relay")
    summary = report(spark, [tmp_path / "export"], tmp_path / "report")
    c = channel(summary, "room")
    assert c["source"] == "node"
    assert c["participants"] == 3 and c["messages"] == PER_NODE * 3
    assert c["convergence"]["converged"], c["convergence"]["missing"]
    assert c["causal_order"]["ok"] and c["causal_order"]["unverifiable"] == 0
    assert c["counts"]["deliveries"] == PER_NODE * 3 * 2
    assert c["latency_ms"]["count"] == PER_NODE * 3 * 2
    assert 0 <= c["latency_ms"]["p50"] < 10_000
    # participants by the names their nodes had (export.json), not 32-character ids
    people = c["explain"]["participants"]
    assert sorted(p["name"] for p in people.values()) == sorted(NAMES)
    html = (tmp_path / "report" / "report.html").read_text()
    for name, (node_id, _) in zip(sorted(NAMES), sorted(
            people.items(), key=lambda kv: kv[1]["name"]), strict=True):
        # the name, the full id on hover
        assert f'<td><span title="{node_id}">{name}</span></td>' in html
    for section in ("<h3>Participants</h3>", "<h3>Timeline</h3>", "<h3>Duplicate deliveries</h3>"):
        assert section in html
    # sizes real nodes did not log are said unknown, not 0 bytes
    ov = c["overhead"]
    if ov.get("sync_messages") and ov.get("sync_sizes_unknown") == ov["sync_messages"]:
        assert "unknown (sizes not logged)" in html

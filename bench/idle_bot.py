"""A bot in an empty channel: what piping lines into a headless node costs when nobody listens.

Issue 41 item 8: 5,000 lines piped into ``sdschat join --headless`` with nobody else
online took 5 min 35 s and 45,000 resends, and a restart republished 1,004
envelopes to send 3 lines. This benchmark runs that scenario with real processes on
127.0.0.1 (a ``sdschat relay``, one headless node with the default protocol timings:
30 s resends), for this tree and for a baseline revision (``--baseline``, default
``49fcdad``, main before the resends backed off; extracted with ``git archive`` into
a temporary directory and run from there), side by side in one run:

1. **feed**: ``--lines`` lines written to the node's stdin as fast as it reads them;
   ``sent_s`` is the time until every line left (an own ``sent`` event each; the
   node reads stdin only while its outgoing buffer has room), and ``resent`` the
   resends the node counted by then
   (``/stats``); then stdin closes and ``exit_s``/``exit`` are the time until the
   node exited and its status;
2. **restart**: the same data directory started again, 3 lines typed; ``republished``
   is the node's count of envelopes republished at its start (``/stats``, once the 3
   lines left), ``restart_resent`` its resends by then.

Nobody else ever joins, so the figures are what a lone bot pays. Every child is
stopped by its PID; nothing listens beyond 127.0.0.1::

    .venv/bin/python bench/idle_bot.py                    # 5,000 lines, both trees
    .venv/bin/python bench/idle_bot.py --lines 1000 --baseline main
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from machine import calibrate, describe  # noqa: E402

#: the trees a node needs to run (``python -m app.cli`` from the extracted directory)
TREES = ("app", "net", "sds", "storage", "pipeline")
WAIT_S = 900.0
"""Longest wait for one step (the baseline's feed took 5 min 35 s in the issue)."""


class Child:
    """A child process with its stdout JSON lines collected by a thread."""

    def __init__(self, argv: list[str], cwd: Path, *, stdin: bool) -> None:
        self.popen = subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.stderr: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, args=(self.popen.stdout, self.lines),
                         daemon=True).start()
        threading.Thread(target=self._read, args=(self.popen.stderr, self.stderr),
                         daemon=True).start()

    @staticmethod
    def _read(stream: Any, into: queue.Queue[dict[str, Any]]) -> None:
        for raw in stream:
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if isinstance(rec, dict):
                into.put(rec)

    def wait_for(self, cond: Any, what: str, source: str = "stdout") -> dict[str, Any]:
        """The first record (of stdout, or of the stderr log) for which ``cond`` holds."""
        into = self.lines if source == "stdout" else self.stderr
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                rec = into.get(timeout=min(5.0, max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                if self.popen.poll() is not None:
                    code = self.popen.returncode
                    raise RuntimeError(f"exited {code} waiting for {what}") from None
                continue
            if source == "stdout":
                self.seen.append(rec)
            if cond(rec):
                return rec
        raise TimeoutError(what)

    def send(self, line: str) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(line.encode() + b"\n")
        self.popen.stdin.flush()

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()  # by its PID (Popen), never by name
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(30)


def _sdschat(*args: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", *args]


def _stats(node: Child) -> dict[str, int]:
    node.send("/stats")
    rec = node.wait_for(lambda r: r.get("event") == "info" and r.get("text") == "stats",
                        "/stats")  # fmt: skip
    return dict(rec["data"]["counters"])


def _own_sent(rec: dict[str, Any]) -> bool:
    return rec.get("event") == "own" and rec.get("state") == "sent"


def _node(tree: Path, data: Path, url: str, secret: Path) -> Child:
    return Child(_sdschat("join", "room", "--data-dir", str(data), "--name", "bot",
                          "--headless", "--relay", url, "--passphrase-file", str(secret),
                          "--no-config"), tree, stdin=True)  # fmt: skip


def measure(tree: Path, lines: int, tmp: Path) -> dict[str, Any]:
    """The scenario of the module docstring with the code of ``tree``."""
    secret = tmp / "passphrase"
    secret.write_text("correct horse\n")
    relay = Child(_sdschat("relay", "--host", "127.0.0.1", "--port", "0",
                           "--stats-interval", "0", "--rate", "5000", "--burst", "10000"),
                  ROOT, stdin=False)  # fmt: skip
    children = [relay]
    try:
        rec = relay.wait_for(lambda r: r.get("event") == "relay_listening", "relay", "stderr")
        url = f"ws://127.0.0.1:{int(rec['port'])}"
        node = _node(tree, tmp / "bot", url, secret)
        children.append(node)
        node.wait_for(lambda r: r.get("event") == "channel", "joined")
        t0 = time.monotonic()

        def feed() -> None:
            for i in range(lines):
                node.send(f"bot line {i}")

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        sent = 0
        while sent < lines:
            node.wait_for(_own_sent, f"line {sent + 1} sent")
            sent += 1
        sent_s = time.monotonic() - t0
        writer.join(WAIT_S)
        resent = _stats(node).get("resent", 0)
        assert node.popen.stdin is not None
        node.popen.stdin.close()
        code = node.popen.wait(WAIT_S)
        exit_s = time.monotonic() - t0
        restarted = _node(tree, tmp / "bot", url, secret)
        children.append(restarted)
        restarted.wait_for(lambda r: r.get("event") == "channel", "joined again")
        for i in range(3):
            restarted.send(f"after the restart {i}")
        typed = 0
        while typed < 3:
            rec = restarted.wait_for(_own_sent, "the 3 lines sent")
            typed += 1
        counters = _stats(restarted)
        return {
            "lines": lines, "sent_s": round(sent_s, 1), "resent": resent,
            "exit_s": round(exit_s, 1),
            "exit": code, "republished": counters.get("republished", 0),
            "restart_resent": counters.get("resent", 0),
        }
    finally:
        for child in reversed(children):
            child.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=5_000)
    parser.add_argument("--baseline", default="49fcdad",
                        help="revision to compare with (git archive; default 49fcdad)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="idle-bot-") as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline, *TREES],
                                 capture_output=True, check=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        for label, tree in ((args.baseline, base), ("this tree", ROOT)):
            run_dir = Path(tmp) / label.replace(" ", "-")
            run_dir.mkdir()
            results[label] = measure(tree, args.lines, run_dir)
    if args.json:
        print(json.dumps(results))
        return 0
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"a bot alone in its channel, {args.lines} lines, then a restart and 3 lines; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load}")
    print(describe(calibrate()))
    cols = ("sent_s", "resent", "exit_s", "exit", "republished", "restart_resent")
    print(f"{'':<12}" + "".join(f"{c:>16}" for c in cols))
    for label, row in results.items():
        print(f"{label:<12}" + "".join(f"{row[c]!s:>16}" for c in cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

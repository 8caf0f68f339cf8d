"""How long one ``sdschat report`` command takes on a small input: a new local JVM
every time, against a Spark Connect server that stays up.

A report's Spark work on 100k events is a few seconds once the JVM has compiled
its code; a fresh ``--master local[2]`` command pays the session start and that
compilation every time. This benchmark starts one Spark Connect server
(``sdschat report-server --master local[2]``, on 127.0.0.1; stopped by PID at the
end), generates the synthetic logs of ``bench/pipeline_report.py`` and
alternates the two commands, ``--repeat`` times each, timing each command from
process start to exit (the report written):

    sdschat report DATA --out OUT --master local[2]
    sdschat report DATA --out OUT --remote sc://127.0.0.1:PORT

The summaries must be identical (checked). The first Connect report pays the
server's compilation once; the ones after it are what a team's long-lived report
server gives.

    .venv/bin/python bench/report_latency.py --rows 100000 --repeat 3

Figures: docs/report.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from app.launch.demo import free_port  # noqa: E402


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.pop("SPARK_REMOTE", None)
    return env


def start_connect(log: Path, driver_memory: str,
                  conf: list[str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """``sdschat report-server`` on local[2] (``conf``: its KEY=VALUE settings);
    returns (process, sc:// address)."""
    port = free_port()
    fh = log.open("wb")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "sdschat"), "report-server", "--master", "local[2]",
         "--port", str(port), "--driver-memory", driver_memory,
         *[arg for kv in conf or [] for arg in ("--conf", kv)]],
        cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"sc://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"Spark Connect server did not start:\n{log.read_text()[-2000:]}")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server started by :func:`start_connect` (its own process group), by PID."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def run_report(data: Path, out: Path, target: list[str], timeout: float) -> tuple[float, dict]:
    shutil.rmtree(out, ignore_errors=True)
    env = _env()
    t = time.monotonic()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "sdschat"), "report", str(data),
         "--out", str(out), *target],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    took = time.monotonic() - t
    if done.returncode != 0:
        raise RuntimeError(f"report {' '.join(target)} exited {done.returncode}: "
                           f"{done.stderr.strip()[-500:]}")
    summary = json.loads((out / "summary.json").read_text())
    return took, summary


def comparable(summary: dict) -> str:
    """The summary without what differs between runs (paths, times, the engine)."""
    return json.dumps(summary.get("channels"), sort_keys=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--participants", type=int, default=1000)
    ap.add_argument("--history", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--timeout", type=float, default=600, help="per report command")
    args = ap.parse_args()

    from machine import describe
    from pipeline_report import generate

    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  {describe()}  "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    base = Path(tempfile.mkdtemp(prefix="sdschat-latency-"))
    server: subprocess.Popen[bytes] | None = None
    try:
        data = base / "events"
        n = generate(data, args.rows, args.participants, args.history)
        t = time.monotonic()
        server, remote = start_connect(base / "connect.log", args.driver_memory)
        print(f"{n:,} rows; Spark Connect server up in {time.monotonic() - t:.1f}s "
              f"({remote})", flush=True)
        seen: set[str] = set()
        for i in range(1, args.repeat + 1):
            for name, target in (
                ("local[2], new JVM", ["--master", "local[2]", "--driver-memory",
                                       args.driver_memory]),
                ("Spark Connect", ["--remote", remote]),
            ):
                took, summary = run_report(data, base / "out", target, args.timeout)
                seen.add(comparable(summary))
                print(f"  #{i} {name:<18} {took:6.1f}s  (load {os.getloadavg()[0]:.1f})",
                      flush=True)
        print(f"summaries {'identical' if len(seen) == 1 else 'DIFFER'}", flush=True)
        return 0 if len(seen) == 1 else 1
    finally:
        if server is not None:
            stop_server(server)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

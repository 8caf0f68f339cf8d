"""A report server that stays up: its memory and report time over many reports.

Starts ``sdschat report-server --master local[2]`` (127.0.0.1, stopped by PID at
the end), generates the synthetic logs of ``bench/pipeline_report.py`` and runs
``sdschat report DATA --out OUT --remote sc://...`` ``--reports`` times in a row
(bounded: each command has a timeout, and the whole run stops after
``--max-minutes``). After each report it reads the server JVM's resident memory
(VmRSS, /proc); every ``--every``-th report it also has the JVM collect its
garbage (``jcmd PID GC.run``, when the JDK's jcmd is installed) and reads the heap
still in use (``GC.heap_info``): the live data. RSS grows towards the heap's
maximum as the JVM sizes its heap; live data that keeps growing from report to
report would be a leak (for example checkpointed tables never released). The
summaries must be identical (checked).

    .venv/bin/python bench/report_server_memory.py --rows 100000 --reports 100

Figures: docs/report.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_latency import comparable, run_report, start_connect, stop_server


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MB (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def live_heap_mb(pid: int) -> float | None:
    """Heap in use right after a full collection (None without jcmd)."""
    import re

    jcmd = shutil.which("jcmd")
    if jcmd is None:
        return None
    subprocess.run([jcmd, str(pid), "GC.run"], capture_output=True, timeout=60, check=True)
    info = subprocess.run([jcmd, str(pid), "GC.heap_info"], capture_output=True, text=True,
                          timeout=60, check=True).stdout
    found = re.search(r"total \d+K, used (\d+)K", info)
    return None if found is None else int(found.group(1)) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--participants", type=int, default=1000)
    ap.add_argument("--history", type=int, default=50)
    ap.add_argument("--reports", type=int, default=100)
    ap.add_argument("--every", type=int, default=10, help="print every N-th report")
    ap.add_argument("--driver-memory", default="2g")
    ap.add_argument("--server-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting of the report server (repeatable)")
    ap.add_argument("--timeout", type=float, default=300, help="per report command")
    ap.add_argument("--max-minutes", type=float, default=30, help="stop after this long")
    args = ap.parse_args()

    from machine import describe
    from pipeline_report import generate

    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  {describe()}  "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    base = Path(tempfile.mkdtemp(prefix="sdschat-server-memory-"))
    server: subprocess.Popen[bytes] | None = None
    try:
        data = base / "events"
        n = generate(data, args.rows, args.participants, args.history)
        server, remote = start_connect(base / "server.log", args.driver_memory,
                                       args.server_conf)
        extra = "".join(f" --conf {kv}" for kv in args.server_conf)
        print(f"{n:,} rows; sdschat report-server --driver-memory {args.driver_memory}{extra} "
              f"({remote}); server RSS at start {rss_mb(server.pid):,.0f} MB", flush=True)
        seen: set[str] = set()
        times: list[float] = []
        rss: list[float] = []
        live: list[float] = []
        deadline = time.monotonic() + args.max_minutes * 60
        for i in range(1, args.reports + 1):
            if time.monotonic() > deadline:
                print(f"stopped after {i - 1} reports: --max-minutes {args.max_minutes}")
                break
            took, summary = run_report(data, base / "out", ["--remote", remote], args.timeout)
            seen.add(comparable(summary))
            times.append(took)
            rss.append(rss_mb(server.pid))
            if i == 1 or i % args.every == 0:
                last = times[-args.every:]
                heap = live_heap_mb(server.pid)
                if heap is not None:
                    live.append(heap)
                print(f"  report {i:4d}: {took:5.1f}s (last {len(last)}: "
                      f"{min(last):.1f}-{max(last):.1f}s)  server RSS {rss[-1]:7,.0f} MB  "
                      f"live heap {'n/a' if heap is None else f'{heap:6,.0f} MB'}", flush=True)
        if rss:
            half = len(rss) // 2
            print(f"{len(rss)} reports; server RSS first {rss[0]:,.0f} MB, max "
                  f"{max(rss):,.0f} MB, last {rss[-1]:,.0f} MB; median of the second half "
                  f"{sorted(rss[half:])[len(rss[half:]) // 2]:,.0f} MB", flush=True)
        if live:
            print("live heap after each printed report (MB): "
                  + " ".join(f"{x:,.0f}" for x in live), flush=True)
        print(f"summaries {'identical' if len(seen) == 1 else 'DIFFER'}", flush=True)
        return 0 if len(seen) == 1 else 1
    finally:
        if server is not None:
            stop_server(server)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""SDS-R timing study: js-waku's fixed 30-120 s windows, fixed 1-5 s windows, and
windows stretched by the participants heard (``sds.Config()``'s default).

Runs the real core in ``sdschat sim`` (links with bandwidth, as the profile study)
for each scenario x timing, one seed per cell unless ``--seeds``, and prints one
table: convergence, lost, delivery latency p50/p99, acknowledgement p99, bytes on
the wire per content message, repair requests and rebroadcasts per content message.

::

    .venv/bin/python bench/repair_timings.py                 # n = 10 and 100 (~10 min)
    .venv/bin/python bench/repair_timings.py --grid full     # also n = 1,000
    .venv/bin/python bench/repair_timings.py --grid ci       # seconds

Everything is bounded: fixed message counts, and ``--budget`` seconds of wall time
stops starting new cells (listed as skipped).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _p in (str(ROOT), str(ROOT / "bench")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from machine import calibrate, describe  # noqa: E402
from profile_study import Profile, Scenario, cell_metrics, sim_spec  # noqa: E402

from app.sim.simulation import run_sim  # noqa: E402

#: The timings compared (default sizes for all three).
TIMINGS: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("js-waku 30-120 s", protocol=(
            ("repair_t_min_ms", 30_000), ("repair_t_max_ms", 120_000),
            ("repair_window_participants", None))),
        Profile("fixed 1-5 s", protocol=(
            ("repair_t_min_ms", 1_000), ("repair_t_max_ms", 5_000),
            ("repair_window_participants", None))),
        Profile("scaled 1-5 s (default)"),
    )
}


def grid(name: str) -> list[Scenario]:
    if name == "ci":
        return [Scenario("n6-r5-loss0.3", 6, 40, 5.0, 0.3)]
    cells = [
        Scenario("n10-r2-loss0.1", 10, 300, 2.0, 0.1),
        Scenario("n10-r10-loss0.3", 10, 300, 10.0, 0.3),
        Scenario("n100-r10-loss0.1", 100, 200, 10.0, 0.1),
        Scenario("n100-r1-loss0.3", 100, 100, 1.0, 0.3),
    ]
    if name == "full":
        cells.append(Scenario("n1000-r1-loss0.1", 1_000, 60, 1.0, 0.1))
    return cells


def _fmt_s(ms: Any) -> str:
    return "-" if ms is None else f"{ms / 1000:,.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", choices=("ci", "quick", "full"), default="quick")
    ap.add_argument("--seeds", default="3")
    ap.add_argument("--budget", type=float, default=1_800.0)
    ap.add_argument("--json", default=None, help="write every cell's figures here")
    opts = ap.parse_args(argv)
    seeds = tuple(int(s) for s in opts.seeds.split(","))
    cal = calibrate()
    print(f"calibration: {describe(cal)}", flush=True)
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="sdschat-repair-timings-"))
    try:
        for sc in grid(opts.grid):
            for pname, pr in TIMINGS.items():
                for seed in seeds:
                    cell = f"{sc.name}/{pname}/{seed}"
                    if time.monotonic() - started > opts.budget:
                        skipped.append(cell)
                        continue
                    d = tmp / f"{sc.name}-{len(rows)}"
                    run_sim(sim_spec(sc, pr, seed, (1.0, 20.0)), d, force=True)
                    row = {"scenario": sc.name, "timings": pname, "seed": seed,
                           **cell_metrics(d)}
                    rows.append(row)
                    shutil.rmtree(d, ignore_errors=True)
                    print(f"{cell:44} converged {row['converged']!s:5} lost "
                          f"{row['lost_messages']:3}  delivery p50/p99 "
                          f"{_fmt_s(row['latency_p50_ms'])}/{_fmt_s(row['latency_p99_ms'])} s  "
                          f"bytes/msg {row['bytes_per_message']:,.0f}  "
                          f"wall {row['sim_wall_s']:.0f} s", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("| scenario | SDS-R timings | converged | lost | delivery p50 / p99 (s) | ack p99 (s) "
          "| bytes/msg | repair requests / rebroadcasts per msg |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        m = r["messages"]
        print(f"| {r['scenario']} | {r['timings']} | {'yes' if r['converged'] else 'NO'} "
              f"| {r['lost_messages']} | {_fmt_s(r['latency_p50_ms'])} / "
              f"{_fmt_s(r['latency_p99_ms'])} | {_fmt_s(r['ack_p99_ms'])} "
              f"| {r['bytes_per_message']:,.0f} | {r['repair_requests'] / m:.2f} / "
              f"{r['repairs_sent'] / m:.2f} |")
    if skipped:
        print(f"\nskipped (budget): {', '.join(skipped)}")
    if opts.json:
        Path(opts.json).write_text(json.dumps({"calibration": cal, "cells": rows,
                                               "skipped": skipped}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

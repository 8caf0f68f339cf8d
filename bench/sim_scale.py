"""Simulation benchmark: deliveries per second and peak memory at N = 100, 1,000, 10,000.

Each size runs in its own process (peak RSS is per process) through the same
code as ``sdschat sim`` (Parquet output included), with the sim defaults
(fast timings, auto sync interval, the default profile's sizes: sds.Config())::

    .venv/bin/python bench/sim_scale.py                      # 100, 1000, 10000 x 100 messages
    .venv/bin/python bench/sim_scale.py --sizes 100 1000 --messages 200 --loss 0.01

Prints one line per size: deliveries, wall time, deliveries/s, peak RSS, rows.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import json, sys
sys.path.insert(0, {root!r})
from app.sim import SimSpec, run_sim
spec = SimSpec(participants={n}, messages={m}, loss={loss}, seed={seed}, rate={rate})
r = run_sim(spec, {out!r})
m = r.meta
print(json.dumps({{k: m[k] for k in ("network", "rows", "wall_seconds", "deliveries_per_second",
    "peak_rss_mb", "participants_holding_every_message", "virtual_seconds", "messages_sent")}}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    ap.add_argument("--messages", type=int, default=100)
    ap.add_argument("--loss", type=float, default=0.0)
    ap.add_argument("--rate", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(f"messages {args.messages}, loss {args.loss}, rate {args.rate}/s, seed {args.seed}")
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="sdschat-sim-bench-") as tmp:
            code = _CHILD.format(root=str(ROOT), n=n, m=args.messages, loss=args.loss,
                                 seed=args.seed, rate=args.rate, out=str(Path(tmp) / "run"))
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 timeout=3600, check=False)
            if res.returncode != 0:
                print(f"N={n}: failed\n{res.stderr[-2000:]}")
                return 1
            m = json.loads(res.stdout.strip().splitlines()[-1])
            net = m["network"]
            print(
                f"N={n:>6,}  deliveries {net['deliveries']:>11,}  broadcasts "
                f"{net['broadcasts']:>6,}  wall {m['wall_seconds']:7.1f}s  "
                f"{m['deliveries_per_second']:>9,.0f} deliveries/s  peak {m['peak_rss_mb']:6.0f} MB"
                f"  rows {m['rows']:>11,}  converged {m['participants_holding_every_message']}/{n}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Simulation benchmark: wall time, peak memory and where the deliveries go, per N.

Each run is its own process (peak RSS is per process) through the same code as
``sdschat sim`` (Parquet output included), with the sim's defaults (fast timings,
auto sync interval, the default profile's sizes: sds.Config()). With
``--baseline REV`` the same runs also go through revision REV's code (``git
archive`` of ``app net sds storage pipeline`` into a temporary directory),
alternating baseline and current per size, in one invocation::

    .venv/bin/python bench/sim_scale.py                      # 100, 1000, 10000 x 100 messages
    .venv/bin/python bench/sim_scale.py --sizes 1000 10000 --messages 200 --loss 0.05 \\
        --baseline c6fd7fb --timeout 1800

Per run: deliveries (by what was delivered: content, sync, repair, ...), repair
requests sent, repair rebroadcasts (and per repaired message: the rebroadcasts
over the distinct ids rebroadcast, and the most for one id), duplicate deliveries, wall time,
deliveries/s, peak RSS, and whether every participant holds every message. A run
past ``--timeout`` seconds is stopped and reported as not finished, with how far
it got (virtual seconds, deliveries: from its progress line).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

_CHILD = """
import json, sys
sys.path.insert(0, {root!r})
from app.sim.simulation import SimSpec, run_sim
spec = SimSpec(participants={n}, messages={m}, loss={loss}, seed={seed}, rate={rate})
r = run_sim(spec, {out!r}, progress=True)
m = r.meta
import pyarrow.compute as pc, pyarrow.parquet as pq
t = pq.read_table({out!r} + "/events", columns=["kind", "detail", "message_id"])
kinds = {{k["values"]: k["counts"] for k in pc.value_counts(t.column("kind")).to_pylist()}}
drops = t.filter(pc.equal(t.column("kind"), "MessageDropped")).column("detail")
dup = pc.sum(pc.match_substring(drops, '"reason":"duplicate"')).as_py() or 0
out = {{k: m[k] for k in ("network", "rows", "wall_seconds", "deliveries_per_second",
    "peak_rss_mb", "participants_holding_every_message", "virtual_seconds", "messages_sent")}}
rep = t.filter(pc.equal(t.column("kind"), "RepairSent")).column("message_id")
per = pc.value_counts(rep).to_pylist()
out.update(kinds=kinds, duplicates=dup, repaired_messages=len(per),
           max_repairs_per_message=max((c["counts"] for c in per), default=0))
print(json.dumps(out))
"""


def extract_revision(rev: str, into: Path) -> None:
    """The runtime rooms (app, net, sds, storage, pipeline) of revision ``rev`` into ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "app", "net", "sds", "storage", "pipeline"],
        capture_output=True, check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


def run_one(root: Path, n: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """One run in a child process; ``{"finished": False, ...}`` past the timeout."""
    out = tmp / f"run-{n}-{root.name}"
    code = _CHILD.format(root=str(root), n=n, m=args.messages, loss=args.loss,
                         seed=args.seed, rate=args.rate, out=str(out))
    err = tmp / "stderr"
    with err.open("w") as fh:
        try:
            res = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                 stderr=fh, text=True, cwd=root, timeout=args.timeout,
                                 check=False)
        except subprocess.TimeoutExpired:
            res = None
    progress = err.read_text().replace("\r", "\n").strip().splitlines()
    last = next((ln for ln in reversed(progress) if ln.startswith("[")), "")
    if res is None:
        return {"finished": False, "progress": last}
    if res.returncode != 0:
        raise RuntimeError(f"N={n} failed:\n{''.join(progress[-20:])}")
    m: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    m["finished"] = True
    return m


def line(label: str, n: int, m: dict[str, Any], timeout: float) -> str:
    if not m["finished"]:
        return f"{label:>9} N={n:>6,}  NOT FINISHED in {timeout:.0f} s: {m['progress']}"
    net, k = m["network"], m["kinds"]
    return (
        f"{label:>9} N={n:>6,}  deliveries {net['deliveries']:>11,} (sync "
        f"{k.get('SyncReceived', 0):>10,}, dup {m['duplicates']:>10,})  broadcasts "
        f"{net['broadcasts']:>7,} (syncs {k.get('SyncSent', 0):>6,}, requests "
        f"{k.get('RepairRequested', 0):>6,}, repairs {k.get('RepairSent', 0):>6,} for "
        f"{m.get('repaired_messages', 0):,} messages: "
        f"{k.get('RepairSent', 0) / max(1, m.get('repaired_messages', 0)):.2f} each, "
        f"at most {m.get('max_repairs_per_message', 0)})  "
        f"wall {m['wall_seconds']:7.1f}s  {m['deliveries_per_second']:>7,.0f}/s  "
        f"peak {m['peak_rss_mb']:5.0f} MB  converged "
        f"{m['participants_holding_every_message']}/{n}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    ap.add_argument("--messages", type=int, default=100)
    ap.add_argument("--loss", type=float, default=0.0)
    ap.add_argument("--rate", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--baseline", default=None, help="git revision to run beside this tree")
    ap.add_argument("--timeout", type=float, default=3_600.0, help="seconds per run")
    ap.add_argument("--json", default=None, help="also write every figure to this file")
    args = ap.parse_args()
    from machine import describe

    print(f"messages {args.messages}, loss {args.loss}, rate {args.rate}/s, seed {args.seed}; "
          f"{describe()}", flush=True)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="sdschat-sim-bench-") as tmp_s:
        tmp = Path(tmp_s)
        roots = [("current", ROOT)]
        if args.baseline:
            base = tmp / "baseline"
            base.mkdir()
            extract_revision(args.baseline, base)
            roots.insert(0, (args.baseline, base))
        for n in args.sizes:
            for label, root in roots:  # baseline then current, per size
                m = run_one(root, n, args, tmp)
                results.append({"label": label, "n": n, **m})
                print(line(label, n, m, args.timeout), flush=True)
                for p in tmp.glob("run-*"):
                    subprocess.run(["rm", "-rf", str(p)], check=False)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "machine": describe(),
                                               "runs": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

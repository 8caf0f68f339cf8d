"""What a simulated delivery and a simulated member cost, beside a baseline revision.

Runs ``sdschat sim``'s code (``app.sim.simulation.run_sim``, Parquet included) for one shape
through another revision's code (``git archive`` of ``app net sds storage
pipeline``) and through this tree, alternating, in one invocation, each run in
its own process (peak RSS is per process)::

    .venv/bin/python bench/sim_cost.py -n 2000 -m 200 --loss 0.05 --baseline 9108871
    .venv/bin/python bench/sim_cost.py -n 2000 -m 40 --rounds 2 --baseline HEAD~1

Per run: CPU seconds (the child's user + system), wall, peak RSS, CPU
microseconds per delivery, peak RSS per member, and the run's **fingerprint**:
network counters, deliveries and bytes by kind, event rows by kind, members
holding every message, delivery p50 / p99 (ms, from the events) and a SHA-256 of
every event row (participant, sequence, virtual time, kind, ids, sizes, causal
history, detail). The speed and memory work on the simulator must not change
behaviour: the same seed must give the same fingerprint, and the command exits 1
(saying what differs) when two runs' fingerprints differ, 0 when all are equal.
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
import json, sys, hashlib
sys.path.insert(0, {root!r})
from app.sim.simulation import SimSpec, run_sim
spec = SimSpec(**json.loads({spec!r}))
r = run_sim(spec, {out!r}, force=True)
m = r.meta
import pyarrow as pa, pyarrow.compute as pc, pyarrow.csv as pcsv, pyarrow.parquet as pq
cols = ["node_id", "seq", "time_ms", "channel", "kind", "message_id", "sender_id", "lamport",
        "size_bytes", "content_bytes", "metadata_bytes", "causal_history", "position",
        "missing_before", "reason", "detail"]
t = pq.read_table({out!r} + "/events")
sel = t.select([c for c in cols if c in t.column_names])
# as text (CSV), independent of how the rows were cut into row groups and chunks
sel = sel.set_column(sel.column_names.index("causal_history"), "causal_history",
                     pc.binary_join(sel.column("causal_history"), " "))
sink = pa.BufferOutputStream()
pcsv.write_csv(sel, sink)
digest = hashlib.sha256(sink.getvalue().to_pybytes())
kinds = {{k["values"]: k["counts"] for k in pc.value_counts(t.column("kind")).to_pylist()}}
sent = t.filter(pc.equal(t.column("kind"), "MessageSent"))
when = dict(zip(sent.column("message_id").to_pylist(), sent.column("time_ms").to_pylist()))
dl = t.filter(pc.equal(t.column("kind"), "MessageDelivered"))
lat = sorted(x - when[i] for i, x in zip(dl.column("message_id").to_pylist(),
             dl.column("time_ms").to_pylist()) if i in when)
pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else None
fp = {{"network": m["network"], "traffic": m["traffic"]["by_kind"], "rows": m["rows"],
      "kinds": kinds, "holding": m["participants_holding_every_message"],
      "p50_ms": pct(0.5), "p99_ms": pct(0.99), "events_sha256": digest.hexdigest()}}
out = {{k: m[k] for k in ("wall_seconds", "cpu_seconds", "peak_rss_mb")}}
out["fingerprint"] = fp
print(json.dumps(out))
"""


def run_one(root: Path, spec: dict[str, Any], tmp: Path, timeout: float) -> dict[str, Any]:
    """One run in a child process (``RuntimeError`` if it fails or times out)."""
    out = tmp / "run"
    code = _CHILD.format(root=str(root), spec=json.dumps(spec), out=str(out))
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=root, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"run past {timeout:.0f} s") from None
    finally:
        subprocess.run(["rm", "-rf", str(out)], check=False)
    if res.returncode != 0:
        raise RuntimeError(f"run failed:\n{res.stderr[-3000:]}")
    m: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return m


def line(label: str, n: int, m: dict[str, Any]) -> str:
    fp = m["fingerprint"]
    dl = fp["network"]["deliveries"]
    return (
        f"{label:>12}  CPU {m['cpu_seconds']:7.1f} s  wall {m['wall_seconds']:7.1f} s  "
        f"peak {m['peak_rss_mb']:6.0f} MB  {1e6 * m['cpu_seconds'] / max(1, dl):5.1f} us CPU "
        f"per delivery  {1024 * m['peak_rss_mb'] / n:6.1f} KB peak per member  |  "
        f"deliveries {dl:,}  rows {fp['rows']:,}  syncs {fp['kinds'].get('SyncSent', 0)}  "
        f"answers {fp['kinds'].get('RepairSent', 0)}  holding {fp['holding']}/{n}  "
        f"p50/p99 {fp['p50_ms']}/{fp['p99_ms']} ms  events {fp['events_sha256'][:12]}"
    )


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two fingerprints differ, as ``path: a != b`` lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b)):
            out += differences(a.get(k), b.get(k), f"{path}.{k}" if path else k)
        return out
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--participants", type=int, default=2_000)
    ap.add_argument("-m", "--messages", type=int, default=200)
    ap.add_argument("--loss", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline", default=None,
                    help="git revision to run beside this tree (alternating)")
    ap.add_argument("--rounds", type=int, default=1, help="baseline/current pairs")
    ap.add_argument("--timeout", type=float, default=1_800.0, help="seconds per run")
    ap.add_argument("--json", default=None, help="also write every figure to this file")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.participants < 2 or args.messages < 0:
        ap.error("--rounds >= 1, --participants >= 2 and --messages >= 0")
    from machine import describe
    from sim_scale import extract_revision

    spec = {"participants": args.participants, "messages": args.messages,
            "loss": args.loss, "seed": args.seed}
    print(f"sim -n {args.participants} -m {args.messages} --loss {args.loss} --seed "
          f"{args.seed}; {describe()}", flush=True)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="sdschat-sim-cost-") as tmp_s:
        tmp = Path(tmp_s)
        roots = [("current", ROOT)]
        if args.baseline:
            base = tmp / "baseline"
            base.mkdir()
            extract_revision(args.baseline, base)
            roots.insert(0, (args.baseline, base))
        for _ in range(args.rounds):
            for label, root in roots:
                m = run_one(root, spec, tmp, args.timeout)
                runs.append({"label": label, **m})
                print(line(label, args.participants, m), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "machine": describe(),
                                               "runs": runs}, indent=1) + "\n")
    diff = [f"{r['label']}: {d}" for r in runs[1:]
            for d in differences(runs[0]["fingerprint"], r["fingerprint"])]
    if diff:
        print("FINGERPRINTS DIFFER (same seed, different behaviour):", *diff, sep="\n  ")
        return 1
    print(f"fingerprints equal across {len(runs)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

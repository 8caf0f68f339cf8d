"""Does every message reach everyone at 30 % loss, and how fast? (issue 14 section 4)

Runs ``sdschat sim`` (the SDS core over an in-memory network in virtual time:
deterministic per seed, independent of the machine's speed) for 3 participants,
300 messages, ``--loss 0.3``, for several seeds, against this tree and a
baseline revision (``git archive`` into a temporary directory), and reads the
event rows: per run, whether every participant holds every message, the
delivery latency (MessageDelivered time minus MessageSent time) at p50, p90 and
max, and the number of ``MessageLost`` events::

    .venv/bin/python bench/lossy_convergence.py [--baseline main] [--seeds 1-5]
        [--timings default] [--drain 600]
"""

from __future__ import annotations

import argparse
import glob
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _sim(tree: Path, out: Path, seed: int, timings: str, drain: int) -> str:
    argv = [sys.executable, "-m", "app.cli", "sim", "-n", "3", "-m", "300", "--loss", "0.3",
            "--seed", str(seed), "--out", str(out), "--timings", timings, "--force"]
    if drain:
        argv += ["--drain", str(drain)]
    res = subprocess.run(argv, cwd=tree, capture_output=True, text=True, timeout=900, check=True)
    holding = [ln for ln in res.stdout.splitlines() if "holding every message" in ln]
    return holding[0].split(":")[-1].strip() if holding else "?"


def _latency(out: Path) -> tuple[float, float, float, int]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = glob.glob(str(out / "events" / "*.parquet"))
    cols = ["kind", "message_id", "time_ms"]
    rows = pa.concat_tables([pq.read_table(f, columns=cols) for f in files]).to_pylist()
    sent = {r["message_id"]: r["time_ms"] for r in rows if r["kind"] == "MessageSent"}
    lat = sorted(
        r["time_ms"] - sent[r["message_id"]]
        for r in rows
        if r["kind"] == "MessageDelivered" and r["message_id"] in sent
    )
    lost = sum(r["kind"] == "MessageLost" for r in rows)

    def q(p: float) -> float:
        return lat[int(p * (len(lat) - 1))] / 1000 if lat else float("nan")

    return q(0.5), q(0.9), q(1.0), lost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--seeds", default="1-5", help="LO-HI")
    parser.add_argument("--timings", default="default", choices=("default", "fast"))
    parser.add_argument("--drain", type=int, default=0, help="virtual seconds after the last")
    args = parser.parse_args(argv)
    lo, _, hi = args.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    with tempfile.TemporaryDirectory(prefix="lossy-") as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.baseline], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        print(f"3 participants, 300 messages, loss 0.3, {args.timings} timings; "
              f"baseline {args.baseline} vs this tree")
        print(f"{'seed':>4} {'tree':<9} {'complete':>8} {'p50 s':>7} {'p90 s':>7} "
              f"{'max s':>7} {'lost':>5}")
        for seed in seeds:  # alternate baseline and this tree
            for label, tree in (("baseline", base), ("this", ROOT)):
                out = Path(tmp) / f"{label}-{seed}"
                holding = _sim(tree, out, seed, args.timings, args.drain)
                p50, p90, top, lost = _latency(out)
                print(f"{seed:>4} {label:<9} {holding:>8} {p50:>7.1f} {p90:>7.1f} "
                      f"{top:>7.1f} {lost:>5}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

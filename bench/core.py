"""SDS core throughput: the js-waku scenario, side by side with the reference.

Two channels with default settings (causal history 200, bloom 10,000/0.001)
exchange N content messages, alternating sender; every message is received by
the other channel; events are drained after every call as a real node does.
We report send msg/s, receive msg/s and bytes per message for each N, the rate
over the last 1,000 messages (the cost at that history size), and a run of 10
channel pairs x 1,000 messages.

When node and the @waku/sds@0.0.8 package (installed by the interop test into
.cache/npm-waku-sds) are present, the same scenario runs on the reference in the
same session, interleaved, for the sizes where it finishes in reasonable time.

Usage: python bench/core.py [--sizes 1000,3000,10000,100000] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sds  # noqa: E402

WAKU_DIR = ROOT / ".cache" / "npm-waku-sds"
WAKU_SCRIPT = Path(__file__).with_name("waku_core.mjs")
TAIL = 1_000


def run_sdschat(n: int, pairs: int = 1) -> dict[str, float]:
    """Exchange ``n`` messages in each of ``pairs`` channel pairs; time send and receive."""
    cfg = sds.Config()
    now = 1_700_000_000_000
    chans = []
    for p in range(pairs):
        a = sds.Channel(f"bench-{p}", "alice", cfg, now, random.Random(1))
        b = sds.Channel(f"bench-{p}", "bob", cfg, now, random.Random(2))
        chans.append((a, b))
    t_send = t_recv = 0.0
    tail_send = tail_recv = 0.0
    total_bytes = 0
    perf = time.perf_counter
    for i in range(n):
        now += 1
        for a, b in chans:
            src, dst = (a, b) if i % 2 == 0 else (b, a)
            content = b"message %d: the quick brown fox" % i
            t0 = perf()
            data = src.send(content, now)
            src.events()
            t1 = perf()
            dst.receive(data, now, None)
            dst.events()
            t2 = perf()
            t_send += t1 - t0
            t_recv += t2 - t1
            if i >= n - TAIL:
                tail_send += t1 - t0
                tail_recv += t2 - t1
            total_bytes += len(data)
    count = n * pairs
    tail_count = min(TAIL, n) * pairs
    for a, b in chans:
        assert a.log_ids() == b.log_ids() or cfg.log_window < n, "channels diverged"
    return {
        "send_per_s": count / t_send,
        "recv_per_s": count / t_recv,
        "tail_send_per_s": tail_count / tail_send,
        "tail_recv_per_s": tail_count / tail_recv,
        "bytes_per_msg": total_bytes / count,
    }


def waku_available() -> bool:
    return (
        shutil.which("node") is not None
        and (WAKU_DIR / "node_modules" / "@waku" / "sds" / "package.json").exists()
    )


def run_waku(n: int) -> dict[str, float] | None:
    """The same scenario in @waku/sds 0.0.8 (node); ``None`` if unavailable or too slow."""
    if not waku_available():
        return None
    env = dict(os.environ, NODE_PATH=str(WAKU_DIR / "node_modules"))
    try:
        out = subprocess.run(
            ["node", str(WAKU_SCRIPT), str(n), str(WAKU_DIR / "node_modules")],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError) as exc:
        print(f"  (reference run failed: {exc})", file=sys.stderr)
        return None
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,3000,10000,100000")
    ap.add_argument("--reference-sizes", default="1000,3000")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per size (median reported)")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--per-pair", type=int, default=1000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    ref_sizes = {int(s) for s in args.reference_sizes.split(",") if s}

    results: list[dict[str, object]] = []
    for n in sizes:
        ours: list[dict[str, float]] = []
        ref: list[dict[str, float]] = []
        rounds = args.rounds if n <= 10_000 else 1
        for _ in range(rounds):  # interleaved: ours, reference, ours, reference...
            ours.append(run_sdschat(n))
            if n in ref_sizes:
                r = run_waku(n)
                if r is not None:
                    ref.append(r)
        row: dict[str, object] = {"n": n, "sdschat": median_of(ours)}
        if ref:
            row["waku"] = median_of(ref)
        results.append(row)
        if not args.json:
            print_row(row)
    multi = median_of([run_sdschat(args.per_pair, args.pairs) for _ in range(args.rounds)])
    results.append({"n": f"{args.pairs}x{args.per_pair}", "sdschat": multi})
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print_row(results[-1])
        base = next((r for r in results if r["n"] == 1000), None)
        big = next((r for r in results if r["n"] == max(sizes)), None)
        if base and big and base is not big:
            b = base["sdschat"]
            g = big["sdschat"]
            assert isinstance(b, dict) and isinstance(g, dict)
            print(
                f"\nreceive rate at N={big['n']} (last {TAIL}) vs N=1000: "
                f"{g['tail_recv_per_s'] / b['recv_per_s']:.0%}"
            )
    return 0


def print_row(row: dict[str, object]) -> None:
    s = row["sdschat"]
    assert isinstance(s, dict)
    line = (
        f"N={row['n']!s:>9}  sdschat send {s['send_per_s']:8.0f}/s  recv {s['recv_per_s']:8.0f}/s"
        f"  (last {TAIL}: send {s['tail_send_per_s']:6.0f}/s recv {s['tail_recv_per_s']:6.0f}/s)"
        f"  {s['bytes_per_msg']:7.0f} B/msg"
    )
    w = row.get("waku")
    if isinstance(w, dict):
        line += (
            f"\n{'':12}@waku/sds send {w['send_per_s']:8.0f}/s  recv {w['recv_per_s']:8.0f}/s"
            f"  {w['bytes_per_msg']:7.0f} B/msg"
        )
    print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())

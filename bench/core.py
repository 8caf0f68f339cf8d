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

``--baseline REV`` runs another revision's ``sds`` (``git archive REV sds``) beside
this tree's instead, alternating (baseline, current, baseline, ...), every run in a
child process of its own, and prints each figure of both with their ratio.
``--micro`` adds the per-message costs at each size (microseconds, median of
``--micro-count`` messages): once the channel holds N messages, a content message
whose dependencies are all met given to ``receive_parsed`` already parsed (the
core alone: the hot path), the same given to ``receive`` as bytes (parse
included), a sync, and ``send``::

    python bench/core.py --sizes 2000,20000 --rounds 5 --micro --baseline 41573be

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
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    sys.path.insert(0, sys.argv[2])  # the tree whose sds this child runs
else:
    sys.path.insert(0, str(ROOT))

import sds  # noqa: E402
from sds import sds_pb2  # noqa: E402

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


def _filled(n: int) -> tuple[sds.Channel, sds.Channel, int]:
    """Alice and Bob after ``n`` messages as in :func:`run_sdschat` (deterministic: the
    same channels every time), and the time."""
    cfg = sds.Config()
    now = 1_700_000_000_000
    a = sds.Channel("bench", "alice", cfg, now, random.Random(1))
    b = sds.Channel("bench", "bob", cfg, now, random.Random(2))
    for i in range(n):
        now += 1
        src, dst = (a, b) if i % 2 == 0 else (b, a)
        dst.receive(src.send(b"message %d: the quick brown fox" % i, now), now, None)
        src.events()
        dst.events()
    return a, b, now


def micro(n: int, count: int) -> dict[str, float]:
    """Per-message costs in a channel holding ``n`` messages (see the module docstring):
    microseconds, the median over ``count`` messages of each kind. Each kind runs on a
    Bob of its own, filled alike: the same history, the same messages."""
    a, bob, now = _filled(n)
    perf = time.perf_counter_ns
    syncs: list[tuple[bytes, int]] = []
    t = now
    while len(syncs) < count:  # alice's syncs: each names only what Bob holds
        t = max(t + 1, a.get_timer() or t + 1)
        a.handle_timer(t)
        a.events()
        syncs += [(d.data, t) for d in a.datagrams_to_send() if d.kind == "sync"]
    lines: list[tuple[bytes, int]] = []
    for i in range(count):  # then her lines, each naming the ones before it
        t += 1
        lines.append((a.send(b"line %d: the quick brown fox" % i, t), t))
        a.events()
    parsed = [(sds_pb2.SdsMessage.FromString(d), d, t) for d, t in lines]
    out: dict[str, list[int]] = {"receive_parsed_us": [], "receive_us": [], "sync_us": [],
                                 "send_us": []}
    ch = bob
    for pb, d, t in parsed:
        t0 = perf()
        ch.receive_parsed(pb, d, t)
        ch.events()
        out["receive_parsed_us"].append(perf() - t0)
    ch = _filled(n)[1]
    for d, t in lines:
        t0 = perf()
        ch.receive(d, t)
        ch.events()
        out["receive_us"].append(perf() - t0)
    ch = _filled(n)[1]
    for d, t in syncs:
        t0 = perf()
        ch.receive(d, t)
        ch.events()
        out["sync_us"].append(perf() - t0)
    ch = _filled(n)[1]
    t = now
    for i in range(count):
        t += 1
        t0 = perf()
        ch.send(b"reply %d: the quick brown fox" % i, t)
        ch.events()
        out["send_us"].append(perf() - t0)
    return {k: statistics.median(v) / 1_000 for k, v in out.items()}


def run_child(root: Path, job: dict[str, Any]) -> dict[str, float]:
    """One job (``exchange`` or ``micro``) with ``root``'s sds, in a child process."""
    res = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", str(root), json.dumps(job)],
        capture_output=True, text=True, check=False, timeout=1_800,
    )
    if res.returncode != 0:
        raise RuntimeError(f"{root}: {job} failed:\n{res.stderr[-3000:]}")
    out: dict[str, float] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def child_main(root: str, job_json: str) -> int:
    job = json.loads(job_json)
    here = Path(sds.__file__).resolve().parent
    if here != Path(root).resolve() / "sds":
        raise SystemExit(f"imported sds from {here}, not from {root}")
    if job["kind"] == "micro":
        result = micro(job["n"], job["count"])
    else:
        result = run_sdschat(job["n"], job.get("pairs", 1))
    print(json.dumps(result))
    return 0


def compare(args: argparse.Namespace, sizes: list[int]) -> int:
    """``--baseline``: both trees' figures, alternating runs, medians and ratios."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from machine import describe

    print(f"{describe()}; load {os.getloadavg()[0]:.1f}", flush=True)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="sdschat-core-bench-") as tmp_s:
        base = Path(tmp_s)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline, "sds"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        roots = [(args.baseline, base), ("current", ROOT)]
        jobs: list[dict[str, Any]] = [{"kind": "exchange", "n": n} for n in sizes]
        jobs.append({"kind": "exchange", "n": args.per_pair, "pairs": args.pairs})
        if args.micro:
            jobs += [{"kind": "micro", "n": n, "count": args.micro_count} for n in sizes]
        for job in jobs:
            runs: dict[str, list[dict[str, float]]] = {label: [] for label, _ in roots}
            for _ in range(args.rounds):
                for label, root in roots:
                    runs[label].append(run_child(root, job))
            row = {"job": job, **{label: median_of(r) for label, r in runs.items()},
                   "runs": runs}
            results.append(row)
            if not args.json:
                print_comparison(row, [label for label, _ in roots])
    print(f"load {os.getloadavg()[0]:.1f}", flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


def print_comparison(row: dict[str, Any], labels: list[str]) -> None:
    job = row["job"]
    name = (f"micro N={job['n']}" if job["kind"] == "micro"
            else f"N={job.get('pairs', 1)}x{job['n']}" if job.get("pairs", 1) > 1
            else f"N={job['n']}")
    base, cur = row[labels[0]], row[labels[1]]
    parts = []
    for key in base:
        if key == "bytes_per_msg":
            same = "same" if base[key] == cur[key] else f"{base[key]:.0f} -> {cur[key]:.0f}"
            parts.append(f"bytes/msg {cur[key]:.0f} ({same})")
            continue
        ratio = cur[key] / base[key] if base[key] else float("nan")
        fmt = "{:.1f}" if key.endswith("_us") else "{:.0f}"
        parts.append(f"{key} {fmt.format(base[key])} -> {fmt.format(cur[key])} ({ratio:.3f})")
    print(f"{name:>14}  {labels[0]} -> current:  " + "  ".join(parts), flush=True)


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
    ap.add_argument("--baseline", default=None,
                    help="git revision whose sds runs beside this tree's (alternating)")
    ap.add_argument("--micro", action="store_true", help="per-message costs (with --baseline)")
    ap.add_argument("--micro-count", type=int, default=2_000)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child_main(argv[1], argv[2])
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.baseline:
        return compare(args, sizes)
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

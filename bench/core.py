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
included), a sync, and ``send``, each with what a node does after every call into
the core (drain the events, read the next deadline)::

    python bench/core.py --sizes 2000,20000 --rounds 5 --micro --baseline 41573be

``--interleaved`` (with ``--baseline``) runs the exchange (without the 10 pairs) and
the per-message costs of both trees in one process: the baseline's ``sds`` is
imported beside this one (as ``sds_baseline``) and the two take turns (the exchange
message by message, the per-message costs ``--batch`` messages at a time), so that
a loaded machine weighs on both alike (the way to compare on a shared 2-core box)::

    python bench/core.py --sizes 2000,20000 --baseline 41573be --interleaved

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


def _filled(n: int, mod: Any = sds) -> tuple[Any, Any, int]:
    """Alice and Bob (channels of ``mod``, an ``sds``) after ``n`` messages as in
    :func:`run_sdschat` (deterministic: the same channels every time), and the time."""
    cfg = mod.Config()
    now = 1_700_000_000_000
    a = mod.Channel("bench", "alice", cfg, now, random.Random(1))
    b = mod.Channel("bench", "bob", cfg, now, random.Random(2))
    for i in range(n):
        now += 1
        src, dst = (a, b) if i % 2 == 0 else (b, a)
        dst.receive(src.send(b"message %d: the quick brown fox" % i, now), now, None)
        src.events()
        dst.events()
    return a, b, now


def _timed(ch: Any, call: Any, calls: list[Any]) -> list[int]:
    """Nanoseconds of each ``call(*args)`` on ``ch`` with what a node does after every
    call into the core: drain the events, read the next deadline."""
    perf = time.perf_counter_ns
    events, get_timer = ch.events, ch.get_timer
    out = []
    for args in calls:
        t0 = perf()
        call(*args)
        events()
        get_timer()
        out.append(perf() - t0)
    return out


#: what --micro times: (kind, the method of a filled Bob, which of Alice's messages)
MICRO_KINDS = (
    ("receive_parsed_us", "receive_parsed", "parsed"),
    ("receive_us", "receive", "lines"),
    ("sync_us", "receive", "syncs"),
    ("send_us", "send", "replies"),
)


def _micro_calls(n: int, count: int, mod: Any = sds) -> dict[str, list[Any]]:
    """Alice's messages for Bob once he holds ``n``: her syncs (each names only what he
    holds), then her lines (each naming the ones before it), parsed too; and Bob's
    replies."""
    a, _, now = _filled(n, mod)
    syncs: list[tuple[bytes, int]] = []
    t = now
    while len(syncs) < count:
        t = max(t + 1, a.get_timer() or t + 1)
        a.handle_timer(t)
        a.events()
        syncs += [(d.data, t) for d in a.datagrams_to_send() if d.kind == "sync"]
    lines: list[tuple[bytes, int]] = []
    for i in range(count):
        t += 1
        lines.append((a.send(b"line %d: the quick brown fox" % i, t), t))
        a.events()
    return {
        "syncs": syncs[:count],
        "lines": lines,
        "parsed": [(sds_pb2.SdsMessage.FromString(d), d, t) for d, t in lines],
        "replies": [(b"reply %d: the quick brown fox" % i, now + 1 + i) for i in range(count)],
    }


def micro(n: int, count: int) -> dict[str, float]:
    """Per-message costs in a channel holding ``n`` messages (see the module docstring):
    microseconds, the median over ``count`` messages of each kind. Each kind runs on a
    Bob of its own, filled alike: the same history, the same messages."""
    calls = _micro_calls(n, count)
    out = {}
    for kind, method, which in MICRO_KINDS:
        bob = _filled(n)[1]
        out[kind] = statistics.median(_timed(bob, getattr(bob, method), calls[which])) / 1_000
    return out


def load_baseline(rev: str, into: Path) -> Any:
    """Revision ``rev``'s sds, importable beside this tree's as the package
    ``sds_baseline`` (its imports of ``sds.X`` rewritten; the generated protobuf module,
    which both must share byte for byte, is this tree's)."""
    import importlib
    import re

    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "sds"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    pkg = into / "sds_baseline"
    (into / "sds").rename(pkg)
    if (pkg / "sds_pb2.py").read_bytes() != (ROOT / "sds" / "sds_pb2.py").read_bytes():
        raise SystemExit(f"{rev}: another sds_pb2.py; compare without --interleaved")
    (pkg / "sds_pb2.py").unlink()
    for path in pkg.glob("*.py"):
        text = re.sub(r"^(\s*)(from|import) sds\.(?!sds_pb2\b)", r"\1\2 sds_baseline.",
                      path.read_text(), flags=re.M)
        text = re.sub(r"^(\s*)from sds import (?!sds_pb2\b)", r"\1from sds_baseline import ",
                      text, flags=re.M)
        path.write_text(text)
    sys.path.insert(0, str(into))
    mod = importlib.import_module("sds_baseline")
    assert mod.Channel is not sds.Channel
    return mod


def exchange_interleaved(mods: dict[str, Any], n: int) -> dict[str, dict[str, float]]:
    """:func:`run_sdschat`'s exchange for each ``sds`` of ``mods`` at once, message by
    message in turn (the order swapped every message): the rates from the total times
    as :func:`run_sdschat` gives them, and the median times of a send and a receive
    (over all ``n`` messages and over the last 1,000), which a preemption that falls
    on one side's message does not move."""
    now = 1_700_000_000_000
    pairs = {
        label: (mod.Channel("bench", "alice", mod.Config(), now, random.Random(1)),
                mod.Channel("bench", "bob", mod.Config(), now, random.Random(2)))
        for label, mod in mods.items()
    }
    sends: dict[str, list[int]] = {label: [] for label in mods}
    recvs: dict[str, list[int]] = {label: [] for label in mods}
    sizes = dict.fromkeys(mods, 0)
    labels = list(mods)
    perf = time.perf_counter_ns
    for i in range(n):
        now += 1
        content = b"message %d: the quick brown fox" % i
        for label in labels if i % 2 == 0 else labels[::-1]:
            a, b = pairs[label]
            src, dst = (a, b) if i % 2 == 0 else (b, a)
            t0 = perf()
            data = src.send(content, now)
            src.events()
            t1 = perf()
            dst.receive(data, now, None)
            dst.events()
            t2 = perf()
            sends[label].append(t1 - t0)
            recvs[label].append(t2 - t1)
            sizes[label] += len(data)
    out = {}
    for label in mods:
        s_, r_ = sends[label], recvs[label]
        out[label] = {
            "send_per_s": 1e9 * n / sum(s_), "recv_per_s": 1e9 * n / sum(r_),
            "send_median_us": statistics.median(s_) / 1e3,
            "recv_median_us": statistics.median(r_) / 1e3,
            "tail_send_median_us": statistics.median(s_[-TAIL:]) / 1e3,
            "tail_recv_median_us": statistics.median(r_[-TAIL:]) / 1e3,
            "bytes_per_msg": sizes[label] / n,
        }
    return out


def interleaved(args: argparse.Namespace, sizes: list[int]) -> int:
    """``--interleaved``: the exchange and the per-message costs of both trees in this
    one process, in turn (the exchange message by message, the per-message costs
    ``--batch`` messages at a time, the order swapped every turn), so that whatever
    else the machine runs weighs on both alike."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from machine import describe

    out: dict[str, Any] = {"machine": describe(), "load": [os.getloadavg()[0]], "sizes": {}}
    if not args.json:
        print(f"{out['machine']}; load {out['load'][0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="sdschat-core-bench-") as tmp_s:
        mods = {args.baseline: load_baseline(args.baseline, Path(tmp_s)), "current": sds}
        for n in sizes:
            calls = _micro_calls(n, args.micro_count)
            base_calls = _micro_calls(n, args.micro_count, mods[args.baseline])
            same = all(calls[k] == base_calls[k] for k in ("syncs", "lines"))
            row: dict[str, Any] = {"same_bytes": same,
                                   "exchange": exchange_interleaved(mods, n)}
            for kind, method, which in MICRO_KINDS:
                bobs = {label: _filled(n, mod)[1] for label, mod in mods.items()}
                times: dict[str, list[int]] = {label: [] for label in mods}
                labels = list(mods)
                for k in range(0, args.micro_count, args.batch):
                    batch = calls[which][k:k + args.batch]
                    for label in labels if (k // args.batch) % 2 == 0 else labels[::-1]:
                        bob = bobs[label]
                        times[label] += _timed(bob, getattr(bob, method), batch)
                row[kind] = {label: {"median_us": statistics.median(v) / 1_000,
                                     "p10_us": sorted(v)[len(v) // 10] / 1_000}
                             for label, v in times.items()}
            out["sizes"][n] = row
            if not args.json:
                what = "the same bytes" if same else "OTHER BYTES"
                print(f"N={n:>7} ({what} from both)", flush=True)
                ex = row["exchange"]
                for key in ("send_per_s", "recv_per_s", "send_median_us", "recv_median_us",
                            "tail_send_median_us", "tail_recv_median_us"):
                    b_, c_ = ex[args.baseline][key], ex["current"][key]
                    unit = "/s" if key.endswith("_per_s") else " us"
                    print(f"  {key:>19}  {args.baseline} {b_:8.1f}{unit}  current "
                          f"{c_:8.1f}{unit}  ratio {c_ / b_:.3f}", flush=True)
                for kind, _, _ in MICRO_KINDS:
                    b, c = row[kind][args.baseline], row[kind]["current"]
                    print(f"  {kind:>19}  {args.baseline} {b['median_us']:6.1f} us (p10 "
                          f"{b['p10_us']:5.1f})  current {c['median_us']:6.1f} us (p10 "
                          f"{c['p10_us']:5.1f})  ratio {c['median_us'] / b['median_us']:.3f} "
                          f"(p10 {c['p10_us'] / b['p10_us']:.3f})", flush=True)
    out["load"].append(os.getloadavg()[0])
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"load {out['load'][1]:.1f}")
    return 0


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

    machine = describe()
    load_before = os.getloadavg()[0]
    if not args.json:
        print(f"{machine}; load {load_before:.1f}", flush=True)
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
    load_after = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"machine": machine, "load": [load_before, load_after],
                          "results": results}, indent=2))
    else:
        print(f"load {load_after:.1f}", flush=True)
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
    ap.add_argument("--interleaved", action="store_true",
                    help="with --baseline: the per-message costs of both in one process")
    ap.add_argument("--batch", type=int, default=50, help="messages per turn (--interleaved)")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child_main(argv[1], argv[2])
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.baseline and args.interleaved:
        return interleaved(args, sizes)
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

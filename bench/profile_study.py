"""The profile study: what causal-history and bloom-filter sizes cost and buy.

Runs the real SDS core in ``sdschat sim`` (:func:`app.sim.simulation.run_sim`, links with
bandwidth: ``--bandwidth``, default a mix of 1 Mbit/s and 20 Mbit/s) over a grid
of *scenarios* (participants, message rate or burst, loss, a partition that
heals, churn) x *profiles* (causal history 2 / 10 / 20 / 50 / 200, an adaptive
history, bloom filter capacity 1,000..10,000 and error rate 0.001..0.01, and
js-waku's sizes, ``sds.Config.waku()``), and puts per cell, side by side:

* convergence (every participant holds every message), pairs missing, messages
  declared lost, duplicate deliveries;
* delivery latency p50/p99 and time to acknowledgement p50/p99 (``MessageAcknowledged``,
  not "possibly"), share of messages acknowledged, and of those the share
  acknowledged by a causal history (the rest by bloom filters);
* resends per message, repair requests and repair rebroadcasts (count, bytes);
* bytes on the wire per content message: everything participants uploaded
  (content, sync, resend and repair messages) divided by the content messages
  sent, and what receivers downloaded per delivery.

Analysis: with ``--report DIR`` one ``sdschat report`` (one Spark session) runs
over every cell and the table takes convergence, duplicates, acknowledgement,
resends, repairs and the overhead bytes from its ``summary.json``; the link
figures (bytes downloaded, queueing) come from each run's ``run.json`` (the
report does not see the network). Without ``--report`` (the CI test) the same
figures are computed here from the cells' event Parquet with pyarrow; with it,
both are computed and must agree (convergence, acknowledged count, duplicates).

::

    .venv/bin/python bench/profile_study.py --grid quick --out runs/study --report runs/study/report
    .venv/bin/python bench/profile_study.py --grid full --budget 3600 --out runs/full --report ...
    .venv/bin/python bench/profile_study.py --grid ci --out /tmp/ci      # seconds

Writes ``OUT/study.json`` (every cell's figures), ``OUT/study.md`` (the table)
and ``OUT/bytes_vs_ack_p99.svg`` (the chart). The grid is bounded: every cell's
message count is fixed, and ``--budget`` seconds of wall time stops starting new
cells (those are listed as skipped).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _p in (str(ROOT), str(ROOT / "bench")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from app.sim.simulation import PartitionSpec, SimSpec, run_sim  # noqa: E402

__all__ = ["PROFILES", "Profile", "Scenario", "cell_metrics", "grid", "main", "run_study"]


@dataclass(frozen=True)
class Profile:
    """Protocol sizes of one column of the study (``None``: the base profile's;
    ``history_floor=-1``: a fixed newest-N history)."""

    name: str
    base: str = "default"
    history: int | None = None
    history_floor: int | None = None
    bloom_capacity: int | None = None
    bloom_error: float | None = None
    note: str = ""
    #: Other sds.Config fields (timings).
    protocol: tuple[tuple[str, Any], ...] = ()


#: Shorter SDS-R and resend timings than js-waku's (measured against them; the
#: SDS-R spec asks for T_min >= 30 s).
QUICK_TIMINGS: tuple[tuple[str, Any], ...] = (
    ("repair_t_min_ms", 1_000),
    ("repair_t_max_ms", 5_000),
    ("resend_unacknowledged_ms", 10_000),
    ("resend_possibly_acknowledged_ms", 20_000),
    ("sync_interval_ms", 10_000),
    ("sweep_interval_ms", 5_000),
)


@dataclass(frozen=True)
class Scenario:
    """One row of the study: a network and a traffic pattern."""

    name: str
    participants: int
    messages: int
    rate: float
    loss: float
    senders: int | None = None
    partitions: tuple[PartitionSpec, ...] = ()
    churn: float = 0.0
    timings: str = "default"
    drain_s: float | None = None
    note: str = ""


#: The profiles studied. ``default`` is whatever ``sds.Config()`` is (the study
#: re-measures the shipped defaults); the others pin their sizes.
PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("waku", base="waku", note="js-waku: newest 200, filter 10,000 / 0.001"),
        Profile("default", note="sds.Config() as shipped"),
        Profile("h2", history=2, history_floor=-1, bloom_capacity=1_000, note="newest 2"),
        Profile("h10", history=10, history_floor=-1, bloom_capacity=1_000),
        Profile("h20", history=20, history_floor=-1, bloom_capacity=1_000),
        Profile("h50", history=50, history_floor=-1, bloom_capacity=1_000),
        Profile("h200", history=200, history_floor=-1, bloom_capacity=1_000),
        Profile("adapt2-20", history=20, history_floor=2, bloom_capacity=1_000,
                note="newest 2 + every delivered id once, up to 20"),
        Profile("adapt2-20-b250", history=20, history_floor=2, bloom_capacity=250),
        Profile("adapt5-30-b250", history=30, history_floor=5, bloom_capacity=250),
        Profile("adapt5-30-b500", history=30, history_floor=5, bloom_capacity=500),
        Profile("adapt5-30-b1k", history=30, history_floor=5, bloom_capacity=1_000),
        Profile("adapt5-30-b1k-1%", history=30, history_floor=5, bloom_capacity=1_000,
                bloom_error=0.01),
        Profile("adapt5-30-b5k", history=30, history_floor=5, bloom_capacity=5_000),
        Profile("adapt5-30-b10k-1%", history=30, history_floor=5, bloom_capacity=10_000,
                bloom_error=0.01),
        Profile("default-quick", protocol=QUICK_TIMINGS,
                note="default sizes; SDS-R 1-5 s, resend 10 s, sync 10 s"),
        Profile("default-repair", protocol=QUICK_TIMINGS[:2],
                note="default sizes; SDS-R 1-5 s, other timings js-waku's"),
        Profile("waku-quick", base="waku", protocol=QUICK_TIMINGS,
                note="js-waku sizes; SDS-R 1-5 s, resend 10 s, sync 10 s"),
    )
}

_SIZES = ("waku", "default", "h2", "h10", "h20", "h50", "h200", "adapt2-20", "adapt2-20-b250")
_FILTERS = ("adapt5-30-b500", "adapt5-30-b1k", "adapt5-30-b1k-1%", "adapt5-30-b5k",
            "adapt5-30-b10k-1%")
_TIMINGS = ("default-repair", "default-quick", "waku-quick")


def grid(name: str) -> list[tuple[Scenario, list[str]]]:
    """The cells of a named grid: (scenario, profile names)."""
    part = (PartitionSpec(20_000, 60_000, (tuple(range(5)), tuple(range(5, 10)))),)
    if name == "ci":
        return [
            (Scenario("n6-r5-loss0.1", 6, 40, 5.0, 0.1), ["waku", "default"]),
            (Scenario("n6-r5-loss0.3", 6, 40, 5.0, 0.3), ["waku", "default"]),
        ]
    base = Scenario("n10-r2-loss0.1", 10, 300, 2.0, 0.1, note="the issue's cell")
    r10 = Scenario("n10-r10-loss0.1", 10, 300, 10.0, 0.1)
    r10l3 = Scenario("n10-r10-loss0.3", 10, 300, 10.0, 0.3)
    r1l3 = Scenario("n10-r1-loss0.3", 10, 100, 1.0, 0.3)
    partition = Scenario("n10-partition", 10, 200, 2.0, 0.1, partitions=part,
                         note="two halves from 20 s to 60 s")
    scenarios = [
        base,
        Scenario("n10-r1-loss0", 10, 100, 1.0, 0.0),
        r10,
        r10l3,
        r1l3,
        Scenario("n10-r100-loss0.1", 10, 1_000, 100.0, 0.1),
        Scenario("n10-burst", 10, 300, 300.0, 0.1, senders=3, note="300 msg/s for 1 s, 3 senders"),
        partition,
        Scenario("n10-churn", 10, 200, 2.0, 0.1, churn=0.3, note="30% offline 10-60 s once"),
        Scenario("n100-r10-loss0.1", 100, 200, 10.0, 0.1),
        Scenario("n10-r2-loss0.1-fast", 10, 300, 2.0, 0.1, timings="fast",
                 note="the issue's cell with sds.Config.fast timings (2 s resend and sync)"),
    ]
    cells = [(s, list(_SIZES)) for s in scenarios]
    cells.append((r10, list(_FILTERS)))
    cells += [(s, list(_TIMINGS)) for s in (base, r10l3, r1l3, partition)]
    if name == "quick":
        return cells
    if name == "full":
        return [
            *cells,
            (Scenario("n100-r1-loss0.3", 100, 100, 1.0, 0.3), list(_SIZES)),
            (Scenario("n100-r100-loss0.1", 100, 500, 100.0, 0.1), ["waku", "default", "h20"]),
            (Scenario("n1000-r1-loss0.1", 1_000, 200, 1.0, 0.1), ["waku", "default", "h20"]),
            (Scenario("n1000-r1-loss0.1-m40", 1_000, 40, 1.0, 0.1,
                      note="40 messages: the waku profile's 200-message run takes hours"),
             ["waku", "default"]),
            (Scenario("n10000-r2-loss0.05", 10_000, 200, 2.0, 0.05, timings="fast",
                      note="sdschat sim -n 10000 -m 200 --loss 0.05 on the study's links; "
                      "the default only (the waku profile would take hours)"),
             ["default"]),
        ]
    raise ValueError(f"unknown grid {name!r} (ci, quick, full)")


def sds_default() -> dict[str, Any]:
    """``sds.Config()`` as a dict (what the ``default`` profile runs)."""
    import sds

    return sds.Config().to_dict()


def sim_spec(sc: Scenario, pr: Profile, seed: int, bandwidth: tuple[float, ...]) -> SimSpec:
    """The :class:`SimSpec` of one cell."""
    return SimSpec(
        participants=sc.participants,
        messages=sc.messages,
        loss=sc.loss,
        seed=seed,
        rate=sc.rate,
        senders=sc.senders,
        partitions=list(sc.partitions),
        churn=sc.churn,
        timings=sc.timings,
        drain_ms=None if sc.drain_s is None else int(sc.drain_s * 1000),
        profile=pr.base,
        history=pr.history,
        history_floor=pr.history_floor,
        bloom_capacity=pr.bloom_capacity,
        bloom_error=pr.bloom_error,
        bandwidth_mbps=bandwidth,
        protocol=dict(pr.protocol),
    )


# ----------------------------------------------------------------- the figures


def _pct(values: list[int], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return float(values[min(len(values) - 1, math.ceil(q * len(values)) - 1)])


def cell_metrics(run_dir: Path) -> dict[str, Any]:
    """A cell's figures computed from its ``events/*.parquet`` and ``run.json``."""
    import pyarrow.parquet as pq

    meta = json.loads((run_dir / "run.json").read_text())
    t = pq.read_table(
        run_dir / "events",
        columns=["node_id", "time_ms", "kind", "message_id", "detail", "size_bytes"],
    ).to_pydict()
    sent: dict[str, tuple[str, int]] = {}
    held: set[tuple[str, str]] = set()
    deliveries = 0
    lat: list[int] = []
    acks: list[tuple[str, str, int, bool]] = []
    counts: dict[str, int] = {}
    repair_bytes = 0
    lost_ids: set[str] = set()
    rows = zip(t["node_id"], t["time_ms"], t["kind"], t["message_id"], t["detail"],
               t["size_bytes"], strict=True)
    delivered_rows: list[tuple[str, str, int]] = []
    for node, now, kind, mid, detail, size in rows:
        counts[kind] = counts.get(kind, 0) + 1
        if kind == "MessageSent":
            sent[mid] = (node, now)
            held.add((node, mid))
        elif kind == "MessageDelivered":
            deliveries += 1
            held.add((node, mid))
            delivered_rows.append((node, mid, now))
        elif kind == "MessageAcknowledged":
            acks.append((node, mid, now, '"by_causal_history":true' in (detail or "")))
        elif kind == "RepairSent":
            repair_bytes += size or 0
        elif kind == "MessageLost":
            lost_ids.add(mid)
    for _node, mid, now in delivered_rows:
        s = sent.get(mid)
        if s is not None:
            lat.append(now - s[1])
    ack_t: list[int] = []
    by_causal = 0
    seen_ack: set[str] = set()
    for node, mid, now, causal in acks:
        s = sent.get(mid)
        if s is None or s[0] != node or mid in seen_ack:
            continue
        seen_ack.add(mid)
        ack_t.append(now - s[1])
        by_causal += causal
    n = meta["spec"]["participants"]
    m = meta["messages_sent"]
    net = meta["network"]
    expected = n * m
    return {
        "participants": n,
        "messages": m,
        "converged": meta["participants_holding_every_message"] == n,
        "holding_every_message": meta["participants_holding_every_message"],
        "missing_pairs": expected - len(held),
        "lost_messages": len(lost_ids),
        "duplicate_deliveries": deliveries - (len(held) - len(sent)),
        "latency_p50_ms": _pct(lat, 0.5),
        "latency_p99_ms": _pct(lat, 0.99),
        "acknowledged": len(ack_t),
        "acked_share": len(ack_t) / m if m else None,
        "ack_p50_ms": _pct(ack_t, 0.5),
        "ack_p99_ms": _pct(ack_t, 0.99),
        "acked_by_history_share": by_causal / len(ack_t) if ack_t else None,
        "resends_per_message": counts.get("MessageResent", 0) / m if m else None,
        "syncs": counts.get("SyncSent", 0),
        "repair_requests": counts.get("RepairRequested", 0),
        "repairs_sent": counts.get("RepairSent", 0),
        "repair_bytes": repair_bytes,
        "bytes_sent": net["bytes_sent"],
        "bytes_per_message": net["bytes_sent"] / m if m else None,
        "bytes_received_per_delivery": net["bytes"] / deliveries if deliveries else None,
        "queue_wait_s": net.get("queue_wait_ms", 0) / 1000,
        "sim_wall_s": meta["wall_seconds"],
        "config": {k: meta["config"][k] for k in ("causal_history_size", "causal_history_floor",
                                                  "bloom_capacity", "bloom_error_rate")},
    }


def report_metrics(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per run label, the figures ``sdschat report`` computed (its ``summary.json``)."""
    out: dict[str, dict[str, Any]] = {}
    for ch in summary["channels"]:
        conv, ack, cnt, ov = ch["convergence"], ch["acknowledgement"], ch["counts"], ch["overhead"]
        m = cnt["messages_sent"] or 0
        acked = ack.get("acknowledged", 0)
        wire = sum(ov.get(k, 0) for k in ("content_message_bytes", "sync_bytes", "resend_bytes",
                                           "repair_bytes"))
        out[ch["run"]] = {
            "converged": conv["converged"],
            "missing_pairs": conv["missing_pairs"],
            "duplicate_deliveries": conv["duplicate_deliveries"],
            "lost_messages": cnt["lost"]["messages"],
            "latency_p50_ms": ch["latency_ms"].get("p50"),
            "latency_p99_ms": ch["latency_ms"].get("p99"),
            "acknowledged": acked,
            "acked_share": acked / m if m else None,
            "ack_p50_ms": ack.get("p50"),
            "ack_p99_ms": ack.get("p99"),
            "acked_by_history_share": ack["by_causal_history"] / acked if acked else None,
            "resends_per_message": cnt["resends"] / m if m else None,
            "repair_requests": cnt["repair_requests"],
            "repairs_sent": cnt["repairs_sent"],
            "repair_bytes": ov.get("repair_bytes", 0),
            "report_wire_bytes_per_message": wire / m if m else None,
        }
    return out


# ----------------------------------------------------------------- the study


@dataclass
class StudyResult:
    cells: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    wall_s: float = 0.0


def run_study(
    grid_name: str,
    out: Path,
    *,
    seeds: tuple[int, ...] = (3,),
    bandwidth: tuple[float, ...] = (1.0, 20.0),
    budget_s: float = 1_800.0,
    report_dir: Path | None = None,
    only: set[str] | None = None,
    log: Any = None,
    scenarios: set[str] | None = None,
) -> StudyResult:
    """Run every cell of ``grid_name`` into ``out/cells``; figures per cell."""
    log = log or sys.stderr
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    res = StudyResult()
    runs: list[tuple[dict[str, Any], Path]] = []
    for sc, names in grid(grid_name):
        if scenarios and sc.name not in scenarios:
            continue
        for pname in names:
            if only and pname not in only:
                continue
            for seed in seeds:
                cell = f"{sc.name}/{pname}/{seed}"
                if time.monotonic() - started > budget_s:
                    res.skipped.append(cell)
                    continue
                pr = PROFILES[pname]
                spec = sim_spec(sc, pr, seed, bandwidth)
                d = out / "cells" / sc.name / pname / str(seed)
                if d.exists():
                    shutil.rmtree(d)
                r = run_sim(spec, d, force=True)
                row = {"scenario": sc.name, "profile": pname, "seed": seed,
                       "run": r.meta["run"], **cell_metrics(d)}
                res.cells.append(row)
                runs.append((row, d))
                print(f"{cell:36} bytes/msg {row['bytes_per_message']:>9,.0f}  "
                      f"ack p99 {row['ack_p99_ms'] or float('nan'):>7,.0f} ms  "
                      f"converged {row['converged']}  wall {row['sim_wall_s']:.1f} s",
                      file=log, flush=True)
    if report_dir is not None and runs:
        summary = _report(report_dir, [d for _, d in runs])
        by_run = report_metrics(summary)
        for row, _ in runs:
            rep = by_run.get(row["run"])
            if rep is None:
                continue
            # both analyses read the same events: they must agree
            for key in ("converged", "duplicate_deliveries", "acknowledged"):
                if rep[key] != row[key]:
                    raise AssertionError(f"{row['scenario']}/{row['profile']}: {key} is "
                                         f"{row[key]} here, {rep[key]} in the report")
            row["own"] = {k: row[k] for k in rep if k in row}
            row.update(rep)
            row["analysed_by"] = "sdschat report"
    res.wall_s = round(time.monotonic() - started, 1)
    return res


def _report(report_dir: Path, inputs: list[Path]) -> dict[str, Any]:
    """One ``sdschat report`` over every cell (one Spark session)."""
    from pipeline.report import compute_report, write_report
    from pipeline.spark import make_session

    spark = make_session("local[2]", shuffle_partitions=8)
    spark.sparkContext.setLogLevel("OFF")
    try:
        summary = compute_report(spark, inputs)
        write_report(summary, report_dir)
    finally:
        spark.stop()
    return summary


# ----------------------------------------------------------------- output


def _fmt(v: Any, kind: str = "") -> str:
    if v is None:
        return "-"
    if kind == "pct":
        return f"{100 * v:.0f}%"
    if kind == "bool":
        return "yes" if v else "**no**"
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) < 10 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


_COLUMNS = (
    ("profile", "profile", ""),
    ("converged", "converged", ""),
    ("missing_pairs", "missing", ""),
    ("lost_messages", "lost", ""),
    ("duplicate_deliveries", "dup", ""),
    ("bytes_per_message", "bytes/msg", ""),
    ("bytes_received_per_delivery", "rx bytes/delivery", ""),
    ("latency_p50_ms", "latency p50", ""),
    ("latency_p99_ms", "latency p99", ""),
    ("acked_share", "acked", "pct"),
    ("ack_p50_ms", "ack p50", ""),
    ("ack_p99_ms", "ack p99", ""),
    ("acked_by_history_share", "by history", "pct"),
    ("resends_per_message", "resends/msg", ""),
    ("repair_requests", "repair req", ""),
    ("repairs_sent", "repairs", ""),
    ("repair_bytes", "repair bytes", ""),
)


_SUMMED = ("missing_pairs", "lost_messages", "duplicate_deliveries", "repair_requests",
           "repairs_sent", "repair_bytes")


def aggregate(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (scenario, profile) over its seeds: converged as "k/n", counts
    summed, the other figures averaged."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in cells:
        groups.setdefault((c["scenario"], c["profile"]), []).append(c)
    out = []
    for (scen, prof), rows in groups.items():
        agg: dict[str, Any] = {"scenario": scen, "profile": prof, "seeds": len(rows)}
        ok = sum(1 for r in rows if r["converged"])
        agg["converged"] = f"{ok}/{len(rows)}"
        agg["converged_all"] = ok == len(rows)
        for key, _, _ in _COLUMNS:
            if key in ("profile", "converged"):
                continue
            vals = [r[key] for r in rows if r.get(key) is not None]
            if key in _SUMMED:
                agg[key] = sum(vals)
            else:
                agg[key] = sum(vals) / len(vals) if vals else None
        out.append(agg)
    return out


def versus_md(res: StudyResult, a: str = "waku", b: str = "default") -> str:
    """Profile ``b`` against ``a``, one row per scenario where both ran (seeds
    aggregated as in :func:`table_md`)."""
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for c in aggregate(res.cells):
        rows.setdefault(c["scenario"], {})[c["profile"]] = c
    out = [
        f"| scenario | {a} bytes/msg | {b} bytes/msg | ratio | converged {a} / {b} "
        f"| lost {a} / {b} | ack p99 {a} / {b} (s) | delivery p50 {a} / {b} (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def s(v: float | None) -> str:
        return "-" if v is None else f"{v / 1000:.1f}"

    for scen, by in rows.items():
        if a not in by or b not in by:
            continue
        x, y = by[a], by[b]
        ratio = (f"{x['bytes_per_message'] / y['bytes_per_message']:.0f}x"
                 if x["bytes_per_message"] and y["bytes_per_message"] else "-")
        out.append(
            f"| {scen} | {_fmt(x['bytes_per_message'])} | {_fmt(y['bytes_per_message'])} | "
            f"{ratio} | {x['converged']} / {y['converged']} | {x['lost_messages']} / "
            f"{y['lost_messages']} | {s(x['ack_p99_ms'])} / {s(y['ack_p99_ms'])} | "
            f"{s(x['latency_p50_ms'])} / {s(y['latency_p50_ms'])} |"
        )
    return "\n".join(out) + "\n"


def table_md(res: StudyResult) -> str:
    """The study as Markdown: one table per scenario, one row per profile (seeds
    aggregated: convergence k/n, counts summed, the rest averaged)."""
    lines: list[str] = []
    scenarios: dict[str, list[dict[str, Any]]] = {}
    for c in aggregate(res.cells):
        scenarios.setdefault(c["scenario"], []).append(c)
    for name, rows in scenarios.items():
        lines.append(f"#### {name}")
        lines.append("")
        lines.append("| " + " | ".join(h for _, h, _ in _COLUMNS) + " |")
        lines.append("|" + "---|" * len(_COLUMNS))
        for r in rows:
            lines.append("| " + " | ".join(_fmt(r.get(k), kind) for k, _, kind in _COLUMNS)
                         + " |")
        lines.append("")
    if res.skipped:
        lines.append(f"Skipped (time budget): {', '.join(res.skipped)}")
        lines.append("")
    return "\n".join(lines)


_COLOURS = ("#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
            "#17becf", "#7f7f7f", "#bcbd22", "#393b79", "#637939", "#000000", "#ff9896",
            "#98df8a", "#aec7e8", "#c5b0d5", "#dbdb8d")


def chart_svg(res: StudyResult, title: str = "bytes per content message vs ack p99") -> str:
    """Scatter, log-log: bytes on the wire per content message vs acknowledgement
    p99, one colour per profile, one point per scenario (seeds averaged)."""
    pts = [(c["profile"], c["scenario"], c["bytes_per_message"], c["ack_p99_ms"])
           for c in aggregate(res.cells) if c["bytes_per_message"] and c["ack_p99_ms"]]
    w, h, ml, mr, mt, mb = 860, 500, 70, 200, 40, 50
    if not pts:
        return f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}"></svg>\n'
    xs = [math.log10(p[2]) for p in pts]
    ys = [math.log10(max(p[3], 1.0) / 1000) for p in pts]
    x0, x1 = math.floor(min(xs)), max(math.ceil(max(xs)), math.floor(min(xs)) + 1)
    y0, y1 = math.floor(min(ys)), max(math.ceil(max(ys)), math.floor(min(ys)) + 1)

    def sx(v: float) -> float:
        return ml + (math.log10(v) - x0) / (x1 - x0) * (w - ml - mr)

    def sy(ms: float) -> float:
        return h - mb - (math.log10(max(ms, 1.0) / 1000) - y0) / (y1 - y0) * (h - mt - mb)

    profiles = list(dict.fromkeys(p[0] for p in pts))
    colour = {p: _COLOURS[i % len(_COLOURS)] for i, p in enumerate(profiles)}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{ml}" y="22" font-size="15">{title}</text>']
    for e in range(x0, x1 + 1):
        x = sx(10.0**e)
        out.append(f'<line x1="{x:.1f}" y1="{mt}" x2="{x:.1f}" y2="{h - mb}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{h - mb + 16}" text-anchor="middle">'
                   f'{10 ** e:,} B</text>')
    for e in range(y0, y1 + 1):
        y = sy(1000 * 10.0**e)
        out.append(f'<line x1="{ml}" y1="{y:.1f}" x2="{w - mr}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{ml - 6}" y="{y + 4:.1f}" text-anchor="end">{10.0 ** e:g} s</text>')
    out.append(f'<text x="{(ml + w - mr) / 2}" y="{h - 12}" text-anchor="middle">bytes on the '
               'wire per content message (log)</text>')
    out.append(f'<text x="16" y="{(mt + h - mb) / 2}" transform="rotate(-90 16 '
               f'{(mt + h - mb) / 2})" text-anchor="middle">acknowledgement p99 (log)</text>')
    for prof, scen, b, a in pts:
        out.append(f'<circle cx="{sx(b):.1f}" cy="{sy(a):.1f}" r="4" fill="{colour[prof]}" '
                   f'fill-opacity="0.8"><title>{prof} / {scen}: {b:,.0f} B, '
                   f'{a / 1000:.2f} s</title></circle>')
    for i, prof in enumerate(profiles):
        y = mt + 10 + 18 * i
        out.append(f'<circle cx="{w - mr + 20}" cy="{y}" r="5" fill="{colour[prof]}"/>')
        out.append(f'<text x="{w - mr + 32}" y="{y + 4}">{prof}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_outputs(res: StudyResult, out: Path, header: dict[str, Any]) -> None:
    """``study.json``, ``study.md`` and ``bytes_vs_ack_p99.svg`` in ``out``."""
    (out / "study.json").write_text(json.dumps({**header, "wall_s": res.wall_s,
                                                "cells": res.cells, "skipped": res.skipped},
                                               indent=1) + "\n")
    (out / "study.md").write_text("### Default against waku\n\n" + versus_md(res) + "\n"
                                  + "### Full table\n\n" + table_md(res))
    (out / "bytes_vs_ack_p99.svg").write_text(chart_svg(res))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", choices=("ci", "quick", "full"), default="quick")
    ap.add_argument("--out", required=True, help="directory for the cells and the results")
    ap.add_argument("--report", default=None, metavar="DIR",
                    help="also run one `sdschat report` over every cell into DIR")
    ap.add_argument("--seeds", default="3", help="seeds, comma-separated (each cell runs once "
                    "per seed; the table aggregates them)")
    ap.add_argument("--bandwidth", default="1,20", help="link Mbit/s per participant (mod)")
    ap.add_argument("--budget", type=float, default=1_800.0,
                    help="seconds after which no new cell starts (default 1800)")
    ap.add_argument("--profiles", default="", help="only these profiles (comma-separated)")
    ap.add_argument("--scenarios", default="", help="only these scenarios (comma-separated)")
    ap.add_argument("--keep-cells", action="store_true", help="keep the cells' Parquet")
    ap.add_argument("--render", action="store_true",
                    help="only rewrite study.md and the chart from OUT/study.json")
    ap.add_argument("--merge", default="", metavar="STUDY.json,...",
                    help="with --render: first replace OUT/study.json's cells of each "
                    "(scenario, profile) in these studies by theirs (and add their runs)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.render:
        data = json.loads((out / "study.json").read_text())
        for path in (x for x in args.merge.split(",") if x):
            new = json.loads(Path(path).read_text())
            keys = {(c["scenario"], c["profile"]) for c in new["cells"]}
            data["cells"] = [c for c in data["cells"]
                             if (c["scenario"], c["profile"]) not in keys] + new["cells"]
            data.setdefault("runs", []).append(
                {k: new.get(k) for k in ("grid", "seeds", "date", "machine", "wall_s")}
                | {"cells": sorted(f"{s}/{p}" for s, p in keys)})
        res = StudyResult(data["cells"], data.get("skipped", []), data.get("wall_s", 0.0))
        header = {k: v for k, v in data.items() if k not in ("cells", "skipped", "wall_s")}
        write_outputs(res, out, header)
        print(f"wrote {out / 'study.md'}, {out / 'bytes_vs_ack_p99.svg'}")
        return 0
    bandwidth = tuple(float(x) for x in args.bandwidth.split(",") if x.strip())
    only = {p for p in args.profiles.split(",") if p} or None
    from machine import calibrate, describe

    cal = calibrate()
    seeds = tuple(int(x) for x in args.seeds.split(",") if x.strip())
    res = run_study(args.grid, out, seeds=seeds, bandwidth=bandwidth, budget_s=args.budget,
                    report_dir=Path(args.report) if args.report else None, only=only,
                    scenarios={x for x in args.scenarios.split(",") if x} or None)
    header = {"grid": args.grid, "seeds": list(seeds), "bandwidth_mbps": list(bandwidth),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "machine": describe(cal)}
    write_outputs(res, out, header)
    if not args.keep_cells:
        shutil.rmtree(out / "cells", ignore_errors=True)
    print(table_md(res))
    print(f"{len(res.cells)} runs in {res.wall_s} s; {header['machine']}")
    print(f"wrote {out / 'study.json'}, {out / 'study.md'}, {out / 'bytes_vs_ack_p99.svg'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

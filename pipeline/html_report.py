"""The HTML reliability report: one self-contained file, charts as inline SVG.

No scripts, no fonts, no network: the report opens anywhere, offline.
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["bar_chart_svg", "line_chart_svg", "render_html", "stacked_bar_svg"]

_W, _H = 560, 220
_PAD_L, _PAD_B, _PAD_T, _PAD_R = 56, 36, 12, 12
_COLORS = ("#2b6cb0", "#dd6b20", "#38a169", "#805ad5", "#e53e3e", "#718096")


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _axis(y_max: float, y_label: str, x_label: str) -> list[str]:
    parts = [
        f'<line x1="{_PAD_L}" y1="{_H - _PAD_B}" x2="{_W - _PAD_R}" y2="{_H - _PAD_B}" '
        'stroke="#333"/>',
        f'<line x1="{_PAD_L}" y1="{_PAD_T}" x2="{_PAD_L}" y2="{_H - _PAD_B}" stroke="#333"/>',
        f'<text x="{(_W + _PAD_L) / 2}" y="{_H - 4}" font-size="11" text-anchor="middle">'
        f"{_e(x_label)}</text>",
        f'<text x="12" y="{(_H - _PAD_B + _PAD_T) / 2}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 12 {(_H - _PAD_B + _PAD_T) / 2})">{_e(y_label)}</text>',
    ]
    for frac in (0.0, 0.5, 1.0):
        y = _H - _PAD_B - frac * (_H - _PAD_B - _PAD_T)
        val = y_max * frac
        label = f"{val:.0%}" if y_label.endswith("%") else f"{val:,.0f}"
        parts.append(
            f'<text x="{_PAD_L - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">'
            f"{label}</text>"
        )
    return parts


def bar_chart_svg(labels: list[str], values: list[int], y_label: str, x_label: str) -> str:
    """Vertical bars (a histogram); every other label shown when crowded."""
    if not values:
        return "<p><em>no data</em></p>"
    y_max = max(values) or 1
    n = len(values)
    plot_w = _W - _PAD_L - _PAD_R
    bw = plot_w / n
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
             f'role="img" aria-label="{_e(y_label)} by {_e(x_label)}">']
    parts += _axis(y_max, y_label, x_label)
    step = max(1, n // 10)
    for i, (lab, v) in enumerate(zip(labels, values, strict=True)):
        h = (v / y_max) * (_H - _PAD_B - _PAD_T)
        x = _PAD_L + i * bw
        parts.append(
            f'<rect x="{x + 1:.1f}" y="{_H - _PAD_B - h:.1f}" width="{max(1.0, bw - 2):.1f}" '
            f'height="{h:.1f}" fill="{_COLORS[0]}"><title>{_e(lab)}: {v:,}</title></rect>'
        )
        if i % step == 0:
            parts.append(
                f'<text x="{x + bw / 2:.1f}" y="{_H - _PAD_B + 12}" font-size="9" '
                f'text-anchor="middle">{_e(lab)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def line_chart_svg(xs: list[float], ys: list[float | None], y_label: str, x_label: str) -> str:
    """A line over 0..1 (e.g. the share of pairs held over time)."""
    pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
    if not pts:
        return "<p><em>no data</em></p>"
    x_max = max(xs) or 1.0
    plot_w = _W - _PAD_L - _PAD_R
    plot_h = _H - _PAD_B - _PAD_T
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
             f'role="img" aria-label="{_e(y_label)} over {_e(x_label)}">']
    parts += _axis(1.0, y_label, x_label)
    path = " ".join(
        f"{'M' if i == 0 else 'L'}{_PAD_L + x / x_max * plot_w:.1f},"
        f"{_H - _PAD_B - y * plot_h:.1f}"
        for i, (x, y) in enumerate(pts)
    )
    parts.append(f'<path d="{path}" fill="none" stroke="{_COLORS[2]}" stroke-width="2"/>')
    for frac in (0.0, 0.5, 1.0):
        parts.append(
            f'<text x="{_PAD_L + frac * plot_w:.1f}" y="{_H - _PAD_B + 12}" font-size="9" '
            f'text-anchor="middle">{x_max * frac / 1000:,.1f}s</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def stacked_bar_svg(parts_in: list[tuple[str, int]], title: str) -> str:
    """One horizontal bar split into named byte counts, with a legend."""
    total = sum(v for _, v in parts_in)
    if total <= 0:
        return "<p><em>no data</em></p>"
    h = 40 + 18 * len(parts_in)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{h}" role="img" '
           f'aria-label="{_e(title)}">']
    x = 10.0
    width = _W - 20
    for i, (name, v) in enumerate(parts_in):
        w = v / total * width
        color = _COLORS[i % len(_COLORS)]
        out.append(f'<rect x="{x:.1f}" y="8" width="{w:.1f}" height="22" fill="{color}">'
                   f"<title>{_e(name)}: {v:,} bytes</title></rect>")
        x += w
        out.append(f'<rect x="10" y="{40 + 18 * i}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="26" y="{49 + 18 * i}" font-size="11">{_e(name)}: {v:,} bytes '
                   f"({v / total:.1%})</text>")
    out.append("</svg>")
    return "".join(out)


def _table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    if not rows:
        return "<p><em>none</em></p>"
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{_e(_cell(r.get(c)))}</td>" for c in cols) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, list):
        return ", ".join(str(x) for x in v)
    if isinstance(v, float):
        return f"{v:,.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _share(v: float | None) -> str:
    """A ratio as a percentage (0.9993 -> "99.9%")."""
    return "-" if v is None else f"{v:.1%}"


def _counts(d: dict[str, int]) -> str:
    """Counts by reason: "timeout: 3, no route: 1", or "none"."""
    if not d:
        return "none"
    return ", ".join(f"{k}: {v:,}" for k, v in sorted(d.items(), key=lambda kv: -kv[1]))


def _listed_note(listed: int, total: int, detail: str) -> str:
    if total <= listed:
        return ""
    return (f"<p>The first {listed:,} of {total:,} are listed; the Parquet detail "
            f"{_e(detail)} has all of them.</p>")


def _channel_section(c: dict[str, Any]) -> str:
    conv = c["convergence"]
    causal = c["causal_order"]
    lat = c["latency_ms"]
    ack = c["acknowledgement"]
    ov = c["overhead"]
    lost = c["counts"]["lost"]
    name = f"{c['run']} / {c['channel']}"
    status = {None: "no messages", True: "converged", False: "NOT converged"}[conv["converged"]]
    cls = "ok" if conv["converged"] is not False and causal["ok"] else "bad"
    hist = c["latency_histogram"]
    edges = hist["edges_ms"]
    labels = [f"{edges[i]:g}" for i in range(len(hist["counts"]))]
    over = conv["over_time"]
    xs = [over["bucket_ms"] * (i + 1) for i in range(len(over["held_share"]))]
    overhead_parts = [
        ("content", ov.get("content_bytes", 0)),
        ("metadata of content messages", ov.get("metadata_bytes", 0)),
        ("sync messages", ov.get("sync_bytes", 0)),
        ("resends", ov.get("resend_bytes", 0)),
        ("repairs", ov.get("repair_bytes", 0)),
    ]
    facts = [
        ("participants", c["participants"]), ("messages", c["messages"]),
        ("events", c["events"]), ("source", c["source"]),
        ("missing (participant, message) pairs", conv["missing_pairs"]),
        ("messages missing somewhere", conv["messages_missing_somewhere"]),
        ("duplicate deliveries", conv["duplicate_deliveries"]),
        ("messages with inconsistent Lamport timestamps", conv["lamport_inconsistent_messages"]),
        ("causal-order violations", causal["violations"]),
        ("dependencies checked", causal.get("checked_dependencies", 0)),
        ("latency p50 / p90 / p99 / max (ms)",
         f"{_cell(lat.get('p50'))} / {_cell(lat.get('p90'))} / {_cell(lat.get('p99'))} / "
         f"{_cell(lat.get('max'))}"),
        ("time to acknowledgement p50 / p99 (ms)",
         f"{_cell(ack.get('p50'))} / {_cell(ack.get('p99'))}"),
        ("acknowledged (causal history / bloom filter)",
         f"{_cell(ack.get('acknowledged'))} ({_cell(ack.get('by_causal_history'))} / "
         f"{_cell(ack.get('by_bloom_filter'))})"),
        ("unacknowledged at end", ack.get("unacknowledged_at_end")),
        ("send failures", _counts(ack.get("failed", {}))),
        ("resends", c["counts"]["resends"]), ("syncs sent", c["counts"]["syncs_sent"]),
        ("repair requests (ids)",
         f"{c['counts']['repair_requests']:,} ({c['counts']['repair_ids_requested']:,})"),
        ("repairs sent", c["counts"]["repairs_sent"]),
        ("store retrievals", c["counts"]["store_retrievals"]),
        ("declared lost (messages / participant pairs)",
         f"{lost['messages']:,} / {lost['pairs']:,}; received later: "
         f"{lost['pairs_recovered']:,} pairs; never received: "
         f"{lost['messages_never_received']:,} messages"),
        ("drops by reason", _counts(c["counts"]["dropped"])),
        ("metadata bytes per content byte", ov.get("metadata_per_content_byte")),
        ("overhead share of bytes sent", _share(ov.get("overhead_ratio"))),
    ]
    facts_html = "".join(f"<tr><th>{_e(k)}</th><td>{_e(_cell(v))}</td></tr>" for k, v in facts)
    missing_note = (
        f"<p>The first {len(conv['missing'])} of {conv['messages_missing_somewhere']:,} "
        "messages are listed; the Parquet detail missing/ has every pair.</p>"
        if conv["missing_truncated"] else ""
    )
    return f"""
<section>
<h2>{_e(name)} <span class="{cls}">{_e(status)}; causal order
{'ok' if causal['ok'] else 'VIOLATED'}</span></h2>
<table class="facts">{facts_html}</table>
<div class="charts">
<figure>{bar_chart_svg(labels, hist["counts"], "deliveries", "latency from (ms)")}
<figcaption>Delivery latency (send to deliver, every receiver; half-octave bins)</figcaption>
</figure>
<figure>{line_chart_svg(xs, over["held_share"], "held %", "time since first event")}
<figcaption>Convergence over time: share of (participant, message sent so far) pairs held
</figcaption></figure>
<figure>{stacked_bar_svg(overhead_parts, "bytes sent")}
<figcaption>Protocol overhead: bytes broadcast, by purpose</figcaption></figure>
</div>
<h3>Missing messages</h3>
{_table(conv["missing"], ["message_id", "sender", "sent_at_ms", "missing_count",
                          "missing_since_ms", "noticed_by", "declared_lost_by", "missing_at"])}
{missing_note}
<h3>Causal-order violations</h3>
{_table(causal["violations_listed"], ["node_id", "message_id", "dependency", "violation", "seq",
                                      "dependency_seq"])}
{_listed_note(len(causal["violations_listed"]), causal["violations"], "causal_violations/")}
<h3>Slowest receivers (by p99)</h3>
{_table(c["slowest_receivers"], ["node_id", "deliveries", "p50", "p90", "p99", "max"])}
</section>"""


def _comparison(runs: list[dict[str, Any]]) -> str:
    """The runs side by side (only when the report covers more than one run)."""
    if len(runs) < 2:
        return ""
    rows = [{
        "run": r["run"], "participants": r["participants"], "messages": r["messages"],
        "converged": {None: "-", True: "yes", False: "NO"}[r["converged"]],
        "missing pairs": r["missing_pairs"], "lost": r["lost_messages"],
        "duplicates": r["duplicate_deliveries"], "causal violations": r["causal_violations"],
        "latency p99 ms": r["latency_p99_ms"], "ack p50 ms": r["ack_p50_ms"],
        "ack p99 ms": r["ack_p99_ms"], "resends": r["resends"], "repairs": r["repairs_sent"],
        "bytes per delivered message": r["bytes_per_delivered_message"],
    } for r in runs]
    return ("<h2>Runs compared</h2><p>One row per run (runs.csv, runs.parquet); a run with "
            "several channels: counts summed, percentiles of its worst channel.</p>"
            + _table(rows, list(rows[0])))


def render_html(summary: dict[str, Any]) -> str:
    """The whole report page."""
    rows = []
    for c in summary["channels"]:
        rows.append({
            "run/channel": f"{c['run']}/{c['channel']}",
            "participants": c["participants"],
            "messages": c["messages"],
            "converged": {None: "-", True: "yes", False: "NO"}[c["convergence"]["converged"]],
            "missing pairs": c["convergence"]["missing_pairs"],
            "causal violations": c["causal_order"]["violations"],
            "latency p50 ms": c["latency_ms"].get("p50"),
            "latency p99 ms": c["latency_ms"].get("p99"),
            "resends": c["counts"]["resends"],
            "repairs": c["counts"]["repairs_sent"],
            "lost": c["counts"]["lost"]["messages_never_received"],
        })
    cols = list(rows[0]) if rows else []
    comparison = _comparison(summary.get("comparison") or [])
    caveats = "".join(f"<li>{_e(n)}</li>" for n in summary.get("caveats", []))
    sections = "".join(_channel_section(c) for c in summary["channels"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>sdschat reliability report</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; max-width: 1200px; }}
table {{ border-collapse: collapse; margin: .5em 0; font-size: 13px; }}
th, td {{ border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }}
table.facts th {{ background: #f4f4f4; font-weight: normal; }}
.ok {{ color: #276749; }} .bad {{ color: #c53030; }}
.charts {{ display: flex; flex-wrap: wrap; gap: 1em; }}
figure {{ margin: 0; }} figcaption {{ font-size: 12px; color: #555; max-width: 560px; }}
td {{ max-width: 420px; overflow-wrap: anywhere; }}
</style></head><body>
<h1>sdschat reliability report</h1>
<p>{summary['rows']:,} events from {summary['files']} file(s): {_e(', '.join(summary['inputs']))}.
Computed on Spark ({_e(summary.get('master', '?'))}) in {_e(summary.get('spark_seconds', '?'))} s.
This report is complete: every channel in the input is below.</p>
{_table(rows, cols)}
{comparison}
{'<h3>Notes</h3><ul>' + caveats + '</ul>' if caveats else ''}
{sections}
</body></html>
"""

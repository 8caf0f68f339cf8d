"""The HTML reliability report: one self-contained file, charts as inline SVG.

No scripts, no fonts, no network: the report opens anywhere, offline.
"""

from __future__ import annotations

import html
from typing import Any

from pipeline.stories import CAUSE_WORDS, absolute, seconds, short_id

__all__ = ["GLOSSARY", "bar_chart_svg", "explain_html", "glossary_html", "line_chart_svg",
           "missing_words", "nice_ticks", "render_html", "stacked_bar_svg", "timeline_svg"]

_W, _H = 560, 220
_PAD_L, _PAD_B, _PAD_T, _PAD_R = 56, 36, 12, 12
_COLORS = ("#2b6cb0", "#dd6b20", "#38a169", "#805ad5", "#e53e3e", "#718096")


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def nice_ticks(v_max: float, n: int = 4) -> list[float]:
    """Round tick values from 0 to at least ``v_max``: steps of 1, 2 or 5 x 10^k."""
    import math

    if v_max <= 0:
        return [0.0, 1.0]
    raw = v_max / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    count = math.ceil(v_max / step - 1e-9)
    return [i * step for i in range(count + 1)]


def _tick_label(v: float, percent: bool = False) -> str:
    if percent:
        return f"{v:.0%}"
    return f"{v:,.0f}" if v == int(v) else f"{v:,.2g}"


def _axis(y_max: float, y_label: str, x_label: str,
          ticks: list[float] | None = None) -> list[str]:
    parts = [
        f'<line x1="{_PAD_L}" y1="{_H - _PAD_B}" x2="{_W - _PAD_R}" y2="{_H - _PAD_B}" '
        'stroke="#333"/>',
        f'<line x1="{_PAD_L}" y1="{_PAD_T}" x2="{_PAD_L}" y2="{_H - _PAD_B}" stroke="#333"/>',
        f'<text x="{(_W + _PAD_L) / 2}" y="{_H - 4}" font-size="11" text-anchor="middle">'
        f"{_e(x_label)}</text>",
        f'<text x="12" y="{(_H - _PAD_B + _PAD_T) / 2}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 12 {(_H - _PAD_B + _PAD_T) / 2})">{_e(y_label)}</text>',
    ]
    for val in ticks or [0.0, y_max / 2, y_max]:
        y = _H - _PAD_B - (val / y_max if y_max else 0) * (_H - _PAD_B - _PAD_T)
        label = _tick_label(val, y_label.endswith("%"))
        parts.append(
            f'<text x="{_PAD_L - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">'
            f"{label}</text>"
        )
        parts.append(f'<line x1="{_PAD_L - 2}" y1="{y:.1f}" x2="{_PAD_L}" y2="{y:.1f}" '
                     'stroke="#333"/>')
    return parts


def _x_ticks_seconds(x_max_ms: float, plot_w: float) -> list[str]:
    """Round second marks under a time axis (the last one right-aligned: not clipped)."""
    ticks = nice_ticks(x_max_ms / 1000, 5)
    out = []
    for v in ticks:
        if v * 1000 > x_max_ms * 1.0001:
            break
        x = _PAD_L + v * 1000 / x_max_ms * plot_w
        anchor = "end" if x > _W - _PAD_R - 20 else "middle"
        out.append(f'<text x="{x:.1f}" y="{_H - _PAD_B + 12}" font-size="9" '
                   f'text-anchor="{anchor}">{_tick_label(v)} s</text>')
    return out


def bar_chart_svg(labels: list[str], values: list[int], y_label: str, x_label: str) -> str:
    """Vertical bars (a histogram); every other label shown when crowded."""
    if not values:
        return "<p><em>no data</em></p>"
    ticks = nice_ticks(max(values) or 1)
    y_max = ticks[-1]
    n = len(values)
    plot_w = _W - _PAD_L - _PAD_R
    bw = plot_w / n
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
             f'role="img" aria-label="{_e(y_label)} by {_e(x_label)}">']
    parts += _axis(y_max, y_label, x_label, ticks)
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
    parts += _axis(1.0, y_label, x_label, [0.0, 0.25, 0.5, 0.75, 1.0])
    path = " ".join(
        f"{'M' if i == 0 else 'L'}{_PAD_L + x / x_max * plot_w:.1f},"
        f"{_H - _PAD_B - y * plot_h:.1f}"
        for i, (x, y) in enumerate(pts)
    )
    parts.append(f'<path d="{path}" fill="none" stroke="{_COLORS[2]}" stroke-width="2"/>')
    parts += _x_ticks_seconds(x_max, plot_w)
    parts.append("</svg>")
    return "".join(parts)


def stacked_bar_svg(parts_in: list[tuple[str, int | None]], title: str) -> str:
    """One horizontal bar split into named byte counts, with a legend; a part whose
    size is None (not logged) is listed as "unknown", not drawn as 0 bytes."""
    known = [(k, v) for k, v in parts_in if v is not None]
    total = sum(v for _, v in known)
    if total <= 0:
        return "<p><em>no data</em></p>"
    h = 40 + 18 * len(parts_in)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{h}" role="img" '
           f'aria-label="{_e(title)}">']
    x = 10.0
    width = _W - 20
    for i, (name, v) in enumerate(parts_in):
        color = _COLORS[i % len(_COLORS)]
        if v is None:
            out.append(f'<rect x="10" y="{40 + 18 * i}" width="10" height="10" fill="none" '
                       f'stroke="{color}"/>')
            out.append(f'<text x="26" y="{49 + 18 * i}" font-size="11">{_e(name)}: unknown '
                       "(sizes not logged)</text>")
            continue
        w = v / total * width
        out.append(f'<rect x="{x:.1f}" y="8" width="{w:.1f}" height="22" fill="{color}">'
                   f"<title>{_e(name)}: {v:,} bytes</title></rect>")
        x += w
        out.append(f'<rect x="10" y="{40 + 18 * i}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="26" y="{49 + 18 * i}" font-size="11">{_e(name)}: {v:,} bytes '
                   f"({v / total:.1%} of the known)</text>")
    out.append("</svg>")
    return "".join(out)


#: The words of the report, each with one meaning (docs/report.md, "Glossary", says
#: the same: tests/pipeline/test_report_words.py checks it).
GLOSSARY = (
    ("never received", "a (participant, message) pair: the participant does not hold the "
     "message at the end of its log"),
    ("lost", "declared lost: a participant gave up on a message (it logged MessageLost "
     "after waiting for it for the lost timeout); the message may still arrive later"),
    ("received later", "declared lost, then held after all (a repair or a resend brought "
     "it)"),
    ("noticed", "the participant logged the message missing (MessagesMissing: a message or "
     "sync it received named it in its causal history)"),
    ("missing since", "when the participant first noticed the message missing, or when it "
     "was sent if it never noticed"),
    ("copy", "one broadcast of a message: its first send, a resend by its sender, or a "
     "repair answer by anyone"),
    ("offline", "logged offline (NodeOffline until NodeOnline, or to the end)"),
    ("silent", "logged nothing for more than 10 s while the others broadcast at least 5 "
     "times: not running, restarted, or cut off"),
    ("partitioned", "on the other side of a partition of the run (run.json) from a copy's "
     "broadcaster when the copy went out"),
    ("dropped by the network", "a copy went out while the participant was online and "
     "reachable, and never arrived"),
    ("waiting", "the message reached the participant, which holds it back until it has the "
     "dependencies the message names"),
    ("sender left", "nobody but its sender ever held the message, and the sender went "
     "offline for good"),
    ("times", "seconds since the run's first event; the absolute time (UTC) is in the "
     "tooltip and in missing.csv's sent_at_utc"),
    ("participants", "by name where the export knows one, else by the first 8 characters "
     "of the id; the tooltip has the full id"),
)


class Markup(str):
    """Text that is already HTML (a table cell not to escape again)."""


def _table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    if not rows:
        return "<p><em>none</em></p>"
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{_html_cell(r.get(c))}</td>" for c in cols) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html_cell(v: Any) -> str:
    if isinstance(v, Markup):
        return str(v)
    if isinstance(v, list) and v and all(isinstance(x, Markup) for x in v):
        return ", ".join(v)
    return _e(_cell(v))


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


def _s(ms: float | None, digits: int = 3) -> str:
    """A duration in ms as seconds ("0.070 s")."""
    return "-" if ms is None else f"{ms / 1000:,.{digits}f} s"


class _Page:
    """How one channel's section names participants and times: display names with
    the full id on hover, seconds since the run's start with the UTC time on hover."""

    def __init__(self, c: dict[str, Any]) -> None:
        people = (c.get("explain") or {}).get("participants") or {}
        self.names = {n: p.get("name") for n, p in people.items() if p.get("name")}
        self.r0 = int(c.get("run_start_ms") or 0)

    def who(self, node: Any) -> Markup:
        if node is None:
            return Markup("-")
        node = str(node)
        return Markup(f'<span title="{_e(node)}">{_e(self.names.get(node) or short_id(node))}'
                      "</span>")

    def msg(self, mid: Any) -> Markup:
        return Markup(f'<span title="{_e(mid)}">{_e(short_id(str(mid)))}</span>')

    def at(self, rel_ms: float | None) -> Markup:
        if rel_ms is None:
            return Markup("-")
        return Markup(f'<span title="{_e(absolute(int(self.r0 + rel_ms)))}">'
                      f"{_e(seconds(rel_ms))}</span>")


def _causes(d: dict[str, int]) -> str:
    return ", ".join(f"{k.replace('_', ' ')}: {v:,}"
                     for k, v in sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))) or "-"


def _channel_section(c: dict[str, Any]) -> str:
    conv = c["convergence"]
    causal = c["causal_order"]
    lat = c["latency_ms"]
    ack = c["acknowledgement"]
    ov = c["overhead"]
    lost = c["counts"]["lost"]
    page = _Page(c)
    name = f"{c['run']} / {c['channel']}"
    status = {None: "no messages", True: "converged", False: "NOT converged"}[conv["converged"]]
    cls = "ok" if conv["converged"] is not False and causal["ok"] else "bad"
    hist = c["latency_histogram"]
    edges = hist["edges_ms"]
    labels = [f"{edges[i] / 1000:g}" for i in range(len(hist["counts"]))]
    over = conv["over_time"]
    xs = [(c.get("start_ms") or 0) + over["bucket_ms"] * (i + 1)
          for i in range(len(over["held_share"]))]
    syncs_unknown = bool(ov.get("sync_messages")) and ov.get("sync_sizes_unknown") == ov.get(
        "sync_messages")
    overhead_parts: list[tuple[str, int | None]] = [
        ("content", ov.get("content_bytes", 0)),
        ("metadata of content messages", ov.get("metadata_bytes", 0)),
        (f"sync messages ({ov.get('sync_messages', 0):,})",
         None if syncs_unknown else ov.get("sync_bytes", 0)),
        ("resends", ov.get("resend_bytes", 0)),
        ("repairs", ov.get("repair_bytes", 0)),
    ]
    facts = [
        ("participants", c["participants"]), ("messages", c["messages"]),
        ("events", c["events"]), ("source", c["source"]),
        ("never received ((participant, message) pairs)", conv["missing_pairs"]),
        ("never received, by cause", _causes(conv.get("causes") or {})),
        ("messages never received somewhere", conv["messages_missing_somewhere"]),
        ("duplicate deliveries", conv["duplicate_deliveries"]),
        ("messages with inconsistent Lamport timestamps", conv["lamport_inconsistent_messages"]),
        ("causal-order violations", causal["violations"]),
        ("dependencies checked", causal.get("checked_dependencies", 0)),
        ("latency p50 / p90 / p99 / max",
         f"{_s(lat.get('p50'))} / {_s(lat.get('p90'))} / {_s(lat.get('p99'))} / "
         f"{_s(lat.get('max'))}"),
        ("time to acknowledgement p50 / p99", f"{_s(ack.get('p50'))} / {_s(ack.get('p99'))}"),
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
        ("lost (declared lost: messages / participant pairs)",
         f"{lost['messages']:,} / {lost['pairs']:,}; received later: "
         f"{lost['pairs_received_later']:,} pairs; never received: "
         f"{lost['pairs_never_received']:,} pairs"),
        ("drops by reason", _counts(c["counts"]["dropped"])),
        ("metadata bytes per content byte", ov.get("metadata_per_content_byte")),
        ("overhead share of bytes sent",
         _share(ov.get("overhead_ratio")) + (" (sync sizes unknown: not counted)"
                                             if syncs_unknown else "")),
    ]
    facts_html = "".join(f"<tr><th>{_e(k)}</th><td>{_e(_cell(v))}</td></tr>" for k, v in facts)
    missing_note = (
        f"<p>The first {len(conv['missing'])} of {conv['messages_missing_somewhere']:,} "
        "messages are listed; the Parquet detail missing/ has every pair.</p>"
        if conv["missing_truncated"] else ""
    )
    missing_rows = [{
        "message": page.msg(m["message_id"]), "sender": page.who(m["sender"]),
        "sent at": page.at(m["sent_at_ms"]), "never received by": m["missing_count"],
        "missing since": page.at(m["missing_since_ms"]), "noticed by": m["noticed_by"],
        "declared lost by": m["declared_lost_by"], "cause": _causes(m.get("causes") or {}),
        "at": [page.who(n) for n in m["missing_at"]],
    } for m in conv["missing"]]
    lost_rows = [{
        "message": page.msg(m["message_id"]), "sender": page.who(m["sender"]),
        "sent at": page.at(m["sent_at_ms"]), "declared lost by": m["declared_lost_by"],
        "first declared lost at": page.at(m["first_declared_lost_ms"]),
        "received later by": m["received_later_by"],
        "never received by": m["never_received_by"],
        "cause (of those that never received it)": _causes(m["causes"]),
    } for m in lost.get("listed") or []]
    violations = [{
        "participant": page.who(v["node_id"]), "message": page.msg(v["message_id"]),
        "dependency": page.msg(v["dependency"]), "violation": v["violation"].replace("_", " "),
        "seq": v["seq"], "dependency seq": v["dependency_seq"],
    } for v in causal["violations_listed"]]
    slowest = [{
        "receiver": page.who(r["node_id"]), "deliveries": r["deliveries"],
        "p50": _s(r["p50"]), "p90": _s(r["p90"]), "p99": _s(r["p99"]), "max": _s(r["max"]),
    } for r in c["slowest_receivers"]]
    return f"""
<section>
<h2>{_e(name)} <span class="{cls}">{_e(status)}; causal order
{'ok' if causal['ok'] else 'VIOLATED'}</span></h2>
<table class="facts">{facts_html}</table>
<div class="charts">
<figure>{bar_chart_svg(labels, hist["counts"], "deliveries", "latency from (s)")}
<figcaption>Delivery latency (send to deliver, every receiver; half-octave bins)</figcaption>
</figure>
<figure>{line_chart_svg(xs, over["held_share"], "held %", "time since the run's start")}
<figcaption>Convergence over time: share of (participant, message sent so far) pairs held
</figcaption></figure>
<figure>{stacked_bar_svg(overhead_parts, "bytes sent")}
<figcaption>Protocol overhead: bytes broadcast, by purpose</figcaption></figure>
</div>
{explain_html(c)}
<h3>Never received</h3>
<p class="why">{_e(missing_words(c))}</p>
{_table(missing_rows, list(missing_rows[0]) if missing_rows else [])}
{missing_note}
<h3>Lost (declared lost)</h3>
<p class="why">Messages a participant gave up on (<code>MessageLost</code>), with how many
received them later and why the others never did.</p>
{_table(lost_rows, list(lost_rows[0]) if lost_rows else [])}
{_listed_note(len(lost_rows), lost["messages"], "(the event log)")}
<h3>Causal-order violations</h3>
{_table(violations, ["participant", "message", "dependency", "violation", "seq",
                     "dependency seq"])}
{_listed_note(len(causal["violations_listed"]), causal["violations"], "causal_violations/")}
<h3>Slowest receivers (by p99)</h3>
{_table(slowest, ["receiver", "deliveries", "p50", "p90", "p99", "max"])}
</section>"""


def missing_words(c: dict[str, Any]) -> str:
    """Never received against lost, said plainly."""
    conv = c["convergence"]
    lost = c["counts"]["lost"]
    pairs = conv["missing_pairs"]
    if not pairs:
        return "Every participant holds every message."
    causes = conv.get("causes") or {}
    why = "; ".join(f"{v:,} {CAUSE_WORDS.get(k, k)}"
                    for k, v in sorted(causes.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"{pairs:,} (participant, message) pairs are never received: "
            f"{conv['messages_missing_somewhere']:,} messages absent somewhere, at "
            f"{conv['participants_missing_something']:,} participants"
            + (f" ({why})" if why else "") + ". Lost is another thing: a participant "
            f"declares a message lost when it gives up on it; {lost['pairs']:,} pairs were "
            f"declared lost ({lost['pairs_received_later']:,} of them received later). A pair "
            "never received and never declared lost is one the participant did not know "
            "about, or was still waiting for when its log ends. Each pair's cause is in "
            "missing.csv (cause, why).")


def _secs(ms: float | None) -> str:
    return seconds(ms)


def _who(p: dict[str, Any]) -> str:
    """A participant by name (export.json), else its id (shortened when a long hex id)."""
    node = str(p["node_id"])
    return p["name"] if p.get("name") else short_id(node)


def _periods(spans: list[list[Any]]) -> str:
    return "; ".join(f"{_secs(x[0])} – {_secs(x[1]) if x[1] is not None else 'end'}"
                     for x in spans) or "-"


def glossary_html() -> str:
    """The report's words and what each means."""
    return ("<h2>Words</h2><dl class=\"glossary\">" + "".join(
        f"<dt>{_e(term)}</dt><dd>{_e(meaning)}</dd>" for term, meaning in GLOSSARY)
        + "</dl>")


def explain_html(c: dict[str, Any]) -> str:
    """Participants, their stories, the timeline and the duplicates of one channel."""
    ex = c.get("explain") or {}
    people = sorted((ex.get("participants") or {}).values(),
                    key=lambda p: (p.get("name") or "", p["node_id"]))
    if not people:
        return ""
    page = _Page(c)
    n = c["messages"]
    rows = [{
        "participant": page.who(p["node_id"]), "first event": page.at(p["first_ms"]),
        "last event": page.at(p["last_ms"]), "joins": p["joins"],
        "holds": f"{p['held']:,} of {n:,}" if n else "-",
        "last message held at": page.at(p.get("last_held_ms")),
        "offline (logged)": _periods(p["offline"]),
        "silent (logged nothing while others broadcast)": _periods(p["silent"]),
    } for p in people]
    dups = ex.get("duplicates") or []
    dup_rows = [{"receiver": page.who(d["node_id"]), "message": page.msg(d["message_id"]),
                 "first held at": page.at(d["first_held_ms"]),
                 "times held": d["times_held"]} for d in dups]
    total_dups = c["convergence"]["duplicate_deliveries"]
    stories = c["convergence"].get("stories") or {}
    listed = list(stories.items())[:LISTED_STORIES]
    story_html = "".join(
        f'<p class="story"><strong>{page.who(node)}</strong>: {_e(text)}</p>'
        for node, text in listed) or "<p><em>Every participant holds every message.</em></p>"
    if len(stories) > len(listed):
        story_html += (f"<p>The {len(listed):,} participants lacking the most are told; "
                       f"{len(stories) - len(listed):,} more lack something (summary.json: "
                       "convergence.stories).</p>")
    return f"""
<h3>Participants</h3>
<p class="why">Who was there and when (seconds since the run's start). A participant
that was offline or not running misses what was sent meanwhile until a sync or repair brings
it; a restart shows as a silent period.</p>
{_table(rows, list(rows[0]))}
<h3>What happened to each participant</h3>
{story_html}
<h3>Timeline</h3>
{timeline_svg(c, people)}
<p class="why">Top: one lane per participant (green: logging events; red: logged offline;
grey: silent). Below: per time bucket, one chart per kind of event, each on its own scale
(the number at its left is its largest bucket): messages sent, noticed missing, repaired,
declared lost, retrieved from a store, drops by reason; duplicates dropped (copies of
messages already held, the normal cost of repairs and resends) last and apart.</p>
{conditions_html(ex.get("conditions"))}
<h3>Duplicate deliveries</h3>
{_table(dup_rows, ["receiver", "message", "first held at", "times held"]) if dup_rows
 else "<p><em>none</em></p>"}
{_listed_note(len(dup_rows), total_dups, "(the event log)")}
"""


#: Participants whose story the page tells (the most lacking first).
LISTED_STORIES = 50


def conditions_html(cond: dict[str, Any] | None) -> str:
    """The simulated run's conditions (run.json): loss, churn, partitions, and what
    the network did not deliver, by cause."""
    if not cond:
        return ""
    items = []
    if cond.get("loss"):
        items.append(f"random loss {cond['loss']:.0%} of deliveries")
    if cond.get("churn"):
        items.append(f"churn {cond['churn']:g} (participants going offline and back: the "
                     "red periods above)")
    for part in cond.get("partitions") or []:
        groups = " | ".join("{" + ", ".join(g) + "}" for g in part.get("groups") or [])
        heal = ("never healed" if part.get("heal_ms") is None
                else f"healed at {_secs(part['heal_ms'])}")
        items.append(f"partition from {_secs(part.get('start_ms'))}, {heal}: {groups} "
                     "(dashed box above)")
    nd = cond.get("not_delivered") or {}
    if nd:
        items.append("deliveries the network did not make: " + ", ".join(
            f"{v:,} {k}" for k, v in nd.items()))
    if not items:
        return ""
    return ("<h3>Conditions of the run</h3><ul>"
            + "".join(f"<li>{_e(x)}</li>" for x in items) + "</ul>")


_LANE_H = 12
#: The timeline's event charts: (kind, label, colour), then drops by reason.
_SERIES = (("MessageSent", "sent", _COLORS[0]),
           ("MessagesMissing", "noticed missing", _COLORS[1]),
           ("RepairSent", "repaired", _COLORS[2]),
           ("MessageLost", "declared lost", _COLORS[4]),
           ("StoreRetrieval", "retrieved from a store", _COLORS[3]))
#: Height of one event chart of the timeline (px).
_PANEL_H = 34


def timeline_svg(c: dict[str, Any], people: list[dict[str, Any]]) -> str:
    """Lanes per participant (at most 40) over the channel's span, then one small
    chart per kind of event, each on its own scale (bars per time bucket):
    sent, noticed missing, repaired, declared lost, store retrievals, drops by reason,
    and duplicates dropped last."""
    ex = c.get("explain") or {}
    tl = ex.get("timeline") or {}
    start = float(tl.get("start_ms", c.get("start_ms") or 0) or 0)
    span = max(1.0, float(c.get("duration_ms") or 1))
    lanes = people[:40]
    label_w = 150
    plot_w = _W + 200 - label_w - _PAD_R
    top = 8
    series = [(label, color, (tl.get("counts") or {}).get(kind))
              for kind, label, color in _SERIES]
    drops = sorted((tl.get("drops") or {}).items(), key=lambda kv: (kv[0] == "duplicate", kv[0]))
    for j, (reason, vals) in enumerate(drops):
        label = ("duplicates dropped (copies of held messages)" if reason == "duplicate"
                 else f"dropped: {reason}")
        series.append((label, _COLORS[5] if reason == "duplicate" else
                       _COLORS[(1 + 2 * j) % len(_COLORS)], vals))
    present = [(lab, col, v) for lab, col, v in series if v and any(v)]
    lanes_h = _LANE_H * len(lanes)
    counts_top = top + lanes_h + 30
    h = counts_top + (_PANEL_H + 10) * max(1, len(present)) + 24
    width = _W + 200
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" role="img" '
           f'aria-label="timeline">']

    def x_of(ms: float) -> float:
        return label_w + max(0.0, min(1.0, (ms - start) / span)) * plot_w

    for i, p in enumerate(lanes):
        y = top + i * _LANE_H
        out.append(f'<text x="{label_w - 4}" y="{y + 9}" font-size="9" text-anchor="end">'
                   f'<title>{_e(p["node_id"])}</title>{_e(_who(p))}</text>')
        out.append(f'<rect x="{x_of(p["first_ms"]):.1f}" y="{y + 1}" '
                   f'width="{max(1.0, x_of(p["last_ms"]) - x_of(p["first_ms"])):.1f}" '
                   f'height="{_LANE_H - 3}" fill="#9ae6b4"/>')
        for a, b, *_ in p["silent"]:
            out.append(f'<rect x="{x_of(a):.1f}" y="{y + 1}" '
                       f'width="{max(1.0, x_of(b) - x_of(a)):.1f}" height="{_LANE_H - 3}" '
                       f'fill="#cbd5e0"><title>silent {_secs(a)} – {_secs(b)}</title></rect>')
        for a, b in p["offline"]:
            end = start + span if b is None else b
            out.append(f'<rect x="{x_of(a):.1f}" y="{y + 1}" '
                       f'width="{max(1.0, x_of(end) - x_of(a)):.1f}" height="{_LANE_H - 3}" '
                       f'fill="#feb2b2"><title>offline {_secs(a)} – {_secs(b)}</title>'
                       "</rect>")
    for part in (ex.get("conditions") or {}).get("partitions") or []:
        a = part.get("start_ms") or 0
        b = start + span if part.get("heal_ms") is None else part["heal_ms"]
        bw = max(1.0, x_of(b) - x_of(a))
        out.append(f'<rect x="{x_of(a):.1f}" y="{top - 4}" width="{bw:.1f}" '
                   f'height="{lanes_h + 8}" fill="none" stroke="{_COLORS[3]}" '
                   f'stroke-dasharray="4 2"><title>partition {_secs(a)} \u2013 '
                   f'{_secs(part.get("heal_ms"))}</title></rect>')
    if len(people) > len(lanes):
        out.append(f'<text x="{label_w}" y="{top + lanes_h + 10}" font-size="9">'
                   f"{len(people) - len(lanes):,} more participants not drawn</text>")
    # one small chart per kind of event, each on its own scale
    for i, (lab, col, vals) in enumerate(present):
        y0 = counts_top + i * (_PANEL_H + 10) + _PANEL_H
        peak = max(vals) or 1
        n = len(vals)
        bw = plot_w / n
        out.append(f'<text x="{label_w - 4}" y="{y0 - _PANEL_H + 9}" font-size="9" '
                   f'text-anchor="end">{_e(lab)}</text>')
        out.append(f'<text x="{label_w - 4}" y="{y0 - _PANEL_H + 20}" font-size="8" '
                   f'text-anchor="end" fill="#555">max {peak:,} · total {sum(vals):,}</text>')
        out.append(f'<line x1="{label_w}" y1="{y0}" x2="{label_w + plot_w}" y2="{y0}" '
                   'stroke="#999"/>')
        for b, v in enumerate(vals):
            if not v:
                continue
            bh = max(1.0, v / peak * _PANEL_H)
            out.append(f'<rect x="{label_w + b * bw:.1f}" y="{y0 - bh:.1f}" '
                       f'width="{max(1.0, bw - 1):.1f}" height="{bh:.1f}" fill="{col}">'
                       f"<title>{_e(lab)}: {v:,}</title></rect>")
    y_axis = counts_top + len(present) * (_PANEL_H + 10) + 2
    for v in nice_ticks((start + span) / 1000, 6):
        if v * 1000 < start - 1 or v * 1000 > (start + span) * 1.0001:
            continue
        x = x_of(v * 1000)
        anchor = "end" if x > width - _PAD_R - 20 else "middle"
        out.append(f'<text x="{x:.1f}" y="{y_axis + 10}" font-size="9" text-anchor="{anchor}">'
                   f"{_tick_label(v)} s</text>")
    out.append("</svg>")
    return "".join(out)


def _comparison(runs: list[dict[str, Any]]) -> str:
    """The runs side by side (only when the report covers more than one run)."""
    if len(runs) < 2:
        return ""
    rows = [{
        "run": r["run"], "participants": r["participants"], "messages": r["messages"],
        "converged": {None: "-", True: "yes", False: "NO"}[r["converged"]],
        "never received (pairs)": r["missing_pairs"], "lost (messages)": r["lost_messages"],
        "duplicates": r["duplicate_deliveries"], "causal violations": r["causal_violations"],
        "latency p99": _s(r["latency_p99_ms"]), "ack p50": _s(r["ack_p50_ms"]),
        "ack p99": _s(r["ack_p99_ms"]), "resends": r["resends"], "repairs": r["repairs_sent"],
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
            "never received (pairs)": c["convergence"]["missing_pairs"],
            "lost (messages)": c["counts"]["lost"]["messages"],
            "causal violations": c["causal_order"]["violations"],
            "latency p50": _s(c["latency_ms"].get("p50")),
            "latency p99": _s(c["latency_ms"].get("p99")),
            "resends": c["counts"]["resends"],
            "repairs": c["counts"]["repairs_sent"],
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
p.why {{ font-size: 13px; color: #444; max-width: 900px; }}
p.story {{ font-size: 13px; max-width: 900px; margin: .3em 0; }}
dl.glossary {{ font-size: 13px; max-width: 900px; }} dl.glossary dt {{ font-weight: bold; }}
dl.glossary dd {{ margin: 0 0 .4em 1.5em; }}
span[title] {{ text-decoration: underline dotted #999; }}
</style></head><body>
<h1>sdschat reliability report</h1>
<p>{summary['rows']:,} events from {summary['files']} file(s): {_e(', '.join(summary['inputs']))}.
Computed on Spark ({_e(summary.get('master', '?'))}) in {_e(summary.get('spark_seconds', '?'))} s.
This report is complete: every channel in the input is below.</p>
{_table(rows, cols)}
{comparison}
{'<h3>Notes</h3><ul>' + caveats + '</ul>' if caveats else ''}
{sections}
{glossary_html()}
</body></html>
"""

"""The causes of missing pairs said in words: one line per pair (missing.csv's
``why``) and one paragraph per participant ("what happened to p019").

Plain Python over the figures :mod:`pipeline.causes` computed (no Spark). Times
are seconds since the run's start; participants go by name where the export
knows one, else by their id (shortened when long).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

__all__ = ["CAUSE_WORDS", "csv_row", "pair_why", "seconds", "short_id", "tell_stories"]

#: Each cause of :data:`pipeline.causes.CAUSES` in a few words (the HTML's legend).
CAUSE_WORDS = {
    "waiting": "reached it, but waits for dependencies it never got",
    "sender_left": "its sender left before anyone else had it",
    "offline": "offline while every copy went out",
    "partitioned": "partitioned away from every copy",
    "dropped": "dropped by the network",
    "unknown": "unknown (its sender's log is not in the input)",
}


def seconds(ms: float | None) -> str:
    """Milliseconds as seconds for people: "12.3 s" ("-" for None)."""
    return "-" if ms is None else f"{ms / 1000:,.1f} s"


def short_id(node: str) -> str:
    """A long (hex) id shortened to its first 8 characters."""
    return node if len(node) <= 12 else node[:8] + "…"


def absolute(ms: int | None) -> str | None:
    """An event time (ms since the epoch) as UTC ISO 8601, to the millisecond."""
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


class _Names:
    """Display names of a channel's participants (export.json names, else short ids)."""

    def __init__(self, c: dict[str, Any]) -> None:
        people = (c.get("explain") or {}).get("participants") or {}
        self.names = {n: p.get("name") for n, p in people.items() if p.get("name")}

    def __call__(self, node: str | None) -> str:
        if node is None:
            return "?"
        return self.names.get(node) or short_id(node)

    def several(self, nodes: list[str], limit: int = 5) -> str:
        shown = ", ".join(self(n) for n in nodes[:limit])
        return shown + (f" and {len(nodes) - limit:,} more" if len(nodes) > limit else "")


def _partition(cond: dict[str, Any] | None, i: int | None, side: int | None
               ) -> tuple[list[str], str]:
    """(the members of side ``side`` of partition ``i``, its times in words)."""
    parts = (cond or {}).get("partitions") or []
    if i is None or not 0 <= i < len(parts):
        return [], ""
    p = parts[i]
    groups = p.get("groups") or []
    members = groups[side - 1] if side and 0 < side <= len(groups) else []
    heal = "never healed" if p.get("heal_ms") is None else f"healed at {seconds(p['heal_ms'])}"
    return list(members), f"from {seconds(p.get('start_ms'))}, {heal}"


def _repair(r: dict[str, Any], r0: int) -> str:
    """Why a missing pair was never repaired."""
    if r["cause"] == "waiting":
        return ""
    noticed = r.get("noticed_ms")
    if r.get("lost_ms") is not None:
        return (f"; noticed at {seconds(noticed - r0)}" if noticed is not None else "") + \
            f"; declared lost at {seconds(r['lost_ms'] - r0)} (gave up on it)"
    if noticed is None:
        return "; never noticed missing (no message it received named it)"
    if r.get("requests"):
        return (f"; noticed at {seconds(noticed - r0)}, asked for a repair "
                f"{r['requests']:,} time(s), no answer reached it")
    return f"; noticed at {seconds(noticed - r0)}, never asked for a repair"


def pair_why(r: dict[str, Any], r0: int, cond: dict[str, Any] | None,
             who: Any = short_id) -> str:
    """One missing pair's cause in words (``r``: a row of the missing detail)."""
    cause = r["cause"]
    copies = r.get("copies") or 0
    them = f"{copies:,} cop{'y' if copies == 1 else 'ies'}"
    if cause == "waiting":
        head = (f"reached it at {seconds(r['waiting_ms'] - r0)} but waits for dependencies "
                "it never got")
    elif cause == "sender_left":
        head = (f"its sender {who(r['sender'])} left at {seconds(r['sender_left_ms'] - r0)} "
                "(offline for good) before anyone else had it")
    elif cause == "offline":
        a, b = r.get("offline_from_ms"), r.get("offline_to_ms")
        if a is None:
            head = f"not yet in the channel when its {them} went out"
        else:
            head = (f"offline from {seconds(a - r0)} to "
                    f"{'the end' if b is None else seconds(b - r0)}: all {them} went out "
                    "meanwhile")
    elif cause == "partitioned":
        members, when = _partition(cond, r.get("partition"), r.get("partition_side"))
        side = ", ".join(who(m) for m in members[:5]) + (
            f" and {len(members) - 5} more" if len(members) > 5 else "")
        head = (f"partitioned from {side or who(r.get('partitioned_from'))} ({when})"
                if when else f"partitioned from {who(r.get('partitioned_from'))}")
    elif cause == "dropped":
        d = r.get("dropped") or 0
        head = (f"dropped by the network {d:,} time(s) (of {copies:,} copies, sent while it "
                "was online and reachable)")
    else:
        head = "unknown: no copy of it is logged (its sender's log is not in the input)"
    return head + _repair(r, r0)


def csv_row(r: dict[str, Any], c: dict[str, Any], cond: dict[str, Any] | None
            ) -> dict[str, Any]:
    """A row of missing.csv: seconds since the run's start, the absolute send time in
    an extra column, names beside the ids, the cause and why."""
    r0 = c["run_start_ms"]
    who = _Names(c)

    def rel(ms: int | None) -> float | None:
        return None if ms is None else round((ms - r0) / 1000, 3)

    return {
        "run": r["run"], "channel": r["channel"], "message_id": r["message_id"],
        "sender": r["sender"], "sender_name": who(r["sender"]), "lamport": r["lamport"],
        "sent_s": rel(r["sent_ms"]), "sent_at_utc": absolute(r["sent_ms"]),
        "node_id": r["node_id"], "node_name": who(r["node_id"]),
        "noticed_s": rel(r.get("noticed_ms")), "declared_lost_s": rel(r.get("lost_ms")),
        "cause": r["cause"], "why": pair_why(r, r0, cond, who),
    }


def _group_words(g: dict[str, Any], r0: int, cond: dict[str, Any] | None, who: _Names
                 ) -> str:
    n = int(g["n"])
    cause = g["cause"]
    if cause == "offline":
        a, b = g.get("offline_from_ms"), g.get("offline_to_ms")
        if a is None:
            return f"{n:,} sent before it was in the channel"
        return (f"{n:,} sent while it was offline from {seconds(a - r0)} to "
                f"{'the end' if b is None else seconds(b - r0)}")
    if cause == "partitioned":
        members, when = _partition(cond, g.get("partition"), g.get("partition_side"))
        return f"{n:,} from the other side of a partition ({who.several(members)}; {when})"
    if cause == "sender_left":
        return (f"{n:,} whose sender {who(g.get('left_sender'))} left at "
                f"{seconds((g.get('sender_left_ms') or r0) - r0)} before anyone else had them")
    if cause == "dropped":
        return f"{n:,} dropped by the network ({int(g.get('dropped') or 0):,} copies lost)"
    if cause == "waiting":
        return f"{n:,} that reached it but wait for dependencies it never got"
    return f"{n:,} of unknown cause (their sender's log is not in the input)"


def tell_stories(c: dict[str, Any], cond: dict[str, Any] | None) -> None:
    """Each participant that lacks something gets ``story`` (in ``c["explain"]``'s
    participants, and ``c["convergence"]["stories"]``): what it lacks and why."""
    conv = c["convergence"]
    groups = conv.get("causes_by_participant") or {}
    who = _Names(c)
    r0 = c["run_start_ms"]
    people = (c.get("explain") or {}).get("participants") or {}
    stories: dict[str, str] = {}
    for node in sorted(groups, key=lambda n: (-sum(int(g["n"]) for g in groups[n]), n)):
        gs = sorted(groups[node], key=lambda g: (-int(g["n"]), g["cause"]))
        total = sum(int(g["n"]) for g in gs)
        parts = [_group_words(g, r0, cond, who) for g in gs]
        text = (f"{who(node)} never received {total:,} of the channel's {c['messages']:,} "
                f"messages: " + "; ".join(parts) + ".")
        unnoticed = sum(int(g["never_noticed"] or 0) for g in gs)
        lost = sum(int(g["declared_lost"] or 0) for g in gs)
        asked = sum(int(g["requested"] or 0) for g in gs)
        notes = []
        if unnoticed:
            notes.append(f"{unnoticed:,} it never noticed missing (no message it received "
                         "named them)")
        if asked:
            notes.append(f"it asked for a repair of {asked:,}, no answer reached it")
        if lost:
            notes.append(f"it declared {lost:,} lost (gave up on them)")
        if notes:
            text += " Of these, " + "; ".join(notes) + "."
        p = people.get(node)
        if p and p.get("silent"):
            text += (" It logged nothing for a while although others broadcast: "
                     + ", ".join(f"{seconds(a)} – {seconds(b)}" for a, b, *_ in p["silent"][:3])
                     + ".")
        stories[node] = text
        if p is not None:
            p["story"] = text
    conv["stories"] = stories

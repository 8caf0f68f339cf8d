"""Causal-order verification of ONE participant's log (runs in Spark's Python workers).

At a participant, every message it delivered (and every message it sent) must
come after each message named in its causal history, unless that dependency
was declared lost (``MessageLost``) before. "After" is the participant's own
event order (``seq``). A dependency is violated when it was held only later
(``delivered_after``) or never, without being declared lost (``never_held``).
A message held twice is a ``duplicate`` (delivery must be exactly once).
Rows whose causal history is unknown (null: a real node's export whose message
is no longer stored) are counted as ``unverifiable``.

:func:`check_participant` works on an Arrow table of one participant's
``MessageSent``/``MessageDelivered``/``MessageLost`` rows, vectorised (no
Python loop over history entries), so Spark's ``applyInArrow`` runs it per
``(run, channel, node_id)`` group.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["CHECK_SCHEMA", "MAX_VIOLATIONS_PER_NODE", "check_participant"]

#: Violations listed per participant (all are counted).
MAX_VIOLATIONS_PER_NODE = 200

#: Output: one ``summary`` row per participant, then its ``violation`` rows.
CHECK_SCHEMA = pa.schema(
    [
        ("row_type", pa.string()),
        ("run", pa.string()),
        ("channel", pa.string()),
        ("node_id", pa.string()),
        ("message_id", pa.string()),
        ("dependency", pa.string()),
        ("violation", pa.string()),
        ("seq", pa.int64()),
        ("dependency_seq", pa.int64()),
        ("checked_messages", pa.int64()),
        ("checked_dependencies", pa.int64()),
        ("violations", pa.int64()),
        ("delivered_after", pa.int64()),
        ("never_held", pa.int64()),
        ("duplicates", pa.int64()),
        ("unverifiable", pa.int64()),
    ]
)

_HELD = ("MessageSent", "MessageDelivered")


def _first_seq(ids: pa.Array, seqs: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Distinct ids with the smallest seq of each."""
    if len(ids) == 0:
        return pa.array([], pa.string()), pa.array([], pa.int64())
    t = pa.table({"id": ids, "seq": seqs}).group_by("id").aggregate([("seq", "min")])
    return t.column("id").combine_chunks(), t.column("seq_min").combine_chunks()


def check_participant(table: pa.Table) -> pa.Table:
    """Check one participant's rows (columns run, channel, node_id, seq, kind,
    message_id, causal_history); returns rows of :data:`CHECK_SCHEMA`."""
    if table.num_rows == 0:
        return CHECK_SCHEMA.empty_table()
    run = table.column("run")[0].as_py()
    channel = table.column("channel")[0].as_py()
    node = table.column("node_id")[0].as_py()
    table = table.sort_by([("seq", "ascending")])
    kind = table.column("kind")
    held = table.filter(pc.is_in(kind, pa.array(_HELD)))
    lost = table.filter(pc.equal(kind, "MessageLost"))

    held_ids = held.column("message_id").combine_chunks()
    held_seq = held.column("seq").combine_chunks()
    s_ids, s_seq = _first_seq(held_ids, held_seq)
    duplicates = len(held_ids) - len(s_ids)
    l_ids, l_seq = _first_seq(
        lost.column("message_id").combine_chunks(), lost.column("seq").combine_chunks()
    )

    hist = held.column("causal_history").combine_chunks()
    unverifiable = hist.null_count
    flat = pc.list_flatten(hist)
    parent = pc.list_parent_indices(hist)
    m_seq = held_seq.take(parent)
    m_ids = held_ids.take(parent)
    dep_seq = s_seq.take(pc.index_in(flat, value_set=s_ids))
    lost_seq = l_seq.take(pc.index_in(flat, value_set=l_ids)) if len(l_ids) else pa.nulls(
        len(flat), pa.int64()
    )
    self_ref = pc.equal(flat, m_ids)
    before = pc.fill_null(pc.less(dep_seq, m_seq), False)
    lost_before = pc.fill_null(pc.less(lost_seq, m_seq), False)
    ok = pc.or_(pc.or_(before, lost_before), pc.fill_null(self_ref, False))
    bad = pc.invert(ok)
    n_bad = pc.sum(bad).as_py() or 0
    checked_deps = len(flat) - (pc.sum(self_ref).as_py() or 0)

    rows: dict[str, list[object]] = {name: [] for name in CHECK_SCHEMA.names}

    def add(**kv: object) -> None:
        for name in CHECK_SCHEMA.names:
            rows[name].append(kv.get(name))

    after = never = 0
    if n_bad:
        v_dep = flat.filter(bad)
        v_msg = m_ids.filter(bad)
        v_seq = m_seq.filter(bad)
        v_dep_seq = dep_seq.filter(bad)
        after = len(v_dep_seq) - v_dep_seq.null_count
        never = v_dep_seq.null_count
        limit = min(len(v_dep), MAX_VIOLATIONS_PER_NODE)
        for i in range(limit):
            ds = v_dep_seq[i].as_py()
            add(
                row_type="violation", run=run, channel=channel, node_id=node,
                message_id=v_msg[i].as_py(), dependency=v_dep[i].as_py(),
                violation="delivered_after" if ds is not None else "never_held",
                seq=v_seq[i].as_py(), dependency_seq=ds,
            )
    add(
        row_type="summary", run=run, channel=channel, node_id=node,
        checked_messages=len(held_ids) - unverifiable, checked_dependencies=checked_deps,
        violations=n_bad, delivered_after=after, never_held=never, duplicates=duplicates,
        unverifiable=unverifiable,
    )
    return pa.table(rows, schema=CHECK_SCHEMA)

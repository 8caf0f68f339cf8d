"""bench/pipeline_report.py's synthetic event logs look like real ones where the
report checks them: every participant's ``seq`` runs 1, 2, 3... in time order."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
from pipeline_helpers import bench_module


def test_synthetic_logs_have_no_seq_gaps(tmp_path: Path) -> None:
    """Without this the report of every benchmark said each participant had lost
    events (seq gaps), and the gap check ran on data unlike a node's log."""
    written = bench_module().generate(tmp_path / "events", 30_000, 40, 10)
    rows = pq.read_table(tmp_path / "events", columns=["node_id", "seq", "time_ms", "kind"])
    assert rows.num_rows == written
    per_node: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in rows.to_pylist():
        per_node[r["node_id"]].append((r["seq"], r["time_ms"]))
    assert len(per_node) == 40
    for node, events in per_node.items():
        events.sort()
        assert [s for s, _ in events] == list(range(1, len(events) + 1)), node
        times = [t for _, t in events]
        assert times == sorted(times), node

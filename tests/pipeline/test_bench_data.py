"""bench/pipeline_report.py's synthetic event logs look like real ones where the
report checks them: every participant's ``seq`` runs 1, 2, 3... in time order."""

from __future__ import annotations

import importlib.util
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    path = ROOT / "bench" / "pipeline_report.py"
    spec = importlib.util.spec_from_file_location("pipeline_report_bench", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["pipeline_report_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_synthetic_logs_have_no_seq_gaps(tmp_path: Path) -> None:
    """Without this the report of every benchmark said each participant had lost
    events (seq gaps), and the gap check ran on data unlike a node's log."""
    written = _bench().generate(tmp_path / "events", 30_000, 40, 10)
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

"""bench/real_vs_sim.py at a smoke size (issue 28 item 3): real headless nodes on a
real relay over loopback, and the sim of the same script, agree on what must be equal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_real_nodes_and_the_sim_deliver_the_same_and_converge_alike(tmp_path: Path) -> None:
    out = tmp_path / "rvs.json"
    proc = subprocess.run(
        [sys.executable, "bench/real_vs_sim.py", "--nodes", "5", "--messages", "8",
         "--rate", "2", "--drop-rate", "0.05", "--drain", "12", "--time-scale", "1000",
         "--sim-seeds", "1", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert out.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())
    rows = {r["metric"]: r for r in result["compare"]}
    assert rows["content messages sent"]["real"] == 8
    for name in ("content messages sent", "content deliveries",
                 "members holding every message"):
        assert rows[name]["ok"], rows[name]
    assert rows["content deliveries"]["real"] == 8 * 4  # every line reached the 4 others
    assert rows["members holding every message"]["real"] == 5
    # the tap saw every content message that reached the relay and opened it
    real = result["real"]
    assert real["tap_errors"] == 0
    assert real["traffic"]["by_kind"]["content"]["broadcasts"] <= 8
    assert real["sds_bytes_per_message"] > 0 and result["sim"]["sds_bytes_per_message"] > 0

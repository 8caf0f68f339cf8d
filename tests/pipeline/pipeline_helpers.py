"""Small simulations and their Spark report, for tests/pipeline."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow.parquet as pq

from app.sim.simulation import SimSpec, run_sim
from pipeline.report import compute_report, write_report
from tests.procs import load_bench


def bench_module() -> ModuleType:
    """bench/pipeline_report.py (its synthetic event-log generator, ``generate``)."""
    return load_bench("pipeline_report")


def simulate(tmp: Path, name: str, **spec: Any) -> Path:
    """Run a small simulation into ``tmp/name``; returns the directory."""
    out = tmp / name
    run_sim(SimSpec(**spec), out)
    return out


def report(spark: Any, inputs: list[Path], out: Path) -> dict[str, Any]:
    """Compute and write the report; returns summary.json's content (as written)."""
    summary = compute_report(spark, inputs)
    write_report(summary, out)
    return summary


def channel(summary: dict[str, Any], name: str = "sim") -> dict[str, Any]:
    (c,) = [c for c in summary["channels"] if c["channel"] == name]
    return c


def events(run_dir: Path) -> list[dict[str, Any]]:
    return pq.read_table(run_dir / "events").to_pylist()

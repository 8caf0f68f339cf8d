"""Input checks that need no Spark: empty, not Parquet, wrong schema; the CLI's exit status."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.cli import main
from pipeline.report import ReportError, validate_inputs
from pipeline.schema import EVENT_SCHEMA


def test_no_input_files(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"no \.parquet files"):
        validate_inputs([tmp_path])


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no such file"):
        validate_inputs([tmp_path / "nope"])


def test_zero_rows(tmp_path: Path) -> None:
    pq.write_table(EVENT_SCHEMA.empty_table(), tmp_path / "e.parquet")
    with pytest.raises(ReportError, match="no events"):
        validate_inputs([tmp_path])


def test_not_parquet(tmp_path: Path) -> None:
    (tmp_path / "e.parquet").write_bytes(b"this is not parquet")
    with pytest.raises(ReportError, match="not a readable Parquet file"):
        validate_inputs([tmp_path])


def test_wrong_schema_names_the_problems(tmp_path: Path) -> None:
    pq.write_table(pa.table({"node_id": ["a"], "seq": ["1"]}), tmp_path / "e.parquet")
    with pytest.raises(ReportError, match="not an sdschat event log") as info:
        validate_inputs([tmp_path])
    assert "missing column 'kind'" in str(info.value)
    assert "column 'seq' is string, expected int64" in str(info.value)


def test_cli_exits_2_and_writes_nothing_on_empty_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    assert main(["report", str(tmp_path), "--out", str(out)]) == 2
    assert "no .parquet files" in capsys.readouterr().err
    assert not out.exists()

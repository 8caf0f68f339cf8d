"""``sdschat export``: SQLite event logs (filled through storage's Store API) -> Parquet -> report.

Three participants run the real SDS core over the in-memory network; what a
node would store (identity, channel, messages with their causal history, and
every core event through ``storage.events.event_row``) goes into one data
directory each through :class:`storage.Store`. The export of those data
directories must have exactly the simulation's Parquet schema and give the
same convergence and causal-order results as the simulator's own rows.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pipeline_helpers import channel, report

import sds
from app.cli import main
from net.memnet import MemNetwork
from pipeline.schema import EVENT_SCHEMA
from storage import Identity, Store, StoredMessage, event_row
from storage.export import ExportError, export_data_dirs

NAMES = ("alice", "bob", "carol")
CHANNEL = "room"


async def _fill(data_dir: Path, name: str, log: list[tuple[sds.Event, int]]) -> None:
    async with await Store.open(data_dir) as store:
        await store.save_identity(Identity(name.title(), name, b"k" * 32))
        await store.join_channel(CHANNEL, b"t" * 32, is_public=True, now_ms=log[0][1])
        messages = []
        for ev, now in log:
            if isinstance(ev, sds.MessageSent | sds.MessageDelivered):
                sender = name if isinstance(ev, sds.MessageSent) else ev.sender_id
                messages.append(StoredMessage(
                    CHANNEL, ev.message_id, sender, ev.lamport, ev.content,
                    causal_history=ev.causal_history, envelope=ev.data, received_at=now,
                ))
        await store.insert_messages(messages)
        for i in range(0, len(log), 50):  # several commits, like a running node
            await store.append_events(event_row(ev, now) for ev, now in log[i : i + 50])


@pytest.fixture(scope="module")
def data_dirs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    tmp = tmp_path_factory.mktemp("nodes")
    logs: dict[str, list[tuple[sds.Event, int]]] = {n: [] for n in NAMES}
    net = MemNetwork(seed=9, loss=0.25, latency_ms=(10, 60),
                     observer=lambda n, ev, now: logs[n].append((ev, now)))
    for n in NAMES:
        net.add_node(n, [CHANNEL], sds.Config.fast(1000))
    for i in range(12):
        for n in NAMES:
            net.send(n, CHANNEL, f"{n} {i}".encode())
            net.run_for(200)
    net.run_for(60_000)
    dirs = []
    for n in NAMES:
        d = tmp / n
        asyncio.run(_fill(d, n, logs[n]))
        dirs.append(d)
    return dirs


def test_export_has_the_sim_schema_and_every_event(data_dirs: list[Path], tmp_path: Path) -> None:
    result = export_data_dirs(data_dirs, tmp_path / "export", run="relay-run")
    files = sorted((tmp_path / "export" / "events").glob("*.parquet"))
    assert files
    for f in files:
        assert pq.read_schema(f).equals(EVENT_SCHEMA, check_metadata=False)
    table = pq.read_table(tmp_path / "export" / "events")
    assert table.num_rows == result.rows
    rows = table.to_pylist()
    assert {r["node_id"] for r in rows} == set(NAMES)
    assert {r["source"] for r in rows} == {"node"} and {r["run"] for r in rows} == {"relay-run"}
    delivered = [r for r in rows if r["kind"] == "MessageDelivered"]
    assert delivered and all(r["causal_history"] is not None for r in delivered)
    assert all(r["content_bytes"] and r["metadata_bytes"] == r["size_bytes"] - r["content_bytes"]
               for r in delivered)
    meta = json.loads((tmp_path / "export" / "export.json").read_text())
    assert set(meta["nodes"]) == set(NAMES)
    assert all(v["histories_not_stored"] == 0 for v in meta["nodes"].values())


def test_report_on_exported_logs(spark: Any, data_dirs: list[Path], tmp_path: Path) -> None:
    export_data_dirs(data_dirs, tmp_path / "export", run="relay-run")
    summary = report(spark, [tmp_path / "export"], tmp_path / "report")
    c = channel(summary, CHANNEL)
    assert c["source"] == "node" and c["participants"] == 3 and c["messages"] == 36
    assert c["convergence"]["converged"]
    assert c["causal_order"]["ok"] and c["causal_order"]["unverifiable"] == 0
    assert c["counts"]["deliveries"] == 36 * 2
    assert c["latency_ms"]["count"] == 72
    assert any("wall clocks" in n for n in summary["caveats"])


def test_export_refuses_bad_input(data_dirs: list[Path], tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="no sdschat database"):
        export_data_dirs([tmp_path], tmp_path / "out")
    with pytest.raises(ExportError, match="same participant"):
        export_data_dirs([data_dirs[0], data_dirs[0]], tmp_path / "out")
    assert not (tmp_path / "out").exists()
    export_data_dirs(data_dirs[:1], tmp_path / "out")
    with pytest.raises(ExportError, match="--force"):
        export_data_dirs(data_dirs[:1], tmp_path / "out")


def test_export_command_line(data_dirs: list[Path], tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x"
    assert main(["export", *map(str, data_dirs), "--out", str(out)]) == 0
    assert "participant(s)" in capsys.readouterr().out
    assert main(["export", str(tmp_path / "nope"), "--out", str(tmp_path / "y")]) == 2
    assert "not a directory" in capsys.readouterr().err

"""The sim's model of a real node's replay guard (SimSpec.replay_guard, used by
bench/real_vs_sim.py): a copy of a message the receiver holds (a resend, a repair
answer: the same bytes) goes to Channel.note_copy, as the node's guard does, instead
of reaching receive as a duplicate."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from app.sim.simulation import SimSpec, run_sim


def _duplicates(out: Path) -> int:
    t = pq.read_table(out / "events", columns=["kind", "detail"])
    drops = t.filter(pc.equal(t.column("kind"), "MessageDropped"))
    return sum(1 for d in drops.column("detail").to_pylist() if '"duplicate"' in (d or ""))


def test_copies_of_held_messages_go_to_note_copy_with_the_guard(tmp_path: Path) -> None:
    spec = dict(participants=30, messages=20, loss=0.2, seed=2)
    plain = run_sim(SimSpec(**spec), tmp_path / "plain")  # type: ignore[arg-type]
    guard = run_sim(SimSpec(**spec, replay_guard=True), tmp_path / "guard")  # type: ignore[arg-type]
    assert _duplicates(tmp_path / "plain") > 0  # answers and resends reached receive
    assert _duplicates(tmp_path / "guard") == 0  # the guard took them: note_copy
    for r in (plain, guard):
        assert r.meta["participants_holding_every_message"] == 30

"""States saved by commit 41573be load and behave identically on this tree.

``fixtures/saved_41573be`` was written by ``saved_state_scenario.py`` (its docstring
says how to regenerate it) with ``sds`` imported from 41573be: the 13 members'
exported ``ChannelState`` bytes after phase A (``saved/``), and the chained digest of
every step of phase A (from empty channels) and of phase B (restored from those
bytes): each call's return value, events, datagrams, timer and ``stats()``, and
every 64 steps each member's log, buffers, filter and exported state; and the
SHA-256 of every member's state at the end.

Here the same scenario runs on this tree: phase A must give the same steps and
export the same bytes; phase B, restored from the fixture's bytes (not from this
tree's own), the same steps and the same final states.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from saved_state_scenario import ROOT, digest, in_child

FIXTURE = Path(__file__).with_name("fixtures") / "saved_41573be"


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    meta: dict[str, Any] = json.loads((FIXTURE / "trace.json").read_text())
    assert meta["commit"].startswith("41573be")
    return meta


@pytest.fixture(scope="module")
def here() -> dict[str, Any]:
    out = in_child(["--sds", str(ROOT), "--saved", str(FIXTURE / "saved")])
    assert Path(out["sds"]) == ROOT / "sds"  # this tree's core, not an installed one
    return out


def _first_difference(want: list[str], got: list[str], labels: list[str]) -> str | None:
    for i, (w, g) in enumerate(zip(want, got, strict=False)):
        if w != g:
            return f"step {i} ({labels[i]}): {g} here, {w} at 41573be"
    if len(want) != len(got):
        return f"{len(got)} steps here, {len(want)} at 41573be"
    return None


def test_channels_behave_from_scratch_as_at_41573be(
    expected: dict[str, Any], here: dict[str, Any]
) -> None:
    diff = _first_difference(expected["steps_a"].split(), here["steps_a"], here["labels_a"])
    assert diff is None, diff
    saved = {p.stem: p.read_text() for p in (FIXTURE / "saved").glob("*.json")}
    assert len(saved) == 13
    assert here["saved"] == saved  # the same exported bytes, member by member


def test_states_saved_at_41573be_load_and_behave_identically(
    expected: dict[str, Any], here: dict[str, Any]
) -> None:
    diff = _first_difference(expected["steps_b"].split(), here["steps_b"], here["labels_b"])
    assert diff is None, diff
    assert {k: digest(v) for k, v in here["final"].items()} == expected["final_sha256"]


def test_the_scenario_exercises_the_core(expected: dict[str, Any]) -> None:
    """What the fixture covers (so that a smaller scenario cannot pass for it)."""
    seen = expected["seen"]
    for kind in ("MessageAcknowledged", "MessagePossiblyAcknowledged", "MessageResent",
                 "MessageSendFailed", "MessageLost", "MessageConflict", "RepairSent",
                 "RepairDataNeeded", "RepairRequestReceived", "SyncSent", "EphemeralReceived",
                 "call:note_carried", "call:receive_carried", "call:supply", "call:met",
                 "call:connected", "call:ask_sync", "drop:incoming_buffer_full",
                 "drop:sender_budget", "drop:saturated_filter", "drop:bad_filter",
                 "drop:unverifiable_id", "drop:clock_ahead"):
        assert seen.get(kind, 0) > 0, kind
    assert seen["carried"] > 100 and seen["call:restore"] == 13

"""The plain "↺ recovered" mark and the "✗ N messages lost" line read the same live and
after the person quits and starts again on the same data directory (the log is then
read from SQLite: ``messages.recovered``, ``messages.missing_before``), and in
``sdschat history`` (text and ``--json``).

The app runs on a real data directory; the messages come as sealed envelopes from
another author, in this order:

* "first", then "older" (sent before it, named by nothing): late by order;
* "waits" names "named" (unknown here), which comes next: late, it was named missing;
* "after the gap" names a message that never comes: given up as lost after the fast
  ``lost_timeout_ms``, "after the gap" is delivered with the line "✗ 1 message lost".
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from test_tui_recovered_restart import envelope
from tui_helpers import SIZE, screen_text, started, tui, wait_until

from app.chat.history import print_history
from app.node.runtime import wall_ms
from app.node.transport import MemoryHub
from app.tui import SdsChatApp
from net.identity import Identity

LATE = "↺ recovered"
LOST_LINE = "✗ 1 message lost"
TEXTS = ["older", "first", "named", "waits", "after the gap"]  # SDS (Lamport) order


def lines_of(app: SdsChatApp) -> dict[str, tuple[str, str]]:
    """text -> (its screen line, the screen line above it)."""
    screen = screen_text(app).splitlines()
    out = {}
    for text in TEXTS:
        found = [i for i, ln in enumerate(screen) if re.search(rf"│ {text}( |$)", ln)]
        assert len(found) == 1, (text, screen_text(app))
        out[text] = (screen[found[0]], screen[found[0] - 1])
    return out


async def test_the_late_mark_and_the_lost_line_read_the_same_after_a_restart(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "alice"
    mallory = Identity.generate()
    now = wall_ms()
    older_env, _ = envelope(mallory, "older", (), now)
    first_env, _ = envelope(mallory, "first", (), now + 10)
    named_env, named_id = envelope(mallory, "named", (), now + 20)
    waits_env, _ = envelope(mallory, "waits", (named_id,), now + 30)
    _, ghost_id = envelope(mallory, "never comes", (), now + 35)
    gap_env, _ = envelope(mallory, "after the gap", (ghost_id,), now + 40)

    app = tui(data_dir, MemoryHub().transport())
    async with app.run_test(size=SIZE) as pilot:
        await started(app)
        node = app.node
        assert node is not None
        rows = app.model.channels["general"].rows

        def shown(*texts: str) -> bool:
            have = {r.text for r in rows if not r.waiting}
            return all(t in have for t in texts)

        for env in (first_env, older_env, waits_env, named_env):
            await node._on_envelope(env)
        await wait_until(lambda: shown("first", "older", "named", "waits"), 10, "delivered")
        await node._on_envelope(gap_env)
        await wait_until(lambda: node.counters["lost"] == 1, 15, "the gap given up")
        await wait_until(lambda: shown("after the gap"), 10, "after the gap")
        await pilot.pause()
        await wait_until(lambda: LOST_LINE in screen_text(app), 10, "the lost line drawn")
        live = lines_of(app)
        late = {t for t, (line, _) in live.items() if LATE in line}
        assert late == {"older", "named"}, screen_text(app)
        assert [t for t, (_, above) in live.items() if LOST_LINE in above] == ["after the gap"]

    again = tui(data_dir, MemoryHub().transport())  # sdschat join again: history from SQLite
    async with again.run_test(size=SIZE) as pilot:
        await started(again)
        rows = again.model.channels["general"].rows
        await wait_until(lambda: {r.text for r in rows} >= set(TEXTS), 10, "reloaded")
        await pilot.pause()
        await wait_until(lambda: "after the gap" in screen_text(again), 10, "drawn")
        assert lines_of(again) == live

    out = io.StringIO()
    assert print_history(data_dir, "general", as_json=False, out=out) == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == len(TEXTS) + 1, lines
    assert [ln.strip() == LOST_LINE for ln in lines] == [False] * 4 + [True, False]
    marked = [ln.endswith(f"  {LATE}") for ln in lines]
    assert marked == [True, False, True, False, False, False], lines
    out = io.StringIO()
    assert print_history(data_dir, "general", as_json=True, out=out) == 0
    flags = [
        (o["content"], o["recovered"], o["missing_before"], o["was_lost"])
        for o in map(json.loads, out.getvalue().splitlines())
    ]
    assert flags == [
        ("older", True, 0, False),
        ("first", False, 0, False),
        ("named", True, 0, False),
        ("waits", False, 0, False),
        ("after the gap", False, 1, False),
    ]
